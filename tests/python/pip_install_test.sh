#!/usr/bin/env bash
# `pip install ./python` into a fresh virtual environment, then: the module
# imports from there (not from the build tree), the alkaid and alkaid-broker
# commands run the bundled programs, and a batch goes through a broker the
# package starts. Offline: the build backend (scikit-build-core, nanobind)
# and pyarrow come from the project's .venv through a .pth file, and pip runs
# with --no-build-isolation --no-deps. The CMake build folder is kept in the
# build tree, so a second run rebuilds only what changed. Built without
# optimization (Debug, -O0, no debug info): the test is of the packaging (what
# the wheel holds, where it installs, that it runs), and an optimized build
# of the package's 140 files took most of the suite's time; the optimized
# code is the release preset's, tested by everything else.
#   pip_install_test.sh SOURCE_DIR BUILD_DIR VENV_PYTHON
set -euo pipefail
src=$1 build=$2 project_python=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -m venv "$work/venv"
site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$project_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/project-venv.pth"
export CMAKE_CXX_COMPILER_LAUNCHER="${ALKAID_CCACHE:-$(command -v ccache || true)}"
unset PYTHONPATH
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation \
  --no-deps --config-settings=build-dir="$build/pip-install-test" \
  --config-settings=cmake.build-type=Debug \
  --config-settings=cmake.define.CMAKE_CXX_FLAGS_DEBUG=-O0 "$src/python"
cd "$work"
"$work/venv/bin/python" "$src/tests/python/installed_roundtrip.py" "the installed package"
"$work/venv/bin/alkaid" --help | head -n 1
"$work/venv/bin/alkaid-broker" --help | head -n 1
test -f "$("$work/venv/bin/python" -c 'import alkaid, os; print(os.path.dirname(alkaid.__file__))')/py.typed"
echo "pip install ./python: ok"
