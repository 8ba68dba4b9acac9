#!/usr/bin/env bash
# Builds the fuzz preset and runs every libFuzzer target for a bounded time,
# starting from the corpus kept in fuzz/corpus/<target> plus Arrow's gold files.
#   scripts/fuzz.sh [seconds-per-target]      (default 60)
# New inputs that increase coverage are written to build/fuzz/corpus/<target>;
# a crash, leak, UBSan finding or hang leaves its input in
# build/fuzz/artifacts/<target>/ and makes this script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"

scripts/build.sh fuzz
gold=tests/data/arrow-gold/cpp-21.0.0
# The targets run ALKAID_JOBS at a time (default nproc; each is one process
# on one core), each into its own log, printed whole once it ends.
jobs="${ALKAID_JOBS:-$(nproc)}"
logs=build/fuzz/logs
mkdir -p "$logs"

# Runs one target for `seconds` from its corpus and seeds; fails when it
# finds a failure.
run_target() {
  local target=$1 work="build/fuzz/corpus/$1" seeds=()
  mkdir -p "$work"
  [ -d "fuzz/corpus/$target" ] && seeds+=("fuzz/corpus/$target")
  case $target in
    ipc_file_fuzz) cp -n "$gold"/*.arrow_file "$work"/ ;;
    unsafe_row_fuzz) ;;  # row batches: only its own seeds in fuzz/corpus/unsafe_row_fuzz
    control_protocol_fuzz) ;;  # control frames: only its own seeds in fuzz/corpus/control_protocol_fuzz
    channel_fuzz) ;;  # shared-memory patches: only its own seeds in fuzz/corpus/channel_fuzz
    batch_channel_fuzz) ;;  # hostile messages: only its own seeds in fuzz/corpus/batch_channel_fuzz
    varying_plan_fuzz) ;;  # template numbers: only its own seeds in fuzz/corpus/varying_plan_fuzz
    c_data_import_fuzz) ;;  # struct trees: only its own seeds in fuzz/corpus/c_data_import_fuzz
    flight_data_fuzz) ;;  # framed FlightData: only its own seeds in fuzz/corpus/flight_data_fuzz
    *) cp -n "$gold"/*.stream "$work"/ ;;
  esac
  mkdir -p "build/fuzz/artifacts/$target"
  echo "== $target for ${seconds}s"
  # -timeout: an input taking over 30 s is a hang and fails the run too.
  if ! (cd build/fuzz && "./fuzz/$target" -max_total_time="$seconds" -rss_limit_mb=2048 \
        -timeout=30 -max_len=1048576 -print_final_stats=1 \
        -artifact_prefix="artifacts/$target/" "corpus/$target" "${seeds[@]/#/../../}"); then
    echo "$target found a failure; its input is in build/fuzz/artifacts/$target/"
    return 1
  fi
}

targets=()
for target in ipc_stream_fuzz ipc_file_fuzz ipc_message_fuzz unsafe_row_fuzz control_protocol_fuzz \
  channel_fuzz batch_channel_fuzz varying_plan_fuzz c_data_import_fuzz flight_data_fuzz; do
  if [ "$target" = flight_data_fuzz ] && [ ! -x "build/fuzz/fuzz/$target" ]; then
    # Built only with the Flight bridge (gRPC and protobuf found, docs/FLIGHT.md).
    echo "$target not built (no gRPC/protobuf: ALKAID_FLIGHT); it is not run" >&2
    continue
  fi
  targets+=("$target")
done

status=0
pids=()
for i in "${!targets[@]}"; do
  run_target "${targets[$i]}" >"$logs/${targets[$i]}.log" 2>&1 &
  pids[i]=$!
  # At most `jobs` running: wait for the oldest one still running.
  if [ $((i + 1)) -ge "$jobs" ]; then
    k=$((i + 1 - jobs))
    wait "${pids[$k]}" || status=1
    cat "$logs/${targets[$k]}.log"
  fi
done
# The loop waited for the first n - jobs + 1 (none when n < jobs).
first_left=$(( ${#targets[@]} >= jobs ? ${#targets[@]} - jobs + 1 : 0 ))
for ((k = first_left; k < ${#targets[@]}; ++k)); do
  wait "${pids[$k]}" || status=1
  cat "$logs/${targets[$k]}.log"
done
exit $status
