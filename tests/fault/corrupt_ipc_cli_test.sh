#!/usr/bin/env bash
# Fault injection for the alkaid tool: IPC files and streams truncated at
# many points and with bytes flipped at many offsets, fed to
# `alkaid validate` and `alkaid cat`. Every run must end with exit code
# 0, 1 or 2 (never a signal, never a hang), print a message on stderr
# whenever it fails, and a truncated file (footer gone) must never pass.
# tests/tools/cli_test.sh has one truncated file and one corrupted stream;
# this covers cat as well as validate, both containers, several types,
# and every cut/flip position in a deterministic spread.
#   corrupt_ipc_cli_test.sh ALKAID GOLD_DIR
set -uo pipefail
alkaid=$1
gold=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
runs=0

# check <what> <must-fail:0|1> <input>: runs validate and cat on it.
check() {
  local what=$1 must_fail=$2 input=$3 cmd code
  for cmd in validate cat; do
    runs=$((runs + 1))
    timeout 60 "$alkaid" "$cmd" "$input" >/dev/null 2>"$work/err"
    code=$?
    if [ "$code" -eq 124 ]; then
      echo "FAILED: $cmd $what: no answer within 60 s" >&2; fail=1
    elif [ "$code" -gt 2 ]; then
      echo "FAILED: $cmd $what: exit $code (signal $((code - 128)) if > 128)" >&2
      head -c 2000 "$work/err" >&2; fail=1
    elif [ "$code" -ne 0 ] && [ ! -s "$work/err" ]; then
      echo "FAILED: $cmd $what: exit $code without a message" >&2; fail=1
    elif [ "$code" -eq 0 ] && [ "$must_fail" -eq 1 ]; then
      echo "FAILED: $cmd $what: accepted (exit 0)" >&2; fail=1
    fi
  done
}

for name in primitive nested dictionary union run_end_encoded; do
  for ext in arrow_file stream; do
    src="$gold/generated_$name.$ext"
    [ -f "$src" ] || { echo "FAILED: missing $src" >&2; fail=1; continue; }
    size=$(stat -c %s "$src")
    # Truncations: the first bytes, every 1/8th, and the last few bytes.
    cuts="0 4 7 12 $((size - 1)) $((size - 9))"
    for i in $(seq 1 7); do cuts="$cuts $((size * i / 8 + i))"; done
    for cut in $cuts; do
      [ "$cut" -ge 0 ] && [ "$cut" -lt "$size" ] || continue
      head -c "$cut" "$src" > "$work/cut"
      # A file without its footer is never valid; a stream cut exactly at a
      # message boundary may still read as a shorter stream.
      must=0; [ "$ext" = arrow_file ] && must=1
      check "$name.$ext cut to $cut of $size bytes" "$must" "$work/cut"
    done
    # Bit flips: 14 offsets spread over the file, each byte inverted.
    for i in $(seq 0 13); do
      off=$(( (size * i) / 14 + i % 7 ))
      [ "$off" -lt "$size" ] || continue
      cp "$src" "$work/flip"
      byte=$(od -An -tu1 -j "$off" -N1 "$src" | tr -d ' ')
      printf "$(printf '\\%03o' $(( 255 - byte )))" | dd of="$work/flip" bs=1 seek="$off" conv=notrunc status=none
      check "$name.$ext with byte $off inverted" 0 "$work/flip"
    done
  done
done

echo "corrupt_ipc_cli_test: $runs runs"
exit $fail
