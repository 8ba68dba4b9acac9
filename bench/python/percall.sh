#!/usr/bin/env bash
# Instructions per call of the Python binding, by component: runs
# `alkaid_bench.py loop` (one process: a private broker, a producer and a
# consumer of the same topic) under callgrind with N and 2N iterations and
# prints (cost(2N) - cost(N)) / N, which cancels start-up and shut-down,
# grouped by shared object (the interpreter, numpy, pyarrow, libc, the
# Alkaid libraries; nanobind and the binding's own code inside _alkaid.so
# apart), then the functions with the largest inclusive cost. Instruction
# counts, not time: they do not depend on the machine's load.
#   bench/python/percall.sh [scenario] [N]   scenario: loan (default) or publish;
#                                            N default 2000
# Needs valgrind; PYTHONPATH as run.sh (build/release/python) unless set.
# PERCALL_KEEP=DIR keeps the two profiles there (DIR/N.out, DIR/2N.out) for
# callgrind_annotate --tree=caller.
set -euo pipefail
cd "$(dirname "$0")/../.."
scenario="${1:-loan}"
n="${2:-2000}"
export PYTHONPATH="${PYTHONPATH:-build/release/python}"
# numpy's OpenBLAS threads spin for work at random: their instructions
# would land in the difference.
export OPENBLAS_NUM_THREADS=1
py="${PYTHON:-.venv/bin/python}"
if [ -n "${PERCALL_KEEP:-}" ]; then
  out="$PERCALL_KEEP"
  mkdir -p "$out"
else
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
fi
for count in "$n" $((2 * n)); do
  valgrind --tool=callgrind --callgrind-out-file="$out/$count.out" \
    "$py" bench/python/alkaid_bench.py loop --scenario "$scenario" --count "$count" \
    >/dev/null 2>"$out/$count.log" || { cat "$out/$count.log"; exit 1; }
done
"$py" bench/python/percall_report.py "$out/$n.out" "$out/$((2 * n)).out" "$n" "$scenario"
