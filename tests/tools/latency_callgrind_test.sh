#!/usr/bin/env bash
# alkaid-measure under callgrind with --collect-atstart=no: RoundTripTimer
# switches collection on and off around each timed round trip
# (measure/include/alkaid/measure/ping_pong.h), so that exactly the timed
# side's part of the timed round trips is counted. Checked on a client-layer
# ping-pong of 20 pings: one process's profile holds events (the ping side;
# the parent, the broker and the pong side collect nothing), it calls
# Producer::Publish exactly 20 times (the timed pings: not the 20 warm-ups
# nor the hellos before the loop), and it has no trace of the body's build
# (Int64Batch, untimed). Skipped (77) without valgrind or in a build without
# valgrind's header.
#   latency_callgrind_test.sh <alkaid-measure> <alkaid-broker> <1 if built with callgrind.h, else 0>
set -euo pipefail
measure=$1
export ALKAID_BROKER_BIN=$2
if [ "$3" != "1" ]; then
  echo "SKIP: built without valgrind/callgrind.h"
  exit 77
fi
if ! command -v valgrind >/dev/null; then
  echo "SKIP: no valgrind"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

# No broker answers here, so the tool starts (and stops) its own.
export ALKAID_BROKER_SOCKET=$work/no-broker.sock
# Uncompressed names (each call line names its callee in full), so that
# awk can count calls by name.
valgrind --tool=callgrind --trace-children=yes --collect-atstart=no --compress-strings=no \
  --callgrind-out-file="$work/cg.%p.out" \
  "$measure" --layer client --sizes 64 --count 20 --duration 0 --idle 0 --mode block \
  >"$work/run.txt" 2>&1 || {
  cat "$work/run.txt"
  fail "alkaid-measure under callgrind exited with status $?"
}
grep -q "^alkaid .* 20 " "$work/run.txt" || {
  cat "$work/run.txt"
  fail "no result line of 20 samples"
}

profiles=0
collected=()
for f in "$work"/cg.*.out; do
  profiles=$((profiles + 1))
  total=$(awk '/^totals:/ { print $2 }' "$f")
  if [ "${total:-0}" -gt 0 ]; then collected+=("$f"); fi
done
[ "$profiles" -ge 4 ] || fail "$profiles profiles, expected at least 4 (parent, broker, two sides)"
[ "${#collected[@]}" -eq 1 ] ||
  fail "${#collected[@]} profiles hold events, expected 1 (the ping side's timed round trips)"
ping=${collected[0]}

# Calls of Producer::Publish: each `cfn=` line naming it is followed by its
# `calls=N ...` line.
publishes=$(awk '/^cfn=.*alkaid::client::Producer::Publish\(/ { named = 1; next }
  named && /^calls=/ { split($1, a, "="); n += a[2] } { named = 0 } END { print n + 0 }' "$ping")
[ "$publishes" -eq 20 ] ||
  fail "the ping side's profile calls Producer::Publish $publishes times, expected 20 (the timed pings alone)"
if grep -q "^c\?fn=.*Int64Batch" "$ping"; then
  fail "the ping side's profile holds the body's build (Int64Batch), which is not timed"
fi
echo "PASS"
