#!/usr/bin/env bash
# Conformance of one Arrow gold case (tests/data/arrow-gold/cpp-21.0.0):
#   gold_case.sh <alkaid> <gold-dir> <case>
# 1. Arrow's .stream and .arrow_file hold exactly the .json.gz data.
# 2. json-to-ipc, in both formats, uncompressed and with each codec, then
#    integration validate (and alkaid validate) passes.
# 3. convert stream <-> file, both magics, keeps the data.
# 4. ipc-to-json then json-to-ipc round-trips.
set -euo pipefail
alkaid=$1
dir=$2
name=$3
json="$dir/generated_$name.json.gz"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

check() {  # check <ipc-file> <what>
  if ! "$alkaid" integration validate --json "$json" --ipc "$1"; then
    echo "FAILED: $2" >&2
    exit 1
  fi
  "$alkaid" validate "$1" || { echo "FAILED: alkaid validate of $2" >&2; exit 1; }
}

check "$dir/generated_$name.stream" "Arrow's stream"
check "$dir/generated_$name.arrow_file" "Arrow's file"

for to in stream file; do
  for codec in none lz4 zstd; do
    out="$work/j2i.$to.$codec"
    "$alkaid" integration json-to-ipc --json "$json" --out "$out" --to "$to" --compression "$codec"
    check "$out" "json-to-ipc --to $to --compression $codec"
  done
done

"$alkaid" integration json-to-ipc --json "$json" --out "$work/arrow-magic" --to file --magic arrow
head -c 6 "$work/arrow-magic" | grep -q '^ARROW1$' || { echo "FAILED: --magic arrow" >&2; exit 1; }
check "$work/arrow-magic" "json-to-ipc --magic arrow"

# convert between stream and file, both magics
"$alkaid" convert "$dir/generated_$name.stream" "$work/s2f" --to file
check "$work/s2f" "convert stream -> file (ALKAID1)"
head -c 7 "$work/s2f" | grep -q '^ALKAID1$' || { echo "FAILED: ALKAID1 magic" >&2; exit 1; }
"$alkaid" convert "$work/s2f" "$work/f2s" --to stream
check "$work/f2s" "convert file -> stream"
"$alkaid" convert "$dir/generated_$name.arrow_file" "$work/f2f" --to file --magic arrow
check "$work/f2f" "convert file -> file (ARROW1)"
"$alkaid" convert - "$work/stdin2s" --to stream < "$dir/generated_$name.stream"
check "$work/stdin2s" "convert from stdin"
"$alkaid" convert "$dir/generated_$name.stream" - --to stream > "$work/stdout"
check "$work/stdout" "convert to stdout"

# ipc -> json -> ipc
"$alkaid" integration ipc-to-json --ipc "$dir/generated_$name.arrow_file" --out "$work/back.json"
"$alkaid" integration json-to-ipc --json "$work/back.json" --out "$work/back.stream"
check "$work/back.stream" "ipc-to-json -> json-to-ipc"
echo "ok: $name"
