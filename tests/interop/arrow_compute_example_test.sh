#!/usr/bin/env bash
# examples/arrow_compute_consumer against examples/producer through a real
# broker: the consumer (started first, waiting for the topic) sums the
# producer's 50 batches with Arrow C++.
#   arrow_compute_example_test.sh BROKER PRODUCER CONSUMER ALKAID
set -euo pipefail
broker=$1 producer=$2 consumer=$3 alkaid=$4
work=$(mktemp -d)
export ALKAID_BROKER_SOCKET="$work/broker.sock"
"$broker" --socket "$ALKAID_BROKER_SOCKET" --name "acx$$" --log-level warn &
broker_pid=$!
trap 'kill $broker_pid 2>/dev/null; wait $broker_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -S "$ALKAID_BROKER_SOCKET" ] && break; sleep 0.05; done
timeout 60 "$consumer" readings > "$work/consumer.out" &
consumer_pid=$!
# The consumer waits for the topic before the producer starts (a condition:
# the broker lists it among the consumers waiting for 'readings').
waiting() {
  "$alkaid" topics --socket "$ALKAID_BROKER_SOCKET" 2>/dev/null |
    awk '$1 == "readings" && /not created yet/ && $3 >= 1 { found = 1 } END { exit !found }'
}
for _ in $(seq 600); do waiting && break; sleep 0.05; done
waiting || { echo "FAILED: the consumer never waited for 'readings'" >&2; exit 1; }
timeout 60 "$producer" readings > /dev/null
wait $consumer_pid
grep -q '^batch 50: 1000 rows, sum(sensor) = 7468, sum(value) = 49499.5$' "$work/consumer.out"
grep -q '^50 batches$' "$work/consumer.out"
echo "arrow_compute_consumer summed 50 batches"
