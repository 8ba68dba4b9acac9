#!/usr/bin/env bash
# Smoke test of the stream bench's in-process loop (alkaid_shm_stream_bench,
# the command the instruction counts quote); it measures nothing. The loop
# checks the first and last value of every batch against what was sent, and
# a wrong value makes the bench exit non-zero; it may leave no segment in
# /dev/shm. (It is alkaid-measure under another name, tested in full by
# tests/tools/latency_cli_test.sh.)
#
# Usage: bench_smoke_test.sh <alkaid_shm_stream_bench>
set -euo pipefail
stream=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

fail() {
  echo "FAIL: $*"
  exit 1
}

# Runs a bench in the background (its pid names its segments), waits for
# it, and checks its exit status and /dev/shm. $1: tag for the output file.
run_bench() {
  local tag=$1
  shift
  "$@" >"$out/$tag.txt" 2>&1 &
  local pid=$! status=0
  wait "$pid" || status=$?
  if [ "$status" -ne 0 ]; then
    cat "$out/$tag.txt"
    fail "$tag exited with status $status"
  fi
  if compgen -G "/dev/shm/alkaid-latency.${pid}.*" >/dev/null; then
    ls /dev/shm
    fail "$tag left segments named after its pid $pid"
  fi
}

# The stream bench's loop checks the values of every batch it receives (a
# wrong one ends the run with status 1); each writer, and stamped.
for args in "" "--fixed" "--fixed --stamp" "--strings"; do
  # shellcheck disable=SC2086 # the arguments are words
  run_bench "stream $args" "$stream" --inproc 200 $args
  grep -q "200 batches, .* per batch" "$out/stream $args.txt" || fail "stream $args: no per-batch line"
done
for args in "--inproc 0" "" "--inproc 5 --writer build"; do
  status=0
  # shellcheck disable=SC2086 # the arguments are words
  "$stream" $args >/dev/null 2>&1 || status=$?
  [ "$status" -eq 2 ] || fail "stream $args: status $status, expected 2 (usage)"
done
echo "PASS"
