#!/usr/bin/env bash
# The alkaid tool's contract with scripts: exit codes, --help, errors on stderr.
#   cli_test.sh <alkaid> <gold-dir> <fuzz-corpus-dir>
set -uo pipefail
alkaid=$1
dir=$2
corpus=${3:-}
# shellcheck source=cli_lib.sh
source "$(dirname "$0")/cli_lib.sh"

expect 0 "--help" "$alkaid" --help
for sub in cat schema validate convert "integration validate" "integration json-to-ipc" "integration ipc-to-json"; do
  # shellcheck disable=SC2086
  expect 0 "$sub --help" "$alkaid" $sub --help
done
expect 2 "no subcommand" "$alkaid"
expect 2 "unknown subcommand" "$alkaid" frobnicate
expect 2 "bad option value" "$alkaid" convert a b --compression brotli
expect 2 "missing file" "$alkaid" validate "$work/does-not-exist"
expect 0 "valid file" "$alkaid" validate "$dir/generated_primitive.arrow_file"

# A truncated file and a corrupted stream are invalid (1), with one line on stderr.
head -c 500 "$dir/generated_primitive.arrow_file" > "$work/truncated"
expect 1 "truncated file" "$alkaid" validate "$work/truncated"
one_stderr_line "truncated file"
cp "$dir/generated_primitive.stream" "$work/flipped"
printf '\x7f\x7f\x7f\x7f' | dd of="$work/flipped" bs=1 seek=200 conv=notrunc status=none
"$alkaid" validate "$work/flipped" >/dev/null 2>&1
code=$?
if [ "$code" -ne 0 ] && [ "$code" -ne 1 ]; then echo "FAILED: corrupted stream exit $code" >&2; fail=1; fi
printf 'not arrow at all' > "$work/garbage"
expect 1 "garbage input" "$alkaid" validate "$work/garbage"
: > "$work/empty"
expect 1 "empty input" "$alkaid" validate "$work/empty"
expect 1 "integration validate of different data" "$alkaid" integration validate \
  --json "$dir/generated_primitive.json.gz" --ipc "$dir/generated_datetime.stream"
expect 0 "schema from stdin" sh -c "\"$alkaid\" schema - < \"$dir/generated_custom_metadata.stream\""
grep -q "metadata" "$work/out" || { echo "FAILED: schema shows no metadata" >&2; fail=1; }
expect 0 "cat --limit" "$alkaid" cat "$dir/generated_primitive.stream" --limit 2
[ "$(grep -c '^{' "$work/out")" -eq 2 ] || { echo "FAILED: --limit 2 printed other than 2 rows" >&2; fail=1; }
# Files older writers leave (tests/data/legacy): valid, and printable.
legacy="$(dirname "$0")/../data/legacy"
for f in "$legacy"/footer-without-version.arrow_file "$legacy"/null-count-minus-one.stream; do
  expect 0 "validate $(basename "$f")" "$alkaid" validate "$f"
  expect 0 "cat $(basename "$f")" "$alkaid" cat "$f"
done
# Big-endian input (a Schema declaring Endianness::Big, made by
# BigEndianTest in ipc_reader_test.cc): refused (exit 1), saying why, from a
# file and from stdin.
for f in "$legacy"/big-endian.stream "$legacy"/big-endian.arrow_file; do
  for sub in validate cat schema convert; do
    if [ "$sub" = convert ]; then
      expect 1 "$sub $(basename "$f")" "$alkaid" convert "$f" "$work/be.out"
    else
      expect 1 "$sub $(basename "$f")" "$alkaid" "$sub" "$f"
    fi
    grep -q "big-endian data is not supported" "$work/err" ||
      { echo "FAILED: $sub $(basename "$f"): no big-endian message" >&2; cat "$work/err" >&2; fail=1; }
  done
done
expect 1 "cat - of a big-endian stream" sh -c "\"$alkaid\" cat - < \"$legacy/big-endian.stream\""
grep -q "big-endian data is not supported" "$work/err" ||
  { echo "FAILED: cat -: no big-endian message" >&2; fail=1; }
# A batch's own custom metadata survives convert (both framings, both
# magics, both codecs) and cat prints it under the batch.
bmd="$legacy/batch-metadata.stream"
for args in "--to stream" "--to file" "--to file --magic arrow --compression lz4" \
            "--to stream --compression zstd"; do
  # shellcheck disable=SC2086 # the options are split on purpose
  expect 0 "convert batch metadata $args" "$alkaid" convert "$bmd" "$work/bmd.out" $args
  expect 0 "cat converted batch metadata ($args)" "$alkaid" cat "$work/bmd.out"
  [ "$(grep -c "^  metadata: 'frame' = '42'" "$work/out")" -eq 1 ] ||
    { echo "FAILED: $args: batch metadata not carried (once) by convert" >&2; fail=1; }
  grep -A1 '^-- batch 0' "$work/out" | grep -q "'frame'" ||
    { echo "FAILED: $args: batch metadata not under batch 0" >&2; fail=1; }
done
# Decimals beyond their precision (older Arrow): validate reports them; cat,
# schema and convert use them with a warning; the integration commands take
# Arrow's quirk to accept them.
dec="$legacy/decimal-beyond-precision"
expect 1 "validate decimals beyond precision" "$alkaid" validate "$dec.stream"
for sub in cat schema; do
  expect 0 "$sub decimals beyond precision" "$alkaid" "$sub" "$dec.stream"
  grep -q "warning: batch 0: .*more digits than precision 5" "$work/err" ||
    { echo "FAILED: $sub gave no precision warning" >&2; fail=1; }
done
expect 0 "cat prints the value" sh -c "\"$alkaid\" cat \"$dec.stream\" 2>/dev/null | grep -q '{d: 123456}'"
expect 0 "convert decimals beyond precision" "$alkaid" convert "$dec.stream" "$work/dec.arrow_file" --to file
grep -q "warning" "$work/err" || { echo "FAILED: convert gave no warning" >&2; fail=1; }
expect 1 "integration validate without the quirk" "$alkaid" integration validate \
  --json "$dec.json" --ipc "$dec.stream"
expect 0 "integration validate --quirks no_decimal_validate" "$alkaid" integration validate \
  --json "$dec.json" --ipc "$dec.stream" --quirks no_decimal_validate
expect 1 "json-to-ipc without the quirk" "$alkaid" integration json-to-ipc \
  --json "$dec.json" --out "$work/dec.stream"
expect 0 "json-to-ipc --quirks no_decimal_validate" "$alkaid" integration json-to-ipc \
  --json "$dec.json" --out "$work/dec.stream" --quirks no_decimal_validate
expect 0 "the quirk's output holds the data" "$alkaid" integration validate \
  --json "$dec.json" --ipc "$work/dec.stream" --quirks no_decimal_validate
expect 2 "an unknown quirk" "$alkaid" integration validate \
  --json "$dec.json" --ipc "$dec.stream" --quirks no_such_quirk
# Inputs the fuzzers found bugs with: validate and cat end quickly, with
# exit 0 or 1 (never a crash, never a usage/I-O code).
if [ -n "$corpus" ]; then
  for f in "$corpus"/ipc_*/*; do
    for sub in validate cat; do
      timeout 20 "$alkaid" "$sub" "$f" >/dev/null 2>&1
      code=$?
      if [ "$code" -ne 0 ] && [ "$code" -ne 1 ]; then
        echo "FAILED: alkaid $sub $f: exit $code" >&2
        fail=1
      fi
    done
  done
fi
exit $fail
