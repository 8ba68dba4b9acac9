#!/usr/bin/env bash
# Checks that every installed public header (<lib>/include/alkaid/**/*.h,
# except *_internal.h, which are never installed) is self-contained and
# includes, directly or transitively, nothing private: no flatbuffers, no
# Boost, no *_internal.h, no generated header (*_generated.h), nothing
# from a build tree or from a library's src/ directory.
# Each header is compiled alone (-fsyntax-only) with only the public
# include directories on the include path; the preprocessor's dependency
# list (-MM style, system headers included) is then scanned.
#   scripts/check-public-headers.sh [CXX]       (default: c++)
# ctest runs it as public_headers_test.
set -uo pipefail
cd "$(dirname "$0")/.."
cxx="${1:-c++}"

mapfile -t include_dirs < <(find . -path ./build -prune -o -path '*/include/alkaid' -type d -print |
                            sed 's|/alkaid$||' | sort)
if [ ${#include_dirs[@]} -eq 0 ]; then echo "no public include directories found" >&2; exit 1; fi
flags=(-std=c++20 -fsyntax-only)
for d in "${include_dirs[@]}"; do flags+=(-I "$d"); done

forbidden='flatbuffers|boost|_internal\.h|_generated\.h|/build/|/src/'
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
count=0
while IFS= read -r header; do
  rel=${header#*/include/}
  count=$((count + 1))
  printf '#include "%s"\n' "$rel" > "$work/tu.cc"
  if ! "$cxx" "${flags[@]}" -M -MF "$work/deps" "$work/tu.cc" 2>"$work/err"; then
    echo "FAILED: $rel does not compile alone with only the public include paths:" >&2
    head -n 20 "$work/err" >&2
    fail=1
    continue
  fi
  # One dependency per line, without the make rule's target and escapes.
  bad=$(tr ' \\' '\n\n' < "$work/deps" | grep -v ':$' | grep -E "$forbidden" | sort -u)
  if [ -n "$bad" ]; then
    echo "FAILED: $rel pulls in private or third-party headers:" >&2
    printf '  %s\n' $bad >&2
    fail=1
  fi
done < <(find "${include_dirs[@]}" -name '*.h' ! -name '*_internal.h' | sort)

echo "check-public-headers: $count public headers checked with $cxx"
exit $fail
