#!/usr/bin/env bash
# `alkaid latency`, the front end of alkaid-measure (built beside it): runs
# the real program with tiny counts, each layer and pattern (the client
# layer against a private broker), and checks the report's structure (not
# its figures), the .hgrm files, the usage errors (a flag a layer or pattern
# would not use is refused), and that nothing is left behind: no /dev/shm
# segment, no process, also after Ctrl-C.
#   latency_cli_test.sh <alkaid> <alkaid-broker>
set -uo pipefail
alkaid=$1
export ALKAID_BROKER_BIN=$2
# shellcheck source=cli_lib.sh
source "$(dirname "$0")/cli_lib.sh"
# No broker answers here, so the tool starts (and stops) its own.
export ALKAID_BROKER_SOCKET=$work/no-broker.sock

expect 0 "latency --help" "$alkaid" latency --help
grep -q -- "--sizes" "$work/out" || { echo "FAILED: --help does not list --sizes" >&2; fail=1; }
expect 0 "alkaid-measure --help" "$(dirname "$alkaid")/alkaid-measure" --help
grep -q -- "channel" "$work/out" || { echo "FAILED: alkaid-measure --help does not list the channel layer" >&2; fail=1; }
# Without alkaid-measure beside it (nor on PATH), the front end says so.
mkdir "$work/alone" && cp "$alkaid" "$work/alone/alkaid"
expect 1 "latency without alkaid-measure" env PATH=/usr/bin:/bin "$work/alone/alkaid" latency --help
grep -q "cannot run the measurement program alkaid-measure" "$work/err" ||
  { echo "FAILED: no alkaid-measure: the error does not say so" >&2; cat "$work/err" >&2; fail=1; }

expect 2 "bad --mode" "$alkaid" latency --mode sometimes
expect 2 "bad --pattern" "$alkaid" latency --pattern burst
expect 2 "bad --sizes" "$alkaid" latency --sizes 64,lots
one_stderr_line "bad --sizes"
expect 2 "zero size" "$alkaid" latency --sizes 0
expect 2 "bad --compare" "$alkaid" latency --compare floor,tcp
one_stderr_line "bad --compare"
expect 2 "--consumers with pingpong" "$alkaid" latency --consumers 2
expect 2 "--writer with pingpong" "$alkaid" latency --writer fixed
expect 2 "bad --writer" "$alkaid" latency --pattern stream --writer copy
expect 2 "bad --count" "$alkaid" latency --count 0
expect 2 "bad --layer" "$alkaid" latency --layer pipe
expect 2 "inproc with --compare" "$alkaid" latency --layer inproc --compare floor
expect 2 "inproc with pingpong" "$alkaid" latency --layer inproc --pattern pingpong
expect 2 "inproc at 64 B" "$alkaid" latency --layer inproc --sizes 64
expect 2 "inproc with --mode block" "$alkaid" latency --layer inproc --mode block
# A flag the run would not use is refused (exit 2, one line naming it),
# never ignored: the layer, then the pattern.
refused() {  # refused <flag named in the error> <args...>
  local flag=$1
  shift
  expect 2 "$* (refused)" "$alkaid" latency "$@"
  one_stderr_line "$*"
  grep -q -- "$flag" "$work/err" || { echo "FAILED: $*: the error does not name $flag" >&2; fail=1; }
}
refused --duration --layer inproc --duration 5
refused --idle --layer inproc --idle 1
refused --no-warmup --layer inproc --no-warmup
refused --progress --layer inproc --progress
refused --socket --layer inproc --socket /tmp/x.sock
refused --no-pin --layer inproc --no-pin
refused --socket --layer channel --socket /tmp/x.sock
refused --writer --layer channel --pattern stream --writer fixed
refused --no-warmup --pattern stream --no-warmup
refused --idle --pattern stream --idle 1
refused --writer --writer build
refused --compare --pattern paired --compare floor
expect 2 "--writer strings on the client layer" "$alkaid" latency --pattern stream --writer strings

# Nothing of run $1 (the tool's pid) is left: its broker's segments (and
# the channels of --layer inproc, which has no broker), its processes (the broker's name and the forked children's argv carry it).
# The tool has exited when this runs; what it reaped may take a moment to go:
# waits (up to 30 s, a guard against a hang) until nothing is left, then
# judges.
check_clean() {  # check_clean <tool pid> <description>
  local pid=$1 what=$2 left
  for _ in $(seq 600); do
    if ! ls /dev/shm | grep -q -e "alkaid-latency\.\?$pid\." &&
       ! pgrep -f "alkaid-latency$pid|$work/" >/dev/null; then
      break
    fi
    sleep 0.05
  done
  left=$(ls /dev/shm | grep -e "alkaid-latency\.\?$pid\." || true)
  [ -z "$left" ] || { echo "FAILED: $what: segments left in /dev/shm: $left" >&2; fail=1; }
  left=$(pgrep -f "alkaid-latency$pid|$work/")
  [ -z "$left" ] || { echo "FAILED: $what: processes left: $(ps -o pid,args -p "${left//$'\n'/,}")" >&2; fail=1; }
}

# Runs `alkaid latency ARGS...` to the end, stdout to $work/TAG.out and
# stderr to $work/TAG.err; fails unless it exits 0 and leaves nothing.
run_latency() {  # run_latency <tag> <description> <args...>
  local tag=$1 what=$2 pid code
  shift 2
  "$alkaid" latency "$@" >"$work/$tag.out" 2>"$work/$tag.err" &
  pid=$!
  wait $pid
  code=$?
  [ $code -eq 0 ] || { echo "FAILED: $what: exit $code" >&2; cat "$work/$tag.err" >&2; fail=1; }
  check_clean $pid "$what"
}

# Ping-pong with every baseline (the JSON on stdout).
run_latency pp "pingpong run" --sizes 64,65536 --count 200 --compare floor,body,uds --json - \
  --hgrm "$work/hgrm" --idle 0.1
# The table (on stderr with --json -) compares with the size-matched floor.
for want in "p50/body" "overhead over body floor:"; do
  [ "$(grep -c -- "$want" "$work/pp.err")" -ge 2 ] ||
    { echo "FAILED: pingpong table: '$want' not shown for both sizes" >&2; fail=1; }
done
# The previous release's name of the body floor: deprecated, warned about,
# still measured.
run_latency old "--compare payload" --sizes 64 --count 50 --compare payload
grep -q -- "--compare payload is deprecated; use --compare body" "$work/old.err" ||
  { echo "FAILED: --compare payload: no deprecation warning" >&2; fail=1; }
grep -q -- "p50/body" "$work/old.out" "$work/old.err" ||
  { echo "FAILED: --compare payload: no body floor measured" >&2; fail=1; }

python3 - "$work/pp.out" "$work/hgrm" <<'PY' || fail=1
import json, os, sys
doc = json.load(open(sys.argv[1]))
res = doc["results"]
want = {(t, s) for t in ("alkaid", "floor", "body", "uds") for s in (64, 65536)}
got = {(r["transport"], r["payload_bytes"]) for r in res}
errors = []
if got != want:
    errors.append(f"results for {sorted(got)}, expected {sorted(want)}")
for r in res:
    where = f'{r["transport"]} {r["payload_bytes"]}'
    for key in ("layer", "mode", "pattern", "consumers", "samples", "p50_ns", "p90_ns", "p99_ns",
                "p999_ns", "max_ns", "msgs_per_s"):
        if key not in r:
            errors.append(f"{where}: no {key}")
    if r["layer"] != "client" or r["pattern"] != "pingpong" or r["consumers"] != 1:
        errors.append(f"{where}: pattern {r['pattern']}, consumers {r['consumers']}")
    if r["samples"] != 200:
        errors.append(f"{where}: {r['samples']} samples, expected 200")
    if not (0 < r["p50_ns"] <= r["p90_ns"] <= r["p99_ns"] <= r["p999_ns"] <= r["max_ns"]):
        errors.append(f"{where}: percentiles out of order: {r}")
    if not r["msgs_per_s"] > 0:
        errors.append(f"{where}: msgs_per_s {r['msgs_per_s']}")
    if r["transport"] == "body" and r["mode"] != "spin":
        errors.append(f"{where}: mode {r['mode']}, expected spin")
    if r["transport"] == "alkaid" and not (r.get("idle_wall_ns", 0) > 0 and r.get("idle_cpu_ns", -1) >= 0):
        errors.append(f"{where}: no idle CPU figures")
    # The HdrHistogram percentile distribution of this run.
    path = os.path.join(sys.argv[2], f'{r["transport"]}_{r["payload_bytes"]}.hgrm')
    if not os.path.exists(path):
        errors.append(f"{where}: no {path}")
        continue
    lines = open(path).read().splitlines()
    if lines[0].split() != ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"]:
        errors.append(f"{path}: header {lines[0]!r}")
    rows = [l.split() for l in lines[1:] if l.strip() and not l.startswith("#")]
    prev = (0.0, 0.0, 0)
    for row in rows:
        if len(row) not in (3, 4):
            errors.append(f"{path}: bad row {row}")
            break
        v, p, c = float(row[0]), float(row[1]), int(row[2])
        if v < prev[0] or p < prev[1] or c < prev[2] or not 0 <= p <= 1:
            errors.append(f"{path}: row {row} goes back")
            break
        prev = (v, p, c)
    if not rows or float(rows[-1][1]) != 1.0 or int(rows[-1][2]) != 200:
        errors.append(f"{path}: last row {rows[-1] if rows else None}, expected 100% of 200")
    elif abs(float(rows[-1][0]) * 1000 - r["max_ns"]) > 1:
        errors.append(f"{path}: max {rows[-1][0]} us, JSON max {r['max_ns']} ns")
    footer = [l for l in lines if l.startswith("#[")]
    if len(footer) < 2 or not footer[0].startswith("#[Mean") or not footer[1].startswith("#[Max"):
        errors.append(f"{path}: footer {footer}")
for e in errors:
    print("FAILED:", e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY

# Stream, two consumers, blocking waits; the table on stdout.
run_latency stream "stream run" --pattern stream --consumers 2 --mode block --sizes 512 \
  --count 300 --compare uds --json "$work/stream.json"
grep -q "p50" "$work/stream.out" || { echo "FAILED: stream run printed no table" >&2; fail=1; }
python3 - "$work/stream.json" <<'PY' || fail=1
import json, sys
res = json.load(open(sys.argv[1]))["results"]
ok = len(res) == 2 and {r["transport"] for r in res} == {"alkaid", "uds"}
for r in res:
    ok = ok and r["pattern"] == "stream" and r["consumers"] == 2 and r["samples"] == 600
    ok = ok and r["payload_bytes"] == 512 and r["msgs_per_s"] > 0
    ok = ok and 0 <= r["p50_ns"] <= r["p99_ns"] <= r["max_ns"]
    # The writer is the producer's: named for alkaid only.
    ok = ok and r.get("writer") == ("build" if r["transport"] == "alkaid" else None)
if not ok:
    print("FAILED: stream results:", json.dumps(res), file=sys.stderr)
sys.exit(0 if ok else 1)
PY

# Stream through a FixedShapeWriter: every batch checked by the consumer
# (its sequence in every value but the first), none lost; beside the
# stream's floor (a ring in shared memory) and the socket, which the same
# consumer loop checks.
run_latency fixed "fixed-writer stream" --pattern stream --writer fixed --sizes 512 --count 3000 \
  --compare floor,uds --json "$work/fixed.json"
grep -q "writer fixed" "$work/fixed.out" || { echo "FAILED: fixed-writer table does not name the writer" >&2; fail=1; }
python3 - "$work/fixed.json" <<'PY' || fail=1
import json, sys
res = json.load(open(sys.argv[1]))["results"]
ok = [r["transport"] for r in res] == ["alkaid", "floor", "uds"] and res[0]["writer"] == "fixed"
for r in res:
    ok = ok and r["samples"] == 3000 and r["msgs_per_s"] > 0 and r["pattern"] == "stream"
if not ok:
    print("FAILED: fixed-writer results:", json.dumps(res), file=sys.stderr)
sys.exit(0 if ok else 1)
PY

# The channel layer (no broker, no batch): ping-pong beside the floor with
# the idle figures, and a stream to two blocking consumers with stamped
# publish times (and 520 B: 65 values, one past the producer's whole
# 64-byte runs, checked as every batch's last); the same schema, the layer named.
run_latency chpp "channel pingpong" --layer channel --sizes 64,4096 --count 200 --compare floor \
  --idle 0.1 --json "$work/chpp.json"
run_latency chst "channel stream" --layer channel --pattern stream --consumers 2 --mode block \
  --sizes 512,520 --count 3000 --timestamps --json "$work/chst.json"
# The paired pattern (each size alternated with 64 B), on each layer.
run_latency paired "paired" --pattern paired --sizes 4096 --count 100 --idle 0.1 \
  --json "$work/paired.json"
grep -q "paired with 64 B (100 pairs" "$work/paired.out" ||
  { echo "FAILED: paired: no paired line in the table" >&2; cat "$work/paired.out" >&2; fail=1; }
run_latency chpaired "channel paired" --layer channel --pattern paired --sizes 65536 --count 50 \
  --idle 0.1 --json "$work/chpaired.json"
python3 - "$work/chpp.json" "$work/chst.json" "$work/paired.json" "$work/chpaired.json" <<'PY' || fail=1
import json, sys
keys = ("transport", "layer", "mode", "pattern", "payload_bytes", "consumers", "samples",
        "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns", "mean_ns", "msgs_per_s")
errors = []
def check(path, want):  # want: (transport, layer, pattern, payload, consumers, samples) per row
    res = json.load(open(path))["results"]
    got = [(r["transport"], r["layer"], r["pattern"], r["payload_bytes"], r["consumers"],
            r["samples"]) for r in res]
    if got != want:
        errors.append(f"{path}: rows {got}, expected {want}")
    for r in res:
        missing = [k for k in keys if k not in r]
        if missing:
            errors.append(f"{path}: {r['transport']} lacks {missing}")
        elif not (0 < r["p50_ns"] <= r["p99_ns"] <= r["max_ns"] and r["msgs_per_s"] > 0):
            errors.append(f"{path}: figures out of order: {r}")
    return res
pp = check(sys.argv[1], [("alkaid", "channel", "pingpong", 64, 1, 200),
                         ("floor", "channel", "pingpong", 64, 1, 200),
                         ("alkaid", "channel", "pingpong", 4096, 1, 200),
                         ("floor", "channel", "pingpong", 4096, 1, 200)])
for r in pp:
    if r["transport"] == "alkaid" and not (r.get("idle_wall_ns", 0) > 0 and "writer" not in r):
        errors.append(f"channel pingpong: no idle figures, or a writer: {r}")
st = check(sys.argv[2], [("alkaid", "channel", "stream", 512, 2, 6000),
                         ("alkaid", "channel", "stream", 520, 2, 6000)])
for r in st:
    if r["timestamps"] is not True or r["mode"] != "block":
        errors.append(f"channel stream: {r}")
for path, layer, size, pairs in ((sys.argv[3], "client", 4096, 100),
                                 (sys.argv[4], "channel", 65536, 50)):
    pa = check(path, [("alkaid", layer, "paired", size, 1, pairs)])
    p = pa[0].get("paired", {}) if pa else {}
    if not (p.get("pairs") == pairs and p.get("p50_64B_ns", 0) > 0 and
            p.get("diff_lo_ns", 1) <= p.get("diff_p50_ns", 0) <= p.get("diff_hi_ns", -1)):
        errors.append(f"{path}: paired figures: {pa}")
for e in errors:
    print("FAILED:", e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY

# The data path in one thread (no broker, no second process), each writer
# (the fixed one with the channel stamping publish times, which the run
# checks on the last batch; strings with a utf8 column, its word checked): every batch received and checked; the JSON of
# the same schema, with the layer named and no percentiles (nothing is timed
# one by one).
for writer in build fixed strings; do
  stamp=$([ $writer = fixed ] && echo --timestamps || true)
  run_latency "inproc_$writer" "inproc, writer $writer" --layer inproc --count 2000 \
    --writer $writer $stamp --json "$work/inproc_$writer.json"
  grep -q "2000 batches, .* per batch" "$work/inproc_$writer.out" ||
    { echo "FAILED: inproc, writer $writer: no per-batch line" >&2; fail=1; }
  python3 - "$work/inproc_$writer.json" "$writer" <<'PY' || fail=1
import json, sys
res = json.load(open(sys.argv[1]))["results"]
r = res[0] if len(res) == 1 else {}
ok = (r.get("transport"), r.get("layer"), r.get("pattern"), r.get("writer")) == \
    ("alkaid", "inproc", "stream", sys.argv[2])
ok = ok and r["payload_bytes"] == 512 and r["samples"] == 2000 and r["consumers"] == 1
ok = ok and r["mean_ns"] > 0 and r["msgs_per_s"] > 0
ok = ok and r["timestamps"] == (sys.argv[2] == "fixed")
ok = ok and all(r[k] is None for k in ("p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"))
if not ok:
    print("FAILED: inproc results:", json.dumps(res), file=sys.stderr)
sys.exit(0 if ok else 1)
PY
done

# Ctrl-C in the middle of a long run: the tool's handler ends it with exit
# code 130 (not death by SIGINT, which a shell would also report as 130:
# Python's returncode tells the two apart, -2 vs 130), nothing left behind.
# SIGINT is sent once the tool has installed its handler (SigCgt in
# /proc/PID/status), not after a guessed delay.
pidfile="$work/int.pid"
code=$(python3 - "$alkaid" "$work" "$pidfile" <<'PY'
import os, signal, subprocess, sys, time
alkaid, work, pidfile = sys.argv[1:4]
with open(f"{work}/int.out", "wb") as out, open(f"{work}/int.err", "wb") as err:
    p = subprocess.Popen([alkaid, "latency", "--sizes", "4096", "--count", "100000000",
                          "--duration", "60", "--json", f"{work}/int.json"],
                         stdout=out, stderr=err)
    open(pidfile, "w").write(str(p.pid))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None:
        caught = 0
        with open(f"/proc/{p.pid}/status") as status:
            for line in status:
                if line.startswith("SigCgt:"):
                    caught = int(line.split()[1], 16)
        if caught & (1 << (signal.SIGINT - 1)):
            break
        time.sleep(0.01)
    time.sleep(0.5)  # into the measurement (the verdict does not depend on it)
    p.send_signal(signal.SIGINT)
    print(p.wait())
PY
)
pid=$(cat "$pidfile")
[ "$code" = "130" ] || { echo "FAILED: interrupted run: returncode $code, expected 130 (-2: killed by SIGINT, the handler did not run)" >&2; cat "$work/int.err" >&2; fail=1; }
check_clean $pid "interrupted run"

exit $fail
