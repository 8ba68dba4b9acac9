#!/usr/bin/env bash
# The README's promise for a container with Docker's default 64 MiB
# /dev/shm, run inside one (run_in_small_shm.sh --size 64m): the broker, the
# example consumer and producer, and the README's Python example, all with
# their defaults, deliver every batch and leave no segment behind.
#   small_shm_examples.sh BROKER CONSUMER PRODUCER PYTHON_DIR PYTHON README
# PYTHON_DIR: the build tree's package folder (holds alkaid/); the Python
# part is skipped (said) when it is absent or PYTHON cannot import pyarrow.
set -euo pipefail
broker_bin=$1 consumer_bin=$2 producer_bin=$3 python_dir=$4 python=$5 readme=$6
work=$(mktemp -d)
broker_pid=
cleanup() {
  if [ -n "$broker_pid" ]; then kill "$broker_pid" 2>/dev/null || true; wait "$broker_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAILED: $*" >&2; exit 1; }

df -h /dev/shm | tail -n 1
export ALKAID_BROKER_SOCKET="$work/broker.sock"
"$broker_bin" --socket "$ALKAID_BROKER_SOCKET" --name "alkaid-small-$$" 2> "$work/broker.log" &
broker_pid=$!
for _ in $(seq 100); do [ -S "$ALKAID_BROKER_SOCKET" ] && break; sleep 0.1; done
[ -S "$ALKAID_BROKER_SOCKET" ] || fail "the broker did not start: $(cat "$work/broker.log")"
grep -m1 "shm limit" "$work/broker.log" >&2 || true

"$consumer_bin" readings > "$work/consumer.log" 2>&1 &
consumer_pid=$!
sleep 0.5  # it waits for the topic; the producer's first batch reaches it either way
"$producer_bin" readings 50 > "$work/producer.log" 2>&1 || fail "producer: $(cat "$work/producer.log")"
wait "$consumer_pid" || fail "consumer: $(cat "$work/consumer.log")"
tail -n 1 "$work/consumer.log"
grep -q "^50 batches" "$work/consumer.log" || fail "the consumer did not get 50 batches: $(tail -n 3 "$work/consumer.log")"

if [ -d "$python_dir/alkaid" ] && PYTHONPATH="$python_dir" "$python" -c "import alkaid, pyarrow" 2>/dev/null; then
  # The README's example, as it stands there (the indented block under
  # "## From Python"), with its own private broker.
  awk '/^## From Python/{on=1; next} on && /^    /{print substr($0, 5); got=1; next} on && got && !/^$/{exit}' \
    "$readme" > "$work/readme_example.py"
  grep -q "alkaid.Producer" "$work/readme_example.py" || fail "no Python example found in $readme"

  ALKAID_BIN_DIR=$(dirname "$broker_bin") PYTHONPATH="$python_dir" "$python" "$work/readme_example.py" \
    > "$work/python.log" 2>&1 || fail "the README's Python example: $(cat "$work/python.log")"
  tail -n 3 "$work/python.log"
else
  echo "(the README's Python example skipped: no module at $python_dir or no pyarrow)"
fi

kill "$broker_pid"; wait "$broker_pid" || true; broker_pid=
left=$(ls /dev/shm | grep -c "^alkaid-small-$$\." || true)
[ "$left" -eq 0 ] || fail "segments left: $(ls /dev/shm)"
echo "every batch delivered under a $(df -h --output=size /dev/shm | tail -n 1 | tr -d ' ') /dev/shm"
