#!/usr/bin/env bash
# Installs the Debian 12 packages Alkaid builds and tests with, if any is missing.
# Run as root (or with sudo available). Idempotent: does nothing when all are present.
#   scripts/install-deps.sh            what the build and the test suite need
#   scripts/install-deps.sh --peers    also the latency peers from Debian (iceoryx 2.0:
#                                      iox-roudi and its headers; bench/peers builds
#                                      alkaid_iceoryx_latency when they are there)
set -euo pipefail
peers=0
for arg in "$@"; do
  case $arg in
    --peers) peers=1 ;;
    *) echo "install-deps: unknown option '$arg' (--peers)" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake ninja-build pkg-config git
  clang lld libclang-rt-14-dev
  libboost-dev
  libflatbuffers-dev flatbuffers-compiler
  liblz4-dev libzstd-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev
  util-linux procps
  clang-tidy ccache python3
)
if [ "$peers" -eq 1 ]; then
  packages+=(iceoryx libiceoryx-posh-dev)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo_cmd=(sudo); else
    echo "install-deps: missing packages (${missing[*]}) and not root; install them and retry" >&2
    exit 2
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q </dev/null
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
