#!/usr/bin/env bash
# Installs the build tree into a scratch prefix, then configures, builds and
# runs tests/install/consumer against it with find_package(Alkaid CONFIG).
#   run_install_test.sh <build-dir> <source-dir> [extra CXX/link flags]
# The flags carry sanitizer options, so a sanitized build is consumed by a
# sanitized consumer.
set -euo pipefail
build_dir=$1
source_dir=$2
extra_flags=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
# Only public headers are installed: no *_internal.h, no generated flatbuffers code.
if find "$work/prefix/include" -name '*_internal.h' -o -name '*_generated.h' | grep -q .; then
  echo "private headers were installed:" >&2
  find "$work/prefix/include" -name '*_internal.h' -o -name '*_generated.h' >&2
  exit 1
fi
test -f "$work/prefix/lib/cmake/Alkaid/AlkaidConfig.cmake" || test -f "$work/prefix/lib/x86_64-linux-gnu/cmake/Alkaid/AlkaidConfig.cmake"
cmake -S "$source_dir/tests/install/consumer" -B "$work/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS="$extra_flags" -DCMAKE_EXE_LINKER_FLAGS="$extra_flags" >/dev/null
cmake --build "$work/build" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib:$work/prefix/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  "$work/build/consumer"
