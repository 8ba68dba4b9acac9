"""alkaid top and hz against a real broker with a known load: `top --once
--json` figures, the full-screen view driven in tmux (what the screen shows,
keys), `hz` lines (docs/BROKER.md, "Watching it live")."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid

import pyarrow as pa
import pytest

from ops_support import TOOL, PipePublisher, broker, wait_until  # noqa: F401 (fixture)

SCHEMA = pa.schema([("i", pa.int64())])


def batch(i: int, rows: int = 8) -> pa.RecordBatch:
    return pa.record_batch([pa.array(range(i * rows, (i + 1) * rows), pa.int64())], schema=SCHEMA)


def top_json(broker, interval: str = "0.1") -> dict:
    r = broker.tool("top", "--once", "--json", "--interval", interval)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def topic_of(doc: dict, name: str) -> dict | None:
    return next((t for t in doc["topics"] if t["name"] == name), None)


@pytest.fixture
def load(broker):
    """Topic 'busy': two producers, 30 + 20 batches, one consumer stopped
    (SIGSTOP) after the first of each: lag 29. Topic 'idle': one producer, no
    batch beyond its first, no consumer."""
    sub = broker.spawn("subscribe", "busy", "--out", os.devnull)
    wait_until(lambda: broker.awaited_consumers("busy") == 1, "subscriber waits for 'busy'")
    pubs = [PipePublisher(broker, "busy", SCHEMA, batch(0)) for _ in range(2)]
    # The subscriber has read both first batches before it is stopped: then
    # it reads nothing more.
    wait_until(lambda: (broker.topic("busy") or {}).get("published") == 2 and
               broker.topic("busy")["depth"] == 0, "both first batches read")
    sub.send_signal(signal.SIGSTOP)
    for i in range(1, 30):
        pubs[0].write(batch(i))
    for i in range(1, 20):
        pubs[1].write(batch(i))
    idle = PipePublisher(broker, "idle", SCHEMA, batch(0))
    yield {"sub": sub, "pubs": pubs, "idle": idle}
    sub.send_signal(signal.SIGCONT)
    for p in pubs + [idle]:
        p.close()
    sub.communicate(timeout=60)


def test_top_once_json_against_a_known_load(broker, load):
    def settled() -> bool:
        busy = topic_of(top_json(broker), "busy")
        return busy is not None and busy["published"] == 50 and busy["depth"] == 29
    wait_until(settled, "the producers reported 50 batches, lag 29")
    doc = top_json(broker, "0.3")
    busy, idle = topic_of(doc, "busy"), topic_of(doc, "idle")
    assert busy["producers"] == 2 and busy["consumers"] == 1
    assert busy["published"] == 50 and busy["depth"] == 29 and busy["drops"] == 0
    assert busy["policy"] == "block-producer" and busy["kind"] == "record-batch"
    assert idle["producers"] == 1 and idle["consumers"] == 0 and idle["depth"] == 0
    # Sorted by lag; nothing published in the interval: rate 0.
    assert [t["name"] for t in doc["topics"]][:2] == ["busy", "idle"]
    assert busy["published_in_interval"] == 0 and busy["batches_per_s"] == 0
    assert doc["broker"]["producers"] == 3 and doc["broker"]["consumers"] == 1
    assert doc["broker"]["shm_in_use_bytes"] > 0 and doc["interval_s"] >= 0.3
    # Expanded: each producer (its process and user, its count, its slowest
    # consumer's lag, its arena) and the consumer (its process, user and wait
    # mode from the broker; its lag, drops and held bodies as the producers'
    # channels see it: 29 unread of the first producer, 19 of the second).
    pubs = {p.proc.pid: p for p in load["pubs"]}
    producers = {p["pid"]: p for p in busy["producer_list"]}
    assert set(producers) == set(pubs)
    first, second = producers[load["pubs"][0].proc.pid], producers[load["pubs"][1].proc.pid]
    assert (first["published"], first["depth"]) == (30, 29)
    assert (second["published"], second["depth"]) == (20, 19)
    for p in (first, second):
        assert p["uid"] == os.getuid() and p["drops"] == 0
        assert p["arena_bytes"] >= 1 << 20 and p["shm_bytes"] > p["arena_bytes"]
        # No fixed blocks asked for (ProducerOptions::fixed_block_bytes).
        assert (p["fixed_block_bytes"], p["fixed_block_count"]) == (0, 0)
        assert p["published_in_interval"] == 0 and p["batches_per_s"] == 0
    [consumer] = busy["consumer_list"]
    assert consumer["pid"] == load["sub"].pid and consumer["uid"] == os.getuid()
    assert consumer["wait_mode"] == "spin-then-block" and consumer["reported"]
    assert consumer["lag"] == 29 and consumer["drops"] == 0
    # Every body it has not read is held for it, each at least one 64-byte
    # line; the topic's HELD is the same count.
    assert consumer["held_blocks"] == busy["held"] >= 48
    assert consumer["held_bytes"] >= 64 * consumer["held_blocks"]
    assert idle["producer_list"][0]["depth"] == 0 and idle["consumer_list"] == []
    # A rate over an interval with publishing: what was published in it,
    # divided by its length.
    for i in range(30, 40):
        load["pubs"][0].write(batch(i))
    doc = top_json(broker, "1.5")
    busy = topic_of(doc, "busy")
    assert busy["batches_per_s"] == pytest.approx(busy["published_in_interval"] / doc["interval_s"])
    first = next(p for p in busy["producer_list"] if p["pid"] == load["pubs"][0].proc.pid)
    assert first["batches_per_s"] == pytest.approx(first["published_in_interval"] /
                                                  doc["interval_s"])
    assert first["published_in_interval"] == busy["published_in_interval"]


def test_top_counts_each_consumers_drops(broker):
    """A drop-oldest topic of 16 slots, one consumer stopped after the first
    batch and one that reads on: the stopped one lost every batch but the
    last 16 of the 40 after its first (24), as its producer's channel counted
    them; the topic's drops are the sum over its consumers (the one reading
    may lose some too: the 40 come in one burst)."""
    stopped = broker.spawn("subscribe", "lossy", "--out", os.devnull)
    reading = broker.spawn("subscribe", "lossy", "--out", os.devnull)
    wait_until(lambda: broker.awaited_consumers("lossy") == 2, "subscribers wait for 'lossy'")
    pub = broker.spawn("publish", "lossy", "-", "--policy", "drop-oldest", "--slot-count", "16",
                       stdin=subprocess.PIPE)
    pub.stdin.write(SCHEMA.serialize().to_pybytes() + batch(0).serialize().to_pybytes())
    pub.stdin.flush()
    wait_until(lambda: (broker.topic("lossy") or {}).get("published") == 1 and
               broker.topic("lossy")["depth"] == 0, "the first batch read by both")
    stopped.send_signal(signal.SIGSTOP)
    try:
        for i in range(1, 41):
            pub.stdin.write(batch(i).serialize().to_pybytes())
        pub.stdin.flush()

        def settled() -> bool:
            t = topic_of(top_json(broker), "lossy") or {}
            return t.get("published") == 41 and t.get("drops", 0) >= 24 and \
                all(c["reported"] for c in t["consumer_list"])
        wait_until(settled, "41 batches published, drops reported")
        lossy = topic_of(top_json(broker), "lossy")
        by_pid = {c["pid"]: c for c in lossy["consumer_list"]}
        assert by_pid[stopped.pid]["drops"] == 40 - 16
        assert by_pid[stopped.pid]["lag"] == 40  # 41 published, its cursor at 1
        assert by_pid[stopped.pid]["drops"] + by_pid[reading.pid]["drops"] == lossy["drops"]
        assert by_pid[stopped.pid]["held_blocks"] <= 16
    finally:
        stopped.send_signal(signal.SIGCONT)
        pub.stdin.write(b"\xff\xff\xff\xff\x00\x00\x00\x00")
        pub.stdin.close()
        assert pub.wait(timeout=60) == 0
        for sub in (stopped, reading):
            sub.communicate(timeout=60)


def tmux(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True)


SOCKET = "alkaid-top-" + uuid.uuid4().hex[:8]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_top_full_screen_in_tmux(broker, load, tmp_path):
    # Both producers' counts reported (each reports on its own schedule: lag
    # 29 is the first producer's alone), as in the JSON test.
    def settled() -> bool:
        busy = topic_of(top_json(broker), "busy") or {}
        return busy.get("published") == 50 and busy.get("depth") == 29
    wait_until(settled, "the producers reported 50 batches, lag 29")
    session = "top"
    script = tmp_path / "run.sh"
    script.write_text(f"#!/bin/sh\n'{TOOL}' top --interval 0.2 --socket '{broker.socket}'\n"
                      f"echo EXIT=$?\nsleep 600\n")
    script.chmod(0o755)
    assert tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "30",
                str(script)).returncode == 0
    try:
        def screen() -> str:
            return tmux("capture-pane", "-p", "-t", session).stdout

        # A refresh after the figures settled: the first screen may predate them.
        wait_until(lambda: any(l.startswith("> busy") and "50" in l.split() for l in
                               screen().splitlines()) and "idle" in screen(),
                   "both topics on screen, 'busy' with its 50 batches")
        lines = screen().splitlines()
        assert lines[0].startswith("alkaid top  broker '" + broker.name + "'")
        header = next(i for i, l in enumerate(lines) if "TOPIC" in l and "LAG" in l)
        busy_line = lines[header + 1]
        # Sorted by lag: 'busy' first, selected, its figures in their columns.
        assert busy_line.startswith("> busy"), lines
        fields = busy_line.split()
        assert fields[1:4] == ["busy", "2", "1"] and "29" in fields and "50" in fields
        assert lines[header + 2].startswith("  idle")
        # Down selects 'idle'; enter shows its details; q quits cleanly.
        tmux("send-keys", "-t", session, "Down")
        wait_until(lambda: any(l.startswith("> idle") for l in screen().splitlines()),
                   "'idle' selected")
        tmux("send-keys", "-t", session, "Enter")
        wait_until(lambda: ", 1024 slots" in screen(), "details shown")
        # Up selects 'busy' again, still expanded: its producers and its
        # consumer, one line each under their headers.
        tmux("send-keys", "-t", session, "Up")
        wait_until(lambda: any(l.startswith("> busy") for l in screen().splitlines()) and
                   "spin-then-block" in screen(), "'busy' expanded")
        lines = screen().splitlines()
        at = next(i for i, l in enumerate(lines) if l.split()[:2] == ["PRODUCER", "PID"])
        rows = {l.split()[1]: l.split() for l in lines[at + 1:at + 3]}
        for pub, published, lag in ((load["pubs"][0], "30", "29"), (load["pubs"][1], "20", "19")):
            row = rows[str(pub.proc.pid)]
            assert row[0].startswith("p") and row[2] == str(os.getuid()), lines
            # Columns: id, pid, uid, batch/s, MB/s, published, lag.
            assert row[5:7] == [published, lag], lines
        assert lines[at + 3].split()[:2] == ["CONSUMER", "PID"], lines
        consumer = lines[at + 4].split()
        assert consumer[0].startswith("c") and consumer[1] == str(load["sub"].pid), lines
        # Columns: id, pid, uid, MB/s, lag, drops.
        assert consumer[2] == str(os.getuid()) and consumer[4:6] == ["29", "0"], lines
        assert consumer[-1] == "spin-then-block", lines
        # Left folds it: the lines go; right arrow unfolds it again.
        tmux("send-keys", "-t", session, "Left")
        wait_until(lambda: "CONSUMER" not in screen(), "'busy' folded")
        tmux("send-keys", "-t", session, "Right")
        wait_until(lambda: "CONSUMER" in screen() and ", 1024 slots" in screen(),
                   "'busy' expanded by the right arrow")
        tmux("send-keys", "-t", session, "q")
        wait_until(lambda: "EXIT=0" in screen(), "top quit with 0")
        assert "TOPIC" not in screen()  # the alternate screen is gone
    finally:
        tmux("kill-server")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_top_in_a_terminal_too_small(broker, tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(f"#!/bin/sh\n'{TOOL}' top --socket '{broker.socket}'\necho EXIT=$?\n"
                      "sleep 600\n")
    script.chmod(0o755)
    tmux("new-session", "-d", "-s", "small", "-x", "50", "-y", "6", str(script))
    try:
        wait_until(lambda: "EXIT=" in tmux("capture-pane", "-p", "-t", "small").stdout, "top exits")
        text = tmux("capture-pane", "-p", "-J", "-t", "small").stdout
        assert "the terminal is 50x6" in text.replace("\n", "") and "EXIT=1" in text, text
    finally:
        tmux("kill-server")


def test_top_and_hz_bad_input(broker, tmp_path):
    # Not a terminal: said, with what to use instead.
    r = broker.tool("top", stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and b"needs a terminal" in r.stderr
    # No broker: exit 2 naming the socket.
    r = subprocess.run([TOOL, "top", "--once", "--socket", str(tmp_path / "none.sock")],
                       capture_output=True)
    assert r.returncode == 2 and b"none.sock" in r.stderr, r.stderr
    assert broker.tool("top", "--json").returncode == 2  # --json needs --once
    assert broker.tool("top", "--once", "--interval", "0").returncode == 2
    assert broker.tool("hz").returncode == 2
    assert broker.tool("hz", "t", "--window", "-1").returncode == 2


def test_hz_counts_what_arrives(broker):
    hz = broker.spawn("hz", "rate", "--window", "0.5")
    wait_until(lambda: broker.awaited_consumers("rate") == 1, "hz waits for 'rate'")
    pub = PipePublisher(broker, "rate", SCHEMA, batch(0))
    for i in range(1, 25):
        pub.write(batch(i))
    pub.close()  # end of stream ends hz after its window
    out, err = hz.communicate(timeout=60)
    assert hz.returncode == 0, err
    lines = out.decode().splitlines()
    assert lines and all(l.startswith("'rate': ") for l in lines), lines
    # The topic does not stamp publish times: said once, first.
    assert lines[0] == "'rate': publish times: not stamped (create the topic with --timestamps)"
    lines = lines[1:]
    assert not any("latency" in l for l in lines), lines
    counts = [int(l.split("; ")[-1].split()[0]) for l in lines]
    assert sum(counts) == 25
    # 8 rows of int64 per batch: 64 bytes.
    assert any("per batch 8.0 rows, 64 B" in l for l in lines), lines


NS_PER = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def parse_latency(line: str) -> dict[str, float]:
    """'...; latency p50 41.2 us, p90 55.0 us, p99 80.1 us, max 90.3 us; ...'
    -> {'p50': 41200.0, ...} in nanoseconds."""
    part = next(p for p in line.split("; ") if p.startswith("latency "))
    out = {}
    for item in part[len("latency "):].split(", "):
        name, value, unit = item.split()
        out[name] = float(value) * NS_PER[unit]
    return out


def test_hz_prints_publish_to_receive_latency_of_stamped_topics(broker):
    hz = broker.spawn("hz", "stamped", "--window", "0.5")
    wait_until(lambda: broker.awaited_consumers("stamped") == 1, "hz waits for 'stamped'")
    before = time.time_ns()
    pub = PipePublisher(broker, "stamped", SCHEMA, batch(0), ("--timestamps",))
    for i in range(1, 25):
        pub.write(batch(i))
    pub.close()
    out, err = hz.communicate(timeout=60)
    after = time.time_ns()
    assert hz.returncode == 0, err
    lines = out.decode().splitlines()
    assert lines and not any("not stamped" in l for l in lines), lines
    counts = [int(l.split("; ")[-1].split()[0]) for l in lines]
    assert sum(counts) == 25
    # Each window with batches says its latency percentiles, in order; none
    # can exceed what elapsed around the whole run, nor be negative (one
    # clock, one machine).
    with_batches = [l for l, n in zip(lines, counts) if n > 0]
    assert with_batches and all("; latency p50 " in l for l in with_batches), lines
    assert not any("latency" in l for l, n in zip(lines, counts) if n == 0), lines
    for line in with_batches:
        lat = parse_latency(line)
        assert 0 <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"] <= after - before, line


def test_top_mb_per_s_under_a_known_load(broker):
    """A producer publishing batches of one size while top samples: the
    topic's, the producer's and the consumer's MB/s are the bytes of the
    interval over its length, and more than 0; the totals count each
    batch's body once."""
    sub = broker.spawn("subscribe", "flow", "--out", os.devnull)
    wait_until(lambda: broker.awaited_consumers("flow") == 1, "subscriber waits for 'flow'")
    pub = PipePublisher(broker, "flow", SCHEMA, batch(0))
    stop = threading.Event()
    sent = [1]

    def feed() -> None:
        while not stop.is_set():
            pub.write(batch(sent[0]))
            sent[0] += 1
            time.sleep(0.001)

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        docs = []

        def flowing() -> bool:
            doc = top_json(broker, "0.6")
            docs.append(doc)
            flow = topic_of(doc, "flow") or {}
            return (flow.get("mb_per_s", 0) > 0 and len(flow["producer_list"]) == 1 and
                    flow["producer_list"][0]["mb_per_s"] > 0 and
                    len(flow["consumer_list"]) == 1 and flow["consumer_list"][0]["mb_per_s"] > 0)
        wait_until(flowing, "top shows bytes flowing")
        doc = docs[-1]
    finally:
        stop.set()
        feeder.join()
    flow = topic_of(doc, "flow")
    seconds = doc["interval_s"]
    assert flow["mb_per_s"] == pytest.approx(flow["published_bytes_in_interval"] / seconds / 1e6)
    [producer] = flow["producer_list"]
    assert producer["mb_per_s"] == pytest.approx(
        producer["published_bytes_in_interval"] / seconds / 1e6)
    assert producer["published_bytes_in_interval"] == flow["published_bytes_in_interval"]
    [consumer] = flow["consumer_list"]
    assert consumer["mb_per_s"] == pytest.approx(consumer["read_bytes_in_interval"] / seconds / 1e6)
    # Every batch has the same body: the bytes are a whole number of them.
    # Once everything is read and reported (the idle publisher polls, which
    # answers the report), the consumer has passed every byte published.
    total = sent[0]

    def settled() -> bool:
        f = topic_of(top_json(broker, "0.1"), "flow") or {}
        return (f.get("published") == total and f.get("depth") == 0 and
                f["consumer_list"][0]["read_bytes"] == f["published_bytes"])
    wait_until(settled, f"the producer reported {total} batches, all read")
    flow = topic_of(top_json(broker, "0.1"), "flow")
    body = flow["published_bytes"] // total
    assert body >= 64 and flow["published_bytes"] == body * total
    pub.close()
    out, err = sub.communicate(timeout=60)
    assert sub.returncode == 0, err
