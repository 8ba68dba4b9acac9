#!/usr/bin/env bash
# Alkaid's ping-pong beside the latency peers, in one run and one table: for
# each size the one-way p50 and p99 of Alkaid (`alkaid latency`), Alkaid
# through its Rust crate (alkaid_rust_latency, rust/alkaid-bench), iceoryx2
# (bench/peers/iceoryx2, Rust), iceoryx 2.0 (alkaid_iceoryx_latency), the
# floor (one shared cache line) and a Unix socket, and each one's ratio to
# Alkaid. The peers are optional: one that is not there is skipped, saying so.
#
#   scripts/peers.sh [--sizes 64,4096,...] [--count N] [--mode spin|block]
#
#   --sizes   payload sizes in bytes, comma-separated, K and M suffixes binary
#             (default 64,4096,65536,1048576,16777216)
#   --count   timed round trips per size (default 10000; each run also stops
#             a size after 10 s)
#   --mode    how the receivers wait: spin (busy poll) or block (default spin)
#
# Builds the iceoryx2 peer and alkaid_rust_latency with cargo when cargo is
# there, and nothing else:
# Alkaid and the iceoryx 2.0 peer come from build/release (scripts/build.sh,
# which this runs when build/release has no alkaid; the iceoryx 2.0 peer is
# built only after scripts/install-deps.sh --peers). The runs go one after
# another, never together: each pins its two processes to CPUs 0 and 1.
# Environment: RESULTS (directory for the JSON and logs, default
# build/release/peers-results).
set -euo pipefail
cd "$(dirname "$0")/.."

sizes=64,4096,65536,1048576,16777216
count=10000
mode=spin
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) sizes=${2:?--sizes needs a value}; shift 2 ;;
    --count) count=${2:?--count needs a value}; shift 2 ;;
    --mode) mode=${2:?--mode needs a value}; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "peers.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$mode" in
  spin|block) ;;
  *) echo "peers.sh: --mode $mode: want spin or block" >&2; exit 2 ;;
esac
if ! [[ $count =~ ^[1-9][0-9]*$ ]]; then
  echo "peers.sh: --count $count: want a whole number >= 1" >&2
  exit 2
fi
# Plain bytes for every tool: the iceoryx peers take no suffixes.
plain=()
IFS=, read -r -a items <<< "$sizes"
for item in "${items[@]}"; do
  if ! [[ $item =~ ^([1-9][0-9]{0,8})([kKmM]?)$ ]]; then
    echo "peers.sh: size $item: want bytes, or a number with K or M" >&2
    exit 2
  fi
  case "${BASH_REMATCH[2]}" in
    k|K) n=$(( BASH_REMATCH[1] * 1024 )) ;;
    m|M) n=$(( BASH_REMATCH[1] * 1048576 )) ;;
    *) n=${BASH_REMATCH[1]} ;;
  esac
  if [ "$n" -gt 16777216 ]; then
    echo "peers.sh: size $item: more than 16M" >&2
    exit 2
  fi
  plain+=("$n")
done
sizes=$(IFS=,; echo "${plain[*]}")

if ! command -v python3 >/dev/null 2>&1; then
  echo "peers.sh: python3 is needed to read the results" >&2
  exit 2
fi

build=build/release
alkaid=$build/tools/alkaid/alkaid
iceoryx=$build/bench/peers/alkaid_iceoryx_latency
iceoryx2_dir=bench/peers/iceoryx2
iceoryx2=$iceoryx2_dir/target/release/alkaid_iceoryx2_latency
alkaid_rust=rust/target/release/alkaid_rust_latency
results=${RESULTS:-$build/peers-results}

if [ ! -x "$alkaid" ]; then
  echo "peers.sh: no $alkaid; building with scripts/build.sh" >&2
  scripts/build.sh release </dev/null
fi

if command -v cargo >/dev/null 2>&1; then
  echo "peers.sh: building the iceoryx2 peer (cargo)" >&2
  if ! cargo build --release --locked --manifest-path "$iceoryx2_dir/Cargo.toml" </dev/null; then
    echo "peers.sh: the iceoryx2 peer did not build (above); it is skipped" >&2
    iceoryx2=
  fi
  echo "peers.sh: building alkaid_rust_latency (cargo, rust/alkaid-bench)" >&2
  if ! ALKAID_BUILD_DIR="$PWD/$build" cargo build --release --locked -p alkaid-bench \
      --manifest-path rust/Cargo.toml </dev/null; then
    echo "peers.sh: alkaid_rust_latency did not build (above); it is skipped" >&2
    alkaid_rust=
  fi
else
  echo "peers.sh: cargo not found: the iceoryx2 peer and alkaid_rust_latency are skipped" \
       "(they need a Rust toolchain, 1.89 or newer)" >&2
  iceoryx2=
  alkaid_rust=
fi
if [ ! -x "$iceoryx" ]; then
  echo "peers.sh: no $iceoryx: the iceoryx 2.0 peer is skipped (scripts/install-deps.sh" \
       "--peers, then scripts/build.sh)" >&2
  iceoryx=
elif ! command -v iox-roudi >/dev/null 2>&1; then
  echo "peers.sh: iox-roudi not on PATH: the iceoryx 2.0 peer is skipped" \
       "(scripts/install-deps.sh --peers)" >&2
  iceoryx=
fi

mkdir -p "$results"
rm -f "$results"/*.json "$results"/*.log
# Never a broker someone else runs: a socket nobody listens on makes
# alkaid latency start a private one.
export ALKAID_BROKER_SOCKET=$results/no-broker.sock
failed=0
# Ctrl-C stops the whole comparison, not only the run it lands in (bash
# would go on when a tool exits 130 instead of dying by the signal). Each
# tool cleans up after itself first: the trap runs once it has exited.
trap 'echo "peers.sh: interrupted" >&2; exit 130' INT TERM
run() {  # run <name> <command...>: JSON to $results/<name>.json, output to <name>.log
  local name=$1
  shift
  echo "peers.sh: $name: $* --json $results/$name.json" >&2
  if ! "$@" --json "$results/$name.json" </dev/null >"$results/$name.log" 2>&1; then
    echo "peers.sh: $name failed; the end of $results/$name.log:" >&2
    tail -n 5 "$results/$name.log" >&2
    rm -f "$results/$name.json"
    failed=1
  fi
}
started=$(date '+%Y-%m-%d %H:%M:%S %Z')
load_before=$(uptime)
run alkaid "$alkaid" latency --sizes "$sizes" --count "$count" --mode "$mode" --compare floor,uds
if [ -n "$alkaid_rust" ]; then
  run alkaid-rust "$alkaid_rust" --broker "$build/broker/daemon/alkaid-broker" \
    --sizes "$sizes" --count "$count" --mode "$mode"
fi
if [ -n "$iceoryx2" ]; then
  run iceoryx2 "$iceoryx2" --sizes "$sizes" --count "$count" --mode "$mode"
fi
if [ -n "$iceoryx" ]; then
  run iceoryx "$iceoryx" --sizes "$sizes" --count "$count" --mode "$mode"
fi
load_after=$(uptime)

# What iceoryx2 leaves when a run ends badly: the peer removes its domain at
# exit (and a later run removes a killed run's), so anything here is news.
leftovers=$(find /dev/shm /tmp -maxdepth 1 -name 'alkaid_iox2_*' 2>/dev/null || true)

echo
echo "started $started, $count round trips per size, mode $mode"
echo "load before: $load_before"
echo "load after:  $load_after"
python3 - "$results" "$sizes" <<'EOF'
import json
import os
import sys

results_dir, sizes = sys.argv[1], [int(s) for s in sys.argv[2].split(",")]
# (label, JSON file, transport in it), in the table's order.
rows = [("alkaid", "alkaid", "alkaid"), ("alkaid-rust", "alkaid-rust", "alkaid-rust"),
        ("iceoryx2", "iceoryx2", "iceoryx2"),
        ("iceoryx 2.0", "iceoryx", "iceoryx"), ("floor", "alkaid", "floor"),
        ("uds", "alkaid", "uds")]
found = {}
for name in {r[1] for r in rows}:
    path = os.path.join(results_dir, name + ".json")
    if not os.path.exists(path):
        continue
    with open(path) as f:
        for r in json.load(f)["results"]:
            found[(name, r["transport"], r["payload_bytes"])] = r


def ns(v):  # as alkaid latency prints it (FormatNs in tools/alkaid/latency.cc)
    if v < 1e3:
        return "%.0f ns" % v
    if v < 1e6:
        return "%.2f us" % (v / 1e3)
    if v < 1e9:
        return "%.2f ms" % (v / 1e6)
    return "%.2f s" % (v / 1e9)


def size_text(b):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return "%d %s" % (b // div, unit)
    return "%d B" % b


print("one-way latency = round trip / 2; x = the transport's figure / Alkaid's")
head = "%-9s %-12s %10s %10s %9s %9s %8s" % (
    "payload", "transport", "p50", "p99", "p50 x", "p99 x", "samples")
print(head)
print("-" * len(head))
for size in sizes:
    base = found.get(("alkaid", "alkaid", size))
    for label, name, transport in rows:
        r = found.get((name, transport, size))
        if r is None:
            print("%-9s %-12s %10s" % (size_text(size), label, "(not run)"))
            continue
        if base and base["p50_ns"] > 0 and base["p99_ns"] > 0:
            x50 = "%.2fx" % (r["p50_ns"] / base["p50_ns"])
            x99 = "%.2fx" % (r["p99_ns"] / base["p99_ns"])
        else:
            x50 = x99 = "-"
        print("%-9s %-12s %10s %10s %9s %9s %8d" % (
            size_text(size), label, ns(r["p50_ns"]), ns(r["p99_ns"]), x50, x99,
            r["samples"]))
EOF
echo "JSON and logs: $results"
if [ -n "$leftovers" ]; then
  echo "peers.sh: iceoryx2 left these behind (the next run removes them):" >&2
  echo "$leftovers" >&2
else
  echo "/dev/shm and /tmp: no iceoryx2 files left"
fi
exit "$failed"
