#!/usr/bin/env bash
# scripts/check-skips.sh against made-up ctest summaries and a made-up page:
# a skipped test the page cites (by its whole name, a `Suite.*` pattern, or
# the part after its suite) fails; one it does not cite is allowed; no skip
# passes.
#   check_skips_test.sh SOURCE_DIR
set -uo pipefail
check="$1/scripts/check-skips.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/page.md" <<'PAGE'
| a promise | `Whole.Name`, `Pattern.*`, `SuiteLessCase`, `script_test` |
PAGE
fail=0
expect() {  # expect <exit code> <description> <ctest summary lines...>
  local want=$1 what=$2 got
  shift 2
  { echo "The following tests did not run:"; printf '\t%s\n' "$@"; } > "$work/log"
  "$check" "$work/log" "$work/page.md" > "$work/out" 2>&1
  got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAILED: $what: exit $got, expected $want" >&2
    cat "$work/out" >&2
    fail=1
  fi
}
expect 1 "a cited whole name" "12 - Whole.Name (Skipped)"
expect 1 "a cited pattern" "13 - Pattern.AnyCase (Skipped)"
expect 1 "a cited case without its suite" "14 - Prefix/Suite.SuiteLessCase (Skipped)"
expect 1 "a cited script test" "15 - script_test (Skipped)"
expect 1 "one cited among others" "16 - Other.Case (Skipped)" "17 - Whole.Name (Skipped)"
expect 0 "an uncited skip" "18 - Other.Case (Skipped)"
expect 0 "a name that only starts like a cited one" "19 - Whole.NameLonger (Skipped)"
expect 0 "no skip" "20 - Whole.Name (Failed)"
[ "$fail" -eq 0 ] && echo "check-skips: 8 cases as expected"
exit "$fail"
