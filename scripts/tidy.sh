#!/usr/bin/env bash
# Runs clang-tidy (clang-tidy-14, config: .clang-tidy) over Alkaid's own
# sources: common/, format/, libshm/, broker/, flight/, measure/, tools/, fuzz/, capi/src/ and
# python/src/, using the compile_commands.json of existing builds, and fails on any finding.
#   scripts/tidy.sh [BUILD_DIR...]
# Default build dirs: build/release, plus build/fuzz when it exists (the
# only build that compiles fuzz/). A source is checked once, with the first
# build dir that compiles it. Headers under those directories are checked
# through the sources that include them; generated flatbuffers headers
# and the protobuf/gRPC code generated for flight/ (both in the build tree)
# and third-party headers are not.
# ALKAID_JOBS sets the parallelism (default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

tidy=${CLANG_TIDY:-clang-tidy-14}
command -v "$tidy" >/dev/null 2>&1 || tidy=clang-tidy
command -v "$tidy" >/dev/null 2>&1 || { echo "tidy: clang-tidy is not installed (scripts/install-deps.sh)" >&2; exit 2; }

dirs=("$@")
if [ ${#dirs[@]} -eq 0 ]; then
  dirs=(build/release)
  [ -f build/fuzz/compile_commands.json ] && dirs+=(build/fuzz)
fi
jobs="${ALKAID_JOBS:-$(nproc)}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The files to check, per build dir: project sources not yet assigned.
python3 - "$root" "$work" "${dirs[@]}" <<'PY'
import json, os, re, sys
root, work, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
wanted = re.compile(r'^(common|format|libshm|broker|flight|measure|tools|fuzz|capi/src|python/src)/.*\.cc$')
seen = set()
for i, d in enumerate(dirs):
    db = os.path.join(root, d, 'compile_commands.json')
    if not os.path.exists(db):
        sys.exit(f'tidy: {db} not found: configure and build {d} first')
    files = []
    for entry in json.load(open(db)):
        path = os.path.normpath(os.path.join(entry['directory'], entry['file']))
        rel = os.path.relpath(path, root)
        if wanted.match(rel) and rel not in seen:
            seen.add(rel)
            files.append(path)
    with open(os.path.join(work, f'files.{i}'), 'w') as out:
        out.write('\n'.join(sorted(files)))
PY

header_filter="^$root/((common|format|libshm|flight|measure)/(include|src)|broker/(client|daemon|protocol)|tools/alkaid|fuzz|python/src)/"
status=0
total=0
: > "$work/log"

# Every NOLINT names its checks and gives a reason:
#   // NOLINT(check-name): why        (NOLINTNEXTLINE, NOLINTBEGIN likewise)
bare=$(grep -rnE 'NOLINT' --include='*.h' --include='*.cc' \
         common format libshm broker flight tools fuzz python tests examples bench 2>/dev/null |
       grep -vE 'NOLINTEND|NOLINT(NEXTLINE|BEGIN)?\([^)]+\): *[^ ]' || true)
if [ -n "$bare" ]; then
  echo "$bare"
  echo "tidy: NOLINT without a check name and a reason (// NOLINT(check): why)" >&2
  status=1
fi
for i in "${!dirs[@]}"; do
  dir=${dirs[$i]}
  mapfile -t files < "$work/files.$i"
  [ ${#files[@]} -eq 0 ] && continue
  total=$((total + ${#files[@]}))
  echo "tidy: ${#files[@]} sources with $dir/compile_commands.json, $jobs jobs" >&2
  # One clang-tidy per source, $jobs at a time; findings are errors.
  if ! printf '%s\n' "${files[@]}" |
       xargs -P "$jobs" -n 1 "$tidy" -p "$dir" --quiet --header-filter="$header_filter" \
         --warnings-as-errors='*' --extra-arg=-Wno-unknown-warning-option \
         >>"$work/log" 2>&1; then
    status=1
  fi
done

# Each finding once (a header's finding is reported by every source that
# includes it).
grep -E '^/.*: (warning|error): ' "$work/log" | sort -u > "$work/findings" || true
if [ -s "$work/findings" ]; then
  cat "$work/findings"
  echo "tidy: $(wc -l < "$work/findings") findings in $total sources" >&2
  exit 1
fi
if [ $status -ne 0 ]; then
  cat "$work/log" >&2
  echo "tidy: failed (see above)" >&2
  exit 1
fi
echo "tidy: $total sources, no findings" >&2
