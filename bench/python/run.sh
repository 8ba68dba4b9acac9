#!/usr/bin/env bash
# The Python figures of docs/INTEROP.md ("Python"), beside the C++ ones of the
# same run: ping-pong latency of 64-row batches (int64 + float64, 1 KiB),
# Python to Python in spin and block mode, `alkaid latency` at the same body
# size, and iceoryx2's Python package at the same payload size; publish and
# receive rates; the cost of handing a received batch to pyarrow and polars
# at 1e3 and 1e6 rows. Needs the release build with the Python module
# (scripts/build.sh) and .venv; makes build/bench-python-venv for iceoryx2
# (bench/python/requirements.txt), skipping that peer if it cannot.
#   bench/python/run.sh [count]      (default 20000 round trips per figure)
set -euo pipefail
cd "$(dirname "$0")/../.."
count="${1:-20000}"
export PYTHONPATH=build/release/python
py=.venv/bin/python
bench=bench/python/alkaid_bench.py

echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "## C++: alkaid latency, 1 KiB body, ping-pong, not pinned (as the Python processes)"
for mode in spin block; do
  build/release/tools/alkaid/alkaid latency --sizes 1024 --count "$count" --duration 0 \
    --mode "$mode" --no-pin --json - 2>/dev/null | "$py" -c '
import json, sys
for r in json.load(sys.stdin)["results"]:
    print(json.dumps({k: r[k] for k in r if not isinstance(r[k], (list, dict))}))' \
    || echo "alkaid latency --mode $mode failed"
done
echo "## Python: alkaid"
# asyncio: each batch awaited on an asyncio loop (the loop sleeps on the
# consumer's descriptor), beside block mode's futex sleep.
for mode in spin block asyncio; do
  "$py" "$bench" pingpong --mode "$mode" --count "$count"
done
for how in publish loan; do
  "$py" "$bench" rate --how "$how" --count "$count"
done
"$py" "$bench" handoff --count 1000
echo "## Python: iceoryx2 (PyPI), same payload size"
venv=build/bench-python-venv
if [ ! -x "$venv/bin/python" ] || ! cmp -s bench/python/requirements.txt "$venv/.requirements"; then
  rm -rf "$venv"
  if /usr/bin/python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check \
       -r bench/python/requirements.txt </dev/null; then
    cp bench/python/requirements.txt "$venv/.requirements"
  else
    echo "iceoryx2 does not install here; peer skipped"
    exit 0
  fi
fi
"$venv/bin/python" bench/python/iceoryx2_pingpong.py --count "$count" 2>/dev/null
