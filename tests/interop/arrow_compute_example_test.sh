#!/usr/bin/env bash
# examples/arrow_compute_consumer against examples/producer through a real
# broker: the consumer (started first, waiting for the topic) sums the
# producer's 50 batches with Arrow C++.
#   arrow_compute_example_test.sh BROKER PRODUCER CONSUMER
set -euo pipefail
broker=$1 producer=$2 consumer=$3
work=$(mktemp -d)
export ALKAID_BROKER_SOCKET="$work/broker.sock"
"$broker" --socket "$ALKAID_BROKER_SOCKET" --name "acx$$" --log-level warn &
broker_pid=$!
trap 'kill $broker_pid 2>/dev/null; wait $broker_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -S "$ALKAID_BROKER_SOCKET" ] && break; sleep 0.05; done
timeout 60 "$consumer" readings > "$work/consumer.out" &
consumer_pid=$!
sleep 0.2
timeout 60 "$producer" readings > /dev/null
wait $consumer_pid
grep -q '^batch 50: 1000 rows, sum(sensor) = 7468, sum(value) = 49499.5$' "$work/consumer.out"
grep -q '^50 batches$' "$work/consumer.out"
echo "arrow_compute_consumer summed 50 batches"
