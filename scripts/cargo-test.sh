#!/usr/bin/env bash
# Tests the Rust crates (rust/) against a CMake build tree; run by ctest
# (tests/rust/CMakeLists.txt) with ALKAID_BUILD_DIR, ALKAID_BROKER_BIN and
# CARGO_TARGET_DIR set, or by hand:
#   ALKAID_BUILD_DIR=build/release scripts/cargo-test.sh [cargo]
# cargo test with every feature (the tokio Stream included), Cargo.lock as
# committed. With CI=true also clippy (warnings are errors) and cargo doc
# (warnings are errors), the gates the crate promises.
set -euo pipefail
cargo="${1:-cargo}"
cd "$(dirname "$0")/../rust"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
"$cargo" test --locked --all-features
if [ "${CI:-}" = "true" ]; then
  "$cargo" clippy --locked --all-features --all-targets -- -D warnings
  RUSTDOCFLAGS="-D warnings" "$cargo" doc --locked --all-features --no-deps
fi
