#!/usr/bin/env bash
# `alkaid rows encode | decode`: gold IPC data through UnsafeRow batch files
# and back must hold exactly the gold data; bad input gives the documented
# exit codes with one line on stderr.
#   rows_cli_test.sh <alkaid> <gold-dir>
set -uo pipefail
alkaid=$1
dir=$2
# shellcheck source=cli_lib.sh
source "$(dirname "$0")/cli_lib.sh"

for sub in "rows" "rows encode" "rows decode"; do
  # shellcheck disable=SC2086
  expect 0 "$sub --help" "$alkaid" $sub --help
done

# Round trips: stream and file inputs, decoded in batches of 3 rows. Row
# files do not keep batch boundaries, so the check is: the decoded stream is
# valid, and encoding it again gives the same bytes.
for case in nested map decimal decimal32 decimal64 large_binary binary_view recursive_nested \
            nested_large_offsets null custom_metadata; do
  for ext in stream arrow_file; do
    in="$dir/generated_$case.$ext"
    expect 0 "encode $case.$ext" "$alkaid" rows encode "$in" "$work/$case.rows"
    expect 0 "decode $case.$ext" "$alkaid" rows decode --schema-from "$in" --batch-rows 3 \
      "$work/$case.rows" "$work/$case.stream"
    expect 0 "decoded $case.$ext is valid" "$alkaid" validate "$work/$case.stream"
    expect 0 "re-encode $case.$ext" "$alkaid" rows encode "$work/$case.stream" "$work/$case.again"
    cmp -s "$work/$case.rows" "$work/$case.again" ||
      { echo "FAILED: $case.$ext: re-encoded rows differ" >&2; fail=1; }
  done
done
# A single-batch gold file decoded as one batch is exactly the gold data.
expect 0 "exact round trip" "$alkaid" integration validate \
  --json "$dir/generated_custom_metadata.json.gz" --ipc "$work/custom_metadata.stream"

# Stdin/stdout, and dictionaries decode to their value types.
"$alkaid" rows encode - - < "$dir/generated_dictionary.stream" > "$work/dict.rows" ||
  { echo "FAILED: encode via pipes" >&2; fail=1; }
expect 0 "decode dictionary rows" "$alkaid" rows decode --schema-from "$dir/generated_dictionary.stream" \
  "$work/dict.rows" "$work/dict.stream"
expect 0 "decoded dictionary rows are valid" "$alkaid" validate "$work/dict.stream"
expect 0 "schema of the decoded dictionary rows" "$alkaid" schema "$work/dict.stream"
if [ ! -s "$work/out" ]; then
  echo "FAILED: alkaid schema printed nothing" >&2
  fail=1
elif grep -q 'dictionary' "$work/out"; then
  echo "FAILED: decoded schema still has dictionaries" >&2
  fail=1
fi
# Encoding the decoded data again gives the same bytes.
expect 0 "re-encode" "$alkaid" rows encode "$work/dict.stream" "$work/dict2.rows"
cmp -s "$work/dict.rows" "$work/dict2.rows" || { echo "FAILED: re-encoded rows differ" >&2; fail=1; }

# Bad data (1): a schema rows cannot carry; truncated and corrupted row files.
expect 1 "unsupported schema" "$alkaid" rows encode "$dir/generated_union.stream" "$work/u.rows"
one_stderr_line "unsupported schema"
size=$(stat -c %s "$work/nested.rows")
head -c $((size - 3)) "$work/nested.rows" > "$work/truncated.rows"
expect 1 "truncated rows" "$alkaid" rows decode --schema-from "$dir/generated_nested.stream" \
  "$work/truncated.rows" "$work/x.stream"
one_stderr_line "truncated rows"
grep -q 'row ' "$work/err" || { echo "FAILED: truncation error does not name the row" >&2; fail=1; }
expect 1 "rows of another schema" "$alkaid" rows decode --schema-from "$dir/generated_decimal.stream" \
  "$work/nested.rows" "$work/x.stream"
one_stderr_line "rows of another schema"

# Usage and I/O (2).
expect 2 "decode without --schema-from" "$alkaid" rows decode "$work/nested.rows" "$work/x.stream"
expect 2 "rows without subcommand" "$alkaid" rows
expect 2 "bad --batch-rows" "$alkaid" rows decode --schema-from "$dir/generated_nested.stream" \
  --batch-rows 0 "$work/nested.rows" "$work/x.stream"
expect 2 "missing input" "$alkaid" rows encode "$work/does-not-exist" "$work/x.rows"
expect 2 "missing row file" "$alkaid" rows decode --schema-from "$dir/generated_nested.stream" \
  "$work/does-not-exist" "$work/x.stream"
expect 2 "unwritable output" "$alkaid" rows encode "$dir/generated_nested.stream" "$work/no/such/dir/x"

exit $fail
