#!/usr/bin/env bash
# The main job: installs what is missing, builds Alkaid, shows the format
# library at work through the `alkaid` tool on real Arrow data, then starts a
# real broker and runs the example producer and consumer through it, and a
# Python consumer (examples/python/consumer.py) too.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh release
bin=build/release/tools/alkaid/alkaid
data=tests/data/arrow-gold/cpp-21.0.0
work=$(mktemp -d)
broker_pid=
cleanup() {
  if [ -n "$broker_pid" ]; then kill "$broker_pid" 2>/dev/null || true; wait "$broker_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

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

echo
echo "== alkaid-broker, then a consumer and a producer of topic 'readings' (separate processes)"
export ALKAID_BROKER_SOCKET="$work/broker.sock"
build/release/broker/daemon/alkaid-broker --socket "$ALKAID_BROKER_SOCKET" --name "alkaid-demo-$$" \
  --log-level warn &
broker_pid=$!
for _ in $(seq 50); do [ -S "$ALKAID_BROKER_SOCKET" ] && break; sleep 0.1; done
build/release/examples/consumer readings > "$work/consumer.log" 2>&1 &
consumer_pid=$!
# The consumer registers with the broker as waiting for 'readings' (it does
# not exist yet); once it does, it receives every batch from the first one.
for _ in $(seq 100); do
  build/release/tools/alkaid/alkaid topics --socket "$ALKAID_BROKER_SOCKET" 2>/dev/null \
    | grep -q '^readings .*not created yet' && break
  sleep 0.1
done
build/release/examples/producer readings 20 | tail -n 1
wait "$consumer_pid"
tail -n 3 "$work/consumer.log"
build/release/tools/alkaid/alkaid topics --socket "$ALKAID_BROKER_SOCKET" || true

echo
echo "== the same from Python: a Python consumer of topic 'readings-py' (pyarrow, then DuckDB),"
echo "   fed by the C++ example producer (the module of the build tree, .venv's interpreter)"
if [ -d build/release/python/alkaid ]; then
  PYTHONPATH=build/release/python .venv/bin/python examples/python/consumer.py readings-py \
    > "$work/python-consumer.log" 2>&1 &
  py_consumer_pid=$!
  for _ in $(seq 100); do
    build/release/tools/alkaid/alkaid topics --socket "$ALKAID_BROKER_SOCKET" 2>/dev/null \
      | grep -q '^readings-py .*not created yet' && break
    sleep 0.1
  done
  build/release/examples/producer readings-py 20 | tail -n 1
  wait "$py_consumer_pid"
  tail -n 2 "$work/python-consumer.log"
else
  echo "(no Python module: .venv has no nanobind; scripts/install-deps.sh installs it)"
fi

echo
echo "== alkaid latency: one-way publish -> rebuilt batch in another process, through this broker"
echo "   (spin mode, ping-pong; beside the floor: one shared cache line; and a Unix socket)"
build/release/tools/alkaid/alkaid latency --socket "$ALKAID_BROKER_SOCKET" \
  --sizes 64,65536,1048576,16777216 --count 2000 --duration 5 --compare floor,uds
