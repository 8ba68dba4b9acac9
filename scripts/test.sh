#!/usr/bin/env bash
# Runs Alkaid's whole test suite on a fresh Debian 12 machine:
# installs what is missing, builds the release preset (warnings are errors)
# and runs every ctest test (unit, integration and stress labels).
#   scripts/test.sh [preset]        (default preset: release)
# ALKAID_CTEST_ARGS adds ctest arguments, e.g. "-L unit" or "-LE stress".
set -euo pipefail
cd "$(dirname "$0")/.."

preset="${1:-release}"
scripts/build.sh "$preset"
# shellcheck disable=SC2086
ctest --preset "$preset" --no-tests=error ${ALKAID_CTEST_ARGS:-}
