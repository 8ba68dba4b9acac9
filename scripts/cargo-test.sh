#!/usr/bin/env bash
# Tests the Rust crates (rust/) against a CMake build tree; run by ctest
# (tests/rust/CMakeLists.txt) with ALKAID_BUILD_DIR, ALKAID_BROKER_BIN and
# CARGO_TARGET_DIR set, or by hand:
#   ALKAID_BUILD_DIR=build/release scripts/cargo-test.sh [cargo] [features] [cargo test args...]
# cargo test with the features given (default: tokio), Cargo.lock as
# committed. With CI=true also clippy (warnings are errors) and cargo doc
# (warnings are errors) over the same features, the gates the crate promises.
set -euo pipefail
cargo="${1:-cargo}"
features="${2:-tokio}"
shift 2 || shift $#
cd "$(dirname "$0")/../rust"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
"$cargo" test --locked --features "$features" "$@"
if [ "${CI:-}" = "true" ]; then
  "$cargo" clippy --locked --features "$features" --all-targets -- -D warnings
  RUSTDOCFLAGS="-D warnings" "$cargo" doc --locked --features "$features" --no-deps
fi
