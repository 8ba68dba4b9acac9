#!/usr/bin/env bash
# Smoke test of the flatness bench (alkaid_shm_flatness_bench) and of the
# stream bench's in-process loop (alkaid_shm_stream_bench, the command the
# instruction counts quote); it measures nothing. It runs every row for a few iterations. Its child checks the
# first and last value of every batch against what was sent, and a wrong
# value makes the bench exit non-zero. Its JSON must carry the paired
# counters of every row, and it may leave no segment in /dev/shm.
# (`alkaid latency`, the other measurement program, is tested by
# tests/tools/latency_cli_test.sh.)
#
# Usage: bench_smoke_test.sh <alkaid_shm_flatness_bench> <alkaid_shm_stream_bench>
set -euo pipefail
flatness=$1
stream=$2
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
  if compgen -G "/dev/shm/alkaid_lat_*${pid}_*" >/dev/null ||
    compgen -G "/dev/shm/alkaid_stream_i${pid}*" >/dev/null; then
    ls /dev/shm
    fail "$tag left segments named after its pid $pid"
  fi
}

run_bench flatness "$flatness" --pairs-scale 0.002 \
  --benchmark_out="$out/flatness.json" --benchmark_out_format=json
[ -s "$out/flatness.json" ] || fail "flatness: no JSON written"
rows=$(grep -c '"name": "one_way_vs_64B/' "$out/flatness.json" || true)
[ "$rows" -eq 15 ] || fail "flatness: $rows rows in the JSON, expected 15 (3 fills x 5 sizes)"
for counter in p50 p50_64B ratio d_p50 d_lo d_hi rebuilt rebuilt_64B dr_p50 dr_lo dr_hi; do
  n=$(grep -c "\"$counter\": " "$out/flatness.json" || true)
  [ "$n" -eq 15 ] || fail "flatness: counter $counter in $n rows, expected 15"
done
# The stream bench's loop checks the values of every batch it receives (a
# wrong one ends the run with status 1); each writer, and stamped.
for args in "" "--fixed" "--fixed --stamp"; do
  # shellcheck disable=SC2086 # the arguments are words
  run_bench "stream $args" "$stream" --inproc 200 $args
  grep -q "ns per batch" "$out/stream $args.txt" || fail "stream $args: no per-batch line"
done
status=0
"$stream" --inproc 0 >/dev/null 2>&1 || status=$?
[ "$status" -eq 2 ] || fail "stream --inproc 0: status $status, expected 2 (usage)"
echo "PASS"
