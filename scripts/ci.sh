#!/usr/bin/env bash
# Alkaid's CI gates, in order (each a stage with a banner and its duration):
#   0. format      every tracked .h/.cc as .clang-format has it (scripts/format.sh
#                  --check); a difference fails
#   1. test        the README's test command: scripts/test.sh (release preset,
#                  warnings are errors, the whole ctest suite but the soak)
#   1b. soak       the soak (label soak, tests/broker/broker_soak_test.cc) on the
#                  test stage's build for ALKAID_SOAK_SECONDS (default 120:
#                  bounded, CI's hour is nearly spent), with a fresh seed each
#                  run (the log prints it; ALKAID_SOAK_SEED replays one)
#   2. asan-ubsan  the whole suite built with AddressSanitizer + UBSan (clang)
#   3. tsan        the libshm, client, broker and C ABI suites under ThreadSanitizer
#                  (the channel's threaded stress tests included; not the
#                  broker's multi-process SIGKILL loop)
#   4. fuzz        every libFuzzer target for ALKAID_FUZZ_SECONDS (default 20:
#                  a gate within CI's hour; longer runs: scripts/fuzz.sh N),
#                  ALKAID_JOBS targets at a time,
#                  from fuzz/corpus plus the gold files (scripts/fuzz.sh)
#   5. tidy        clang-tidy over common/ format/ libshm/ broker/ flight/ measure/ tools/
#                  fuzz/ python/src/
#                  (scripts/tidy.sh); any finding fails
# Every stage runs even if an earlier one failed; the script fails if any
# stage failed, after a summary. Runs on a clean clone, as root, with no
# stdin: dependencies come from scripts/install-deps.sh only.
#   scripts/ci.sh [stage...]     (default: all seven, in the order above)
# ALKAID_JOBS: build/test parallelism (default nproc). ccache is used when
# installed (CCACHE_DIR may point at a cache the CI keeps between runs).
set -uo pipefail
cd "$(dirname "$0")/.."
exec </dev/null

stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(format test soak asan-ubsan tsan fuzz tidy)
jobs="${ALKAID_JOBS:-$(nproc)}"
export ALKAID_JOBS=$jobs
fuzz_seconds="${ALKAID_FUZZ_SECONDS:-20}"

if ! scripts/install-deps.sh; then
  echo "ci: scripts/install-deps.sh failed" >&2
  exit 1
fi
if command -v ccache >/dev/null 2>&1; then export ALKAID_CCACHE=ccache; fi

# The libshm, client, broker and C ABI suites: their test directories in the tsan
# build (ninja's per-directory "all" targets build exactly what they need).
tsan_dirs=(tests/libshm tests/client tests/broker tests/capi)

stage_format() { scripts/format.sh --check; }

stage_test() { scripts/test.sh release; }

# Builds what the test stage built (nothing, after it), then the soak alone
# (--verbose: its seed and what it survived and checked go to the log).
# Under CI=true a soak that cannot mount its private /dev/shm fails.
stage_soak() {
  scripts/build.sh release || return 1
  ALKAID_SOAK_SECONDS="${ALKAID_SOAK_SECONDS:-120}" \
    ctest --preset release --no-tests=error -L '^soak$' --verbose
}

stage_asan_ubsan() { scripts/test.sh asan-ubsan; }

stage_tsan() {
  cmake --preset tsan >/dev/null || return 1
  local targets=() d
  for d in "${tsan_dirs[@]}"; do targets+=("$d/all"); done
  cmake --build --preset tsan --parallel "$jobs" --target "${targets[@]}" || return 1
  local rc=0
  for d in "${tsan_dirs[@]}"; do
    echo "-- ctest in build/tsan/$d"
    # The tsan test preset's settings (jobs, timeout, output on failure).
    # Without the broker's SIGKILL loop and the soak: ThreadSanitizer sees
    # races between the threads of one process, and those tests' interest is
    # between processes (kills and restarts); they run in the test (and soak)
    # stages, and TSan's slowdown would only stretch their timing. The
    # channel's threaded stress test (tests/libshm/channel_stress_test.cc)
    # does run here.
    TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}" \
      ctest --test-dir "build/tsan/$d" --no-tests=error --output-on-failure \
            -E '^BrokerStressTest[.]' -LE '^soak$' -j "$jobs" --timeout 900 || rc=1
  done
  return $rc
}

stage_fuzz() { scripts/fuzz.sh "$fuzz_seconds"; }

stage_tidy() {
  local dirs=(build/release)
  [ -f build/fuzz/compile_commands.json ] && dirs+=(build/fuzz)
  if [ ! -f build/release/compile_commands.json ]; then
    scripts/build.sh release || return 1
  fi
  scripts/tidy.sh "${dirs[@]}"
}

logs=build/ci-logs
mkdir -p "$logs"
names=()
results=()
durations=()
overall=0
ci_start=$(date +%s)
for stage in "${stages[@]}"; do
  fn="stage_${stage//-/_}"
  if ! declare -F "$fn" >/dev/null; then
    echo "ci: unknown stage '$stage' (format test soak asan-ubsan tsan fuzz tidy)" >&2
    exit 2
  fi
  echo
  echo "================================================================"
  echo "== ci stage: $stage   (started $(date -u +%H:%M:%S) UTC)"
  echo "================================================================"
  start=$(date +%s)
  # Each stage's output also goes to build/ci-logs/<stage>.log, so that the
  # summary can name what failed (a CI log is often read from its tail).
  "$fn" 2>&1 | tee "$logs/$stage.log"
  rc=${PIPESTATUS[0]}
  elapsed=$(( $(date +%s) - start ))
  if [ $rc -eq 0 ]; then result=PASS; else result="FAIL (exit $rc)"; overall=1; fi
  echo "== ci stage: $stage: $result in $((elapsed / 60))m$((elapsed % 60))s"
  names+=("$stage")
  results+=("$result")
  durations+=("$elapsed")
done

total=$(( $(date +%s) - ci_start ))
# The output of each failed test (its last lines, from ctest's LastTest.log),
# printed just above the summary: a CI log is read from its tail, where the
# ctest output of the failure is long gone.
for log in build/*/Testing/Temporary/LastTest.log; do
  [ -f "$log" ] && [ "$(stat -c %Y "$log")" -ge "$ci_start" ] || continue
  failed_log="${log%LastTest.log}LastTestsFailed.log"
  # ctest leaves an older run's list in place when every test passes.
  [ -s "$failed_log" ] && [ "$(stat -c %Y "$failed_log")" -ge "$ci_start" ] || continue
  cut -d: -f2- "$failed_log" | head -6 | while read -r test; do
    echo
    echo "== output of failed test $test (${log%%/Testing/*}), last 40 lines:"
    awk -v t="$test" '
      $0 ~ "^[0-9]+/[0-9]+ Test: " && $NF == t { on = 1; next }
      on && /^<end of output>/ { exit }
      on && started { print }
      on && /^----------/ { started = 1 }' "$log" | tail -40 | sed 's/^/   | /'
  done
done
echo
echo "================================================================"
echo "== ci summary"
for i in "${!names[@]}"; do
  printf '==   %-12s %-16s %3dm%02ds\n' "${names[$i]}" "${results[$i]}" \
    $((durations[i] / 60)) $((durations[i] % 60))
done
# What failed, from each failed stage's log: ctest's list of failed tests,
# else the first compiler or script errors.
for i in "${!names[@]}"; do
  [ "${results[$i]}" = PASS ] && continue
  log="$logs/${names[$i]}.log"
  failed=$(sed -n '/The following tests FAILED:/,/^Errors while running CTest/p' "$log" |
           grep -E '^[[:space:]]+[0-9]+ - ' | sort -u | head -40)
  [ -z "$failed" ] && failed=$(grep -m 12 -E 'error:|FAILED|Error [0-9]+|: fail' "$log")
  printf '==   %s failed:\n%s\n' "${names[$i]}" "$(printf '%s\n' "$failed" | sed 's/^/==     /')"
done
printf '==   %-12s %-16s %3dm%02ds\n' total "$([ $overall -eq 0 ] && echo PASS || echo FAIL)" \
  $((total / 60)) $((total % 60))
echo "================================================================"
exit $overall
