#!/usr/bin/env bash
# Installs the Debian 12 packages Alkaid builds and tests with, if any is missing.
# Run as root (or with sudo available). Idempotent: does nothing when all are present.
#   scripts/install-deps.sh            what the build and the test suite need
#   scripts/install-deps.sh --peers    also the latency peers from Debian (iceoryx 2.0:
#                                      iox-roudi and its headers; bench/peers builds
#                                      alkaid_iceoryx_latency when they are there)
# Then makes the project's Python virtual environment .venv with the pinned
# packages of python/requirements-dev.txt (pyarrow: the Arrow C++ headers and
# libraries the interop tests build against; cmake/AlkaidInterop.cmake). It is
# remade only when that file changes. ALKAID_NO_VENV=1 skips this step (the
# interop tests are then not built).
set -euo pipefail
cd "$(dirname "$0")/.."
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
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc openssl
  util-linux procps passwd systemd
  clang-tidy clang-format ccache python3 python3-venv
  tmux libcpp-httplib-dev prometheus valgrind
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

if [ ${#missing[@]} -gt 0 ]; then
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
fi

# --- The project's virtual environment ----------------------------------------
if [ "${ALKAID_NO_VENV:-0}" = 1 ]; then
  exit 0
fi
requirements=python/requirements-dev.txt
stamp=.venv/.alkaid-requirements
if [ -x .venv/bin/python ] && cmp -s "$requirements" "$stamp"; then
  exit 0
fi
# Debian's Python (its python3-venv is installed above), not whichever
# python3 comes first on PATH.
python=/usr/bin/python3
[ -x "$python" ] || python=python3
echo "install-deps: making .venv with $requirements" >&2
rm -rf .venv
"$python" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r "$requirements" </dev/null
.venv/bin/python -c "import pyarrow"
cp "$requirements" "$stamp"
