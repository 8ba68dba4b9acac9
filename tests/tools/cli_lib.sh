# Shared by the alkaid CLI tests: a scratch directory, a failure flag, and
# expect(), which runs a command and checks its exit code. Source it after
# `set -uo pipefail`; end the script with `exit $fail`.

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

expect() {  # expect <code> <description> <command...>; output in $work/out, $work/err
  local want=$1 what=$2
  shift 2
  "$@" >"$work/out" 2>"$work/err"
  local got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAILED: $what: exit $got, expected $want" >&2
    cat "$work/err" >&2
    fail=1
  fi
}

one_stderr_line() {  # one_stderr_line <description>: the last command wrote exactly one line
  [ "$(wc -l < "$work/err")" -eq 1 ] || { echo "FAILED: $1: expected one stderr line" >&2; cat "$work/err" >&2; fail=1; }
}
