#!/usr/bin/env bash
# Configures and builds Alkaid with a CMake preset (default: release).
#   scripts/build.sh [preset] [extra cmake -D options...]
# Installs missing Debian packages first. Uses ccache when available.
set -euo pipefail
cd "$(dirname "$0")/.."

preset="${1:-release}"
shift || true

scripts/install-deps.sh
if command -v ccache >/dev/null 2>&1; then
  export ALKAID_CCACHE=ccache
fi
jobs="${ALKAID_JOBS:-$(nproc)}"
cmake --preset "$preset" "$@" >/dev/null
cmake --build --preset "$preset" --parallel "$jobs"
