#!/usr/bin/env bash
# Formats Alkaid's C++ sources with the repository's .clang-format
# (clang-format 14, Debian's; scripts/install-deps.sh installs it).
#   scripts/format.sh            rewrite every tracked .h/.cc file in place
#   scripts/format.sh --check    change nothing; list the files that differ
#                                and fail if any does (the CI stage `format`)
# Only files git tracks are touched: build trees, the venv and generated
# code are never formatted.
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
  *) echo "format.sh: unknown argument '$1' (--check)" >&2; exit 2 ;;
esac

clang_format=${CLANG_FORMAT:-clang-format}
if ! command -v "$clang_format" >/dev/null 2>&1; then
  echo "format.sh: $clang_format not found (scripts/install-deps.sh installs it)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files '*.h' '*.cc')
if [ ${#files[@]} -eq 0 ]; then
  echo "format.sh: no C++ files tracked by git here" >&2
  exit 2
fi

if [ $check -eq 0 ]; then
  "$clang_format" -i --style=file "${files[@]}"
  echo "format.sh: formatted ${#files[@]} files" >&2
  exit 0
fi
differ=()
for f in "${files[@]}"; do
  if ! "$clang_format" --style=file --dry-run -Werror "$f" >/dev/null 2>&1; then
    differ+=("$f")
  fi
done
if [ ${#differ[@]} -gt 0 ]; then
  printf '%s\n' "${differ[@]}"
  echo "format.sh: ${#differ[@]} of ${#files[@]} files differ from .clang-format;" \
       "run scripts/format.sh and commit the result" >&2
  exit 1
fi
echo "format.sh: ${#files[@]} files match .clang-format" >&2
