#!/usr/bin/env bash
# Measures Alkaid's latency and throughput with `alkaid latency` (and the
# iceoryx peer when it was built), keeps the JSON of every run, and rewrites
# the figures section of docs/PERFORMANCE.md from it (between the
# "figures:begin" and "figures:end" markers; the rest of the file is kept).
#
#   scripts/perf-report.sh [--build DIR] [--quick] [--no-build] [--render-only]
#
#   --build DIR     build tree (default build/latency; configured RelWithDebInfo
#                   with -DALKAID_BUILD_BENCHMARKS=ON if it does not exist)
#   --quick         small counts (a smoke run; the figures are noisy)
#   --no-build      do not (re)build the targets
#   --render-only   only rewrite the document from the JSON already in the
#                   results directory
# Environment: COUNT (pingpong samples per size, default 10000), DURATION
# (seconds cap per transport and size, default 10), STREAM_COUNT (default
# 2000000), MEMORY_COUNT (batches of the memory run, default 10000000),
# RESULTS (directory for the JSON and .hgrm files, default
# $build/perf-results).
set -euo pipefail
cd "$(dirname "$0")/.."

build=build/latency
quick=0
do_build=1
render_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --no-build) do_build=0; shift ;;
    --render-only) render_only=1; do_build=0; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "perf-report.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

if [ $quick -eq 1 ]; then
  : "${COUNT:=500}" "${DURATION:=3}" "${STREAM_COUNT:=100000}" "${MEMORY_COUNT:=1000000}"
else
  : "${COUNT:=10000}" "${DURATION:=10}" "${STREAM_COUNT:=2000000}" "${MEMORY_COUNT:=10000000}"
fi
results=${RESULTS:-$build/perf-results}
sizes=64,4096,65536,1048576,16777216

if [ $do_build -eq 1 ]; then
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DALKAID_BUILD_BENCHMARKS=ON
  fi
  targets="alkaid alkaid-broker alkaid_shm_flatness_bench"
  if grep -q "alkaid_iceoryx_latency" "$build/build.ninja" 2>/dev/null; then
    targets="$targets alkaid_iceoryx_latency"
  fi
  # shellcheck disable=SC2086
  ninja -C "$build" $targets
fi
alkaid=$build/tools/alkaid/alkaid
iceoryx=$build/bench/peers/alkaid_iceoryx_latency
flatness=$build/bench/alkaid_shm_flatness_bench

if [ $render_only -eq 0 ]; then
  mkdir -p "$results"
  rm -f "$results"/*.json "$results"/*.txt
  rm -rf "$results/hgrm"
  # A private broker for every run (never a broker someone else uses).
  export ALKAID_BROKER_SOCKET=$results/no-broker.sock
  run() {  # run <name> <alkaid latency arguments...>
    local name=$1
    shift
    echo "== $name: alkaid latency $*" >&2
    cut -d' ' -f1-3 /proc/loadavg > "$results/$name.loadavg"
    "$alkaid" latency "$@" --json "$results/$name.json" | tee "$results/$name.txt"
    echo "alkaid latency $*" > "$results/$name.cmd"
  }
  run pingpong_spin --sizes $sizes --count "$COUNT" --duration "$DURATION" --mode spin \
    --compare floor,payload,uds --hgrm "$results/hgrm"
  run pingpong_block --sizes $sizes --count "$COUNT" --duration "$DURATION" --mode block
  run pingpong_hybrid --sizes $sizes --count "$COUNT" --duration "$DURATION" --mode hybrid
  run stream_1 --pattern stream --sizes 512 --count "$STREAM_COUNT" --duration 30 --mode spin \
    --compare uds
  run stream_1_fixed --pattern stream --sizes 512 --count "$STREAM_COUNT" --duration 30 \
    --mode spin --writer fixed
  # Five processes on few cores: consumers that spin would take turns on
  # the cores; hybrid lets idle consumers sleep.
  run stream_4 --pattern stream --consumers 4 --sizes 512 --count "$STREAM_COUNT" \
    --duration 30 --mode hybrid
  run memory --pattern stream --sizes 512 --count "$MEMORY_COUNT" --duration 0 --mode spin
  if [ -x "$flatness" ]; then
    # The body size as the only variable: paired with 64 B in one run.
    pairs_scale=1
    [ $quick -eq 1 ] && pairs_scale=0.1
    echo "== flatness" >&2
    cut -d' ' -f1-3 /proc/loadavg > "$results/flatness.loadavg"
    "$flatness" --pairs-scale "$pairs_scale" --benchmark_out="$results/flatness.json" \
      --benchmark_out_format=json | tee "$results/flatness.txt"
    echo "alkaid_shm_flatness_bench --pairs-scale $pairs_scale" > "$results/flatness.cmd"
  fi
  if [ -x "$iceoryx" ] && command -v iox-roudi >/dev/null; then
    for mode in spin block; do
      echo "== iceoryx_$mode" >&2
      cut -d' ' -f1-3 /proc/loadavg > "$results/iceoryx_$mode.loadavg"
      "$iceoryx" --sizes $sizes --count "$COUNT" --duration "$DURATION" --mode $mode \
        --json "$results/iceoryx_$mode.json" | tee "$results/iceoryx_$mode.txt"
      echo "alkaid_iceoryx_latency --sizes $sizes --count $COUNT --duration $DURATION --mode $mode" \
        > "$results/iceoryx_$mode.cmd"
    done
  fi
  {
    date -u '+%Y-%m-%d %H:%M UTC'
    git rev-parse --short HEAD 2>/dev/null || echo unknown
    lscpu | sed -n 's/^Model name: *//p' | head -1
    nproc
  } > "$results/host.txt"
fi

python3 - "$results" docs/PERFORMANCE.md <<'PY'
import json, os, re, sys

results, doc_path = sys.argv[1], sys.argv[2]

def load(name):
    path = os.path.join(results, name + ".json")
    return json.load(open(path))["results"] if os.path.exists(path) else None

def text(name, ext):
    path = os.path.join(results, name + "." + ext)
    return open(path).read().strip() if os.path.exists(path) else "?"

def us(ns):
    return "-" if ns is None else f"{ns / 1000:.2f}"

def size_name(b):
    if b >= 1 << 20 and b % (1 << 20) == 0: return f"{b >> 20} MiB"
    if b >= 1 << 10 and b % (1 << 10) == 0: return f"{b >> 10} KiB"
    return f"{b} B"

def pick(rows, transport, size):
    for r in rows or []:
        if r["transport"] == transport and r["payload_bytes"] == size:
            return r
    return None

def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b

def fmt_ratio(x):
    return "-" if x is None else f"{x:.2f}x"

spin, block, hybrid = load("pingpong_spin"), load("pingpong_block"), load("pingpong_hybrid")
s1, s4, mem = load("stream_1"), load("stream_4"), load("memory")
s1_fixed = load("stream_1_fixed")
iox_spin, iox_block = load("iceoryx_spin"), load("iceoryx_block")
host = text("host", "txt").splitlines() + ["?"] * 4
sizes = sorted({r["payload_bytes"] for r in spin or []})

out = []
w = out.append
w(f"Generated by `scripts/perf-report.sh` on {host[0]} (commit {host[1]}), {host[2]}, "
  f"{host[3]} CPUs. Times in microseconds; one run each; load average (1, 5, 15 min) "
  "taken just before each run.")
w("")
runs = [("pingpong_spin", "Ping-pong, spin, with baselines"), ("pingpong_block", "Ping-pong, block"),
        ("pingpong_hybrid", "Ping-pong, hybrid"), ("stream_1", "Stream, 1 consumer"),
        ("stream_1_fixed", "Stream, 1 consumer, FixedShapeWriter"),
        ("stream_4", "Stream, 4 consumers"), ("memory", "Memory"),
        ("flatness", "Body size, paired with 64 B"),
        ("iceoryx_spin", "iceoryx, busy poll"), ("iceoryx_block", "iceoryx, WaitSet")]
w("| run | command | load average |")
w("|---|---|---|")
for name, title in runs:
    if os.path.exists(os.path.join(results, name + ".json")):
        w(f"| {title} | `{text(name, 'cmd')}` | {text(name, 'loadavg')} |")
w("")

targets = []
def target(what, ok, detail):
    targets.append((what, "met" if ok else "**not met**", detail))

if spin:
    w("### Ping-pong, spin (one-way = round trip / 2)")
    w("")
    w("| payload | alkaid p50 | p90 | p99 | p99.9 | max | floor p50 | floor p99 | size-matched floor p50 "
      "| alkaid - size-matched p50 | uds p50 | uds p99 | p50 / floor | p99 / floor | uds p50 / alkaid p50 |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    overheads = {}
    worst50 = worst99 = 0
    all50 = all99 = True
    for size in sizes:
        a, f, u = pick(spin, "alkaid", size), pick(spin, "floor", size), pick(spin, "uds", size)
        pf = pick(spin, "payload", size)
        over = a["p50_ns"] - pf["p50_ns"] if a and pf else None
        overheads[size] = over
        r50 = ratio(a and a["p50_ns"], f and f["p50_ns"])
        r99 = ratio(a and a["p99_ns"], f and f["p99_ns"])
        ru = ratio(u and u["p50_ns"], a and a["p50_ns"])
        if r50 is None or r50 > 4: all50 = False
        if r99 is None or r99 > 10: all99 = False
        worst50 = max(worst50, r50 or 0)
        worst99 = max(worst99, r99 or 0)
        g = lambda r, k: r[k] if r else None
        w(f"| {size_name(size)} | {us(g(a,'p50_ns'))} | {us(g(a,'p90_ns'))} | {us(g(a,'p99_ns'))} "
          f"| {us(g(a,'p999_ns'))} | {us(g(a,'max_ns'))} | {us(g(f,'p50_ns'))} | {us(g(f,'p99_ns'))} "
          f"| {us(g(pf,'p50_ns'))} | {us(over)} | {us(g(u,'p50_ns'))} | {us(g(u,'p99_ns'))} | {fmt_ratio(r50)} | {fmt_ratio(r99)} "
          f"| {fmt_ratio(ru)} |")
    w("")
    target("spin p50 <= 4x floor, every size", all50, f"worst {worst50:.1f}x")
    target("spin p99 <= 10x floor, every size", all99, f"worst {worst99:.1f}x")
    a64, a16 = pick(spin, "alkaid", 64), pick(spin, "alkaid", 16 << 20)
    r = ratio(a16 and a16["p50_ns"], a64 and a64["p50_ns"])
    target("p50 at 16 MiB <= 1.2x p50 at 64 B", r is not None and r <= 1.2,
           f"{us(a16 and a16['p50_ns'])} us vs {us(a64 and a64['p50_ns'])} us = {fmt_ratio(r)}")
    o64, o16 = overheads.get(64), overheads.get(16 << 20)
    if o64 is not None and o16 is not None:
        # Not one of the targets: what Alkaid adds over handing the same body
        # over on a cache line, at both ends of the size range.
        r = ratio(o16, o64)
        targets.append(("(context) alkaid - size-matched floor, 16 MiB vs 64 B (p50)",
                        "-", f"{us(o16)} us vs {us(o64)} us = {fmt_ratio(r)}"))
    for size, need in ((64, 100), (1 << 20, 500)):
        a, u = pick(spin, "alkaid", size), pick(spin, "uds", size)
        r = ratio(u and u["p50_ns"], a and a["p50_ns"])
        target(f">= {need}x faster than uds at {size_name(size)} (p50)", r is not None and r >= need,
               f"{fmt_ratio(r)}")

if block or hybrid or iox_spin or iox_block:
    w("### Waiting modes, and iceoryx (p50 / p99)")
    w("")
    cols = [("alkaid spin", spin, "alkaid"), ("alkaid hybrid", hybrid, "alkaid"),
            ("alkaid block", block, "alkaid"), ("iceoryx busy poll", iox_spin, "iceoryx"),
            ("iceoryx WaitSet", iox_block, "iceoryx")]
    cols = [c for c in cols if c[1]]
    w("| payload | " + " | ".join(c[0] for c in cols) + " |")
    w("|---|" + "---|" * len(cols))
    for size in sizes or sorted({r["payload_bytes"] for c in cols for r in c[1]}):
        cells = []
        for _, rows, t in cols:
            r = pick(rows, t, size)
            cells.append("-" if r is None else f"{us(r['p50_ns'])} / {us(r['p99_ns'])}")
        w(f"| {size_name(size)} | " + " | ".join(cells) + " |")
    w("")
    idle = []
    for label, rows in (("spin", spin), ("hybrid", hybrid), ("block", block)):
        for r in rows or []:
            if r["transport"] == "alkaid" and r.get("idle_wall_ns"):
                idle.append((label, r["payload_bytes"], r["idle_cpu_ns"], r["idle_wall_ns"]))
                break
    if idle:
        w("Consumer CPU time while idle (getrusage of the consumer process over an idle period "
          "in `Next`, no data coming):")
        w("")
        for label, size, cpu, wall in idle:
            w(f"- {label}: {cpu / 1e6:.2f} ms of CPU in {wall / 1e6:.0f} ms "
              f"({100 * cpu / wall:.2f}% of a core)")
        w("")
    if block and iox_block:
        ok, worst = True, []
        for size in sizes:
            a, i = pick(block, "alkaid", size), pick(iox_block, "iceoryx", size)
            if a and i:
                if a["p50_ns"] > i["p50_ns"]: ok = False
                worst.append(f"{size_name(size)} {us(a['p50_ns'])} vs {us(i['p50_ns'])}")
        target("block p50 no worse than iceoryx WaitSet", ok, "; ".join(worst))
    elif block:
        target("block p50 no worse than iceoryx WaitSet", False, "iceoryx figures missing")

for title, rows, extra, need in (("1 consumer", s1, s1_fixed, 5e6), ("4 consumers", s4, None, 1e6)):
    if not rows:
        continue
    a = [r for r in rows if r["transport"] == "alkaid"]
    u = [r for r in rows if r["transport"] == "uds"]
    if not a:
        continue
    a = a[0]
    # The same stream through a FixedShapeWriter, when it was run.
    fixed = [r for r in extra or [] if r["transport"] == "alkaid"]
    named = lambda r: r["transport"] + (f", writer {r['writer']}" if r.get("writer") else "")
    w(f"### Stream, {title} ({a['payload_bytes']} B = one int64 column x {a['payload_bytes'] // 8} rows, mode {a['mode']})")
    w("")
    w("| transport | batches/s per consumer | p50 | p99 | p99.9 | max | samples |")
    w("|---|---|---|---|---|---|---|")
    for r in [a] + fixed + u:
        w(f"| {named(r)} | {r['msgs_per_s']:,.0f} | {us(r['p50_ns'])} | {us(r['p99_ns'])} "
          f"| {us(r['p999_ns'])} | {us(r['max_ns'])} | {r['samples']} |")
    w("")
    w("Stream latency is publish to receive with the producer publishing as fast as it can, so "
      "it includes the time a batch waits in the ring behind the ones before it.")
    w("")
    target(f"stream, {title}: >= {need / 1e6:g}M batches/s" + (" each" if need < 5e6 else ""),
           max(r["msgs_per_s"] for r in [a] + fixed) >= need,
           "; ".join(f"{named(r)} {r['msgs_per_s']:,.0f}/s" for r in [a] + fixed))

if mem:
    a = [r for r in mem if r["transport"] == "alkaid" and r.get("memory")]
    if a:
        a = a[0]
        w(f"### Memory over {a['samples']:,} batches (stream, {a['payload_bytes']} B)")
        w("")
        w("| after batches | producer RSS | consumer RSS | broker RSS | broker segments in /dev/shm |")
        w("|---|---|---|---|---|")
        mib = lambda b: f"{b / 1048576:.1f} MiB"
        for m in a["memory"]:
            w(f"| {m['after_messages']:,} | {mib(m['producer_rss_bytes'])} | {mib(m['consumer_rss_bytes'])} "
              f"| {mib(m['broker_rss_bytes'])} | {mib(m['segments_bytes'])} |")
        w("")
        if len(a["memory"]) == 2:
            first, last = a["memory"]
            keys = ("producer_rss_bytes", "consumer_rss_bytes", "broker_rss_bytes", "segments_bytes")
            growth = max(last[k] - first[k] for k in keys)
            target(f"memory flat ({first['after_messages']:,} -> {last['after_messages']:,} batches)",
                   growth <= 1 << 20, f"largest growth {growth / 1024:.0f} KiB")

flat_path = os.path.join(results, "flatness.json")
flat = json.load(open(flat_path))["benchmarks"] if os.path.exists(flat_path) else []
if flat:
    w("### Body size: paired with a 64 B batch in the same processes (`alkaid_shm_flatness_bench`)")
    w("")
    w("Each row alternates batches of its size with 64 B batches through one ring, segment and "
      "pair of pinned processes. One-way: Publish until the consumer has read the first and last "
      "value; rebuilt: until it holds the batch. Differences are per pair (size - 64 B), median "
      "and 95 % interval. loaned: only two values written (the transport alone); built: every "
      "value written, warm-up with a batch of the same shape; built_evicted: built, then 64 MiB "
      "written (the same cache state at both sizes).")
    w("")
    w("| fill | size | pairs | 64 B p50 | p50 | one-way difference | rebuilt difference | p50 / 64 B p50 |")
    w("|---|---|---|---|---|---|---|---|")
    ci = lambda r, k: f"{r[k + '_p50']:+.0f} ns [{r[k + '_lo']:+.0f}, {r[k + '_hi']:+.0f}]"
    for r in flat:
        parts = r["name"].split("/")
        fill, size = parts[1], int(parts[2])
        w(f"| {fill} | {size_name(size)} | {r['iterations']} | {us(r['p50_64B'])} | {us(r['p50'])} "
          f"| {ci(r, 'd')} | {ci(r, 'dr')} | {fmt_ratio(r['ratio'])} |")
        if fill == "loaned" and size == 16 << 20:
            # Flat: the interval of the difference stays within 10 % of the
            # 64 B latency.
            bound = 0.1 * r["p50_64B"]
            target("one-way latency does not grow with the body size (loaned, 16 MiB vs 64 B, paired)",
                   r["d_hi"] <= bound, f"{ci(r, 'd')}, 64 B p50 {us(r['p50_64B'])} us")
    w("")

w("### Targets")
w("")
w("| target | result | figures |")
w("|---|---|---|")
for what, result, detail in targets:
    w(f"| {what} | {result} | {detail} |")

doc = open(doc_path).read()
begin, end = "<!-- figures:begin -->", "<!-- figures:end -->"
if begin not in doc or end not in doc:
    sys.exit(f"{doc_path}: no {begin} ... {end} markers")
head, rest = doc.split(begin, 1)
_, tail = rest.split(end, 1)
open(doc_path, "w").write(head + begin + "\n" + "\n".join(out) + "\n" + end + tail)
PY
echo "perf-report.sh: figures in docs/PERFORMANCE.md rewritten from $results" >&2
