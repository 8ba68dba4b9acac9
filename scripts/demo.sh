#!/usr/bin/env bash
# The main job: installs what is missing, builds Alkaid, then shows the
# format library at work through the `alkaid` tool on real Arrow data.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh release
bin=build/release/tools/alkaid/alkaid
data=tests/data/arrow-gold/cpp-21.0.0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== alkaid schema: an Arrow IPC file written by Arrow C++ 21"
"$bin" schema "$data/generated_nested_dictionary.arrow_file"
echo
echo "== alkaid cat: its batches"
"$bin" cat "$data/generated_datetime.stream" --limit 1
echo
echo "== alkaid convert: Arrow stream -> Alkaid file, ZSTD-compressed"
"$bin" convert "$data/generated_primitive.stream" "$work/primitive.alkaid" --to file --compression zstd
"$bin" validate "$work/primitive.alkaid" && echo "valid: $work/primitive.alkaid"
echo
echo "== alkaid integration validate: our file holds exactly Arrow's JSON data"
"$bin" integration validate --json "$data/generated_primitive.json.gz" --ipc "$work/primitive.alkaid" \
  && echo "conformant"
