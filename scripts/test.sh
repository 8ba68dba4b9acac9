#!/usr/bin/env bash
# Runs Alkaid's whole test suite on a fresh Debian 12 machine:
# installs what is missing, builds the release preset (warnings are errors)
# and runs every ctest test (unit, integration, stress, the Rust crates'
# cargo test, label rust; the manylinux wheel's, label wheel, which needs
# PyPI as the install does) but two: the soak (label soak: minutes long, run
# on its own, as CI's soak stage does: ctest --preset release -L soak;
# ALKAID_SOAK_SECONDS sets its length) and the polars feature's test (label
# rust-polars: compiling polars takes some ten minutes on 2 cores; run it
# with ctest --preset release -L rust-polars).
#   scripts/test.sh [preset]        (default preset: release)
# ALKAID_CTEST_ARGS adds ctest arguments, e.g. "-L unit" or "-LE stress|soak"
# (arguments that select by label, -L or -LE, replace the default -LE soak).
# With CI=true a skipped test that docs/RELIABILITY.md cites fails the run
# (scripts/check-skips.sh), and configure requires every optional part
# (Flight, interop, Python: CMakeLists.txt, ALKAID_CI).
set -euo pipefail
cd "$(dirname "$0")/.."

preset="${1:-release}"
ctest_args="${ALKAID_CTEST_ARGS:-}"
case " $ctest_args" in
  *" -L"*) ;;
  *) ctest_args="$ctest_args -LE ^(soak|rust-polars)\$" ;;
esac
scripts/build.sh "$preset"
if [ "${CI:-}" != "true" ]; then
  # shellcheck disable=SC2086
  exec ctest --preset "$preset" --no-tests=error $ctest_args
fi
log="build/$preset/ctest-output.txt"
rc=0
# shellcheck disable=SC2086
ctest --preset "$preset" --no-tests=error $ctest_args 2>&1 | tee "$log" || rc=$?
scripts/check-skips.sh "$log" || rc=1
exit $rc
