"""alkaid-broker --metrics scraped by Debian's real Prometheus server; the
values it stored (its HTTP API) match what the test published and dropped
(docs/BROKER.md, "Metrics")."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import urllib.parse
import urllib.request

import pyarrow as pa
import pytest

from ops_support import Broker, PipePublisher, shm_names, wait_until

SCHEMA = pa.schema([("i", pa.int64())])
PROMETHEUS = shutil.which("prometheus")


def batch(i: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array([i] * 4, pa.int64())], schema=SCHEMA)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def answers(url: str) -> bool:
    try:
        get(url)
        return True
    except OSError:
        return False


@pytest.fixture
def metrics_broker(tmp_path):
    port = free_port()
    b = Broker(tmp_path, ["--metrics", f"127.0.0.1:{port}"])
    b.metrics_url = f"http://127.0.0.1:{port}/metrics"
    try:
        # The broker's socket (what Broker waits for) comes before the
        # metrics port is bound: a scrape just after it can be refused.
        wait_until(lambda: answers(b.metrics_url), "the metrics endpoint answers")
        yield b
    finally:
        b.stop()
    assert shm_names(b.name) == set()


def test_exposition_format(metrics_broker):
    b = metrics_broker
    pub = PipePublisher(b, "fmt", SCHEMA, batch(0))
    wait_until(lambda: 'alkaid_topic_producers{topic="fmt"} 1' in get(b.metrics_url),
               "the topic in the exposition")
    text = get(b.metrics_url)
    families = [l.split()[2] for l in text.splitlines() if l.startswith("# TYPE")]
    assert len(families) == len(set(families))
    for name in families:  # every family has HELP and TYPE; counters end in _total
        assert f"# HELP {name} " in text
    for line in text.splitlines():
        if line.startswith("# TYPE"):
            _, _, name, kind = line.split()
            assert kind in ("counter", "gauge")
            assert name.startswith("alkaid_") and (kind != "counter") == (not name.endswith("_total"))
    with urllib.request.urlopen(b.metrics_url) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    pub.close()


@pytest.mark.skipif(PROMETHEUS is None, reason="Debian's prometheus is not installed")
def test_prometheus_scrapes_what_was_published_and_dropped(metrics_broker, tmp_path):
    b = metrics_broker
    # 'kept': 40 batches, a consumer reading them all. 'lossy': drop-oldest,
    # 16 slots, a consumer stopped after its first batch: what it has not
    # read is overwritten.
    sub = b.spawn("subscribe", "lossy", "--out", os.devnull)
    wait_until(lambda: b.awaited_consumers("lossy") == 1, "subscriber waits")
    lossy = b.spawn("publish", "lossy", "-", "--slot-count", "16", "--policy", "drop-oldest",
                    stdin=subprocess.PIPE)
    lossy.stdin.write(SCHEMA.serialize().to_pybytes() + batch(0).serialize().to_pybytes())
    lossy.stdin.flush()
    wait_until(lambda: (b.topic("lossy") or {}).get("published") == 1 and
               b.topic("lossy")["depth"] == 0, "first batch read")
    sub.send_signal(signal.SIGSTOP)
    for i in range(1, 100):
        lossy.stdin.write(batch(i).serialize().to_pybytes())
    lossy.stdin.flush()
    kept_sub = b.spawn("subscribe", "kept", "--out", os.devnull)
    wait_until(lambda: b.awaited_consumers("kept") == 1, "subscriber waits")
    kept = PipePublisher(b, "kept", SCHEMA, batch(0))
    for i in range(1, 40):
        kept.write(batch(i))
    wait_until(lambda: (b.topic("lossy") or {}).get("published") == 100 and
               (b.topic("kept") or {}).get("published") == 40, "the producers reported")
    drops = b.topic("lossy")["drops"]
    assert drops == 100 - 1 - 16  # all but the first and the 16 the slots hold

    prom_port = free_port()
    config = tmp_path / "prometheus.yml"
    target = b.metrics_url.split("//")[1].split("/")[0]
    config.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                      "scrape_configs:\n  - job_name: alkaid\n"
                      f"    static_configs:\n      - targets: ['{target}']\n")
    prom = subprocess.Popen([PROMETHEUS, f"--config.file={config}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{prom_port}"],
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prom.err", "wb"))
    try:
        api = f"http://127.0.0.1:{prom_port}/api/v1/query?query="

        def stored(query: str) -> float | None:
            try:
                doc = json.loads(get(api + urllib.parse.quote(query)))
            except OSError:
                return None
            result = doc["data"]["result"]
            return float(result[0]["value"][1]) if result else None

        wait_until(lambda: stored('alkaid_topic_published_batches_total{topic="kept"}') == 40,
                   "Prometheus stored 40 published on 'kept'", limit=120)
        assert stored('alkaid_topic_published_batches_total{topic="lossy"}') == 100
        assert stored('alkaid_topic_dropped_batches_total{topic="lossy"}') == drops
        assert stored('alkaid_topic_dropped_batches_total{topic="kept"}') == 0
        assert stored('alkaid_topic_lag_batches{topic="kept"}') == 0
        assert stored('alkaid_topic_producers{topic="lossy"}') == 1
        assert stored('alkaid_broker_producers') == 2
        assert stored('alkaid_broker_uptime_seconds') > 0
        assert stored('up{job="alkaid"}') == 1
        # Per producer and consumer (labels topic, id, pid): the stopped
        # subscriber lost what the topic lost; the other read everything.
        wait_until(lambda: stored('alkaid_consumer_dropped_batches_total{topic="lossy"}')
                   == drops, "Prometheus stored the consumer's drops", limit=120)
        assert stored(f'alkaid_consumer_lag_batches{{topic="lossy",pid="{sub.pid}"}}') > 0
        assert stored('alkaid_consumer_lag_batches{topic="kept"}') == 0
        assert stored(f'alkaid_consumer_dropped_batches_total{{topic="kept",pid="{kept_sub.pid}"}}') == 0
        assert stored('alkaid_producer_published_batches_total{topic="lossy"}') == 100
        assert stored(f'alkaid_producer_published_batches_total{{topic="kept",pid="{kept.proc.pid}"}}') == 40
        assert stored('alkaid_producer_arena_bytes{topic="kept"}') > 0
        # Bytes (rate() of them: MB/s): 40 bodies of at least one 64-byte
        # line each; the consumer that read everything read them all.
        kept_bytes = stored('alkaid_topic_published_bytes_total{topic="kept"}')
        assert kept_bytes >= 40 * 64
        assert stored(f'alkaid_producer_published_bytes_total{{topic="kept",pid="{kept.proc.pid}"}}') == kept_bytes
        wait_until(lambda: stored(f'alkaid_consumer_read_bytes_total{{topic="kept",pid="{kept_sub.pid}"}}')
                   == kept_bytes, "Prometheus stored the consumer's read bytes", limit=120)
    finally:
        prom.send_signal(signal.SIGTERM)
        prom.wait(timeout=60)
        sub.send_signal(signal.SIGCONT)
        lossy.stdin.write(b"\xff\xff\xff\xff\x00\x00\x00\x00")
        lossy.stdin.close()
        lossy.wait(timeout=60)
        kept.close()
        sub.communicate(timeout=60)
        kept_sub.communicate(timeout=60)


def samples(text: str, family: str, topic: str) -> dict[tuple[int, int], int]:
    """The exposition's samples of a per-consumer (or per-producer) family
    for `topic`, by (id, pid)."""
    out = {}
    prefix = family + '{topic="' + topic + '",'
    for line in text.splitlines():
        if line.startswith(prefix):
            labels, value = line[len(family) + 1:].rsplit("} ", 1)
            fields = dict(kv.split("=", 1) for kv in labels.split(","))
            out[(int(fields["id"].strip('"')), int(fields["pid"].strip('"')))] = int(value)
    return out


def test_two_consumers_of_one_process_each_show_their_own_figures(metrics_broker):
    """One process, two consumers of one topic: both read the first 20
    batches, then the first reads the next 20 and the second nothing. The
    producer's channel reports each under the token its consumer wrote into
    its segment, so `alkaid top --once --json` (the broker's ListTopics) and
    the metrics endpoint each show two different figures, each what its
    consumer read: lag 0 and 20, read bytes all of the topic's and half of
    them, held bodies 0 and the 20 unread. (Matched by pid, both would show
    their sum.)"""
    b = metrics_broker
    helper = subprocess.Popen([os.environ["ALKAID_TWO_CONSUMERS"], b.socket, "pair", "40", "20"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=b.env)
    pub = None
    try:
        wait_until(lambda: b.awaited_consumers("pair") == 2 or helper.poll() is not None,
                   "both consumers wait for 'pair'")
        pub = PipePublisher(b, "pair", SCHEMA, batch(0))
        for i in range(1, 20):
            pub.write(batch(i))
        assert helper.stdout.readline() == b"read 20 20\n", helper.stderr.read()
        for i in range(20, 40):
            pub.write(batch(i))
        helper.stdin.write(b"go\n")
        helper.stdin.flush()
        assert helper.stdout.readline() == b"read 40 20\n", helper.stderr.read()

        def top_pair() -> dict:
            r = b.tool("top", "--once", "--json", "--interval", "0.1")
            assert r.returncode == 0, r.stderr
            return next((t for t in json.loads(r.stdout)["topics"] if t["name"] == "pair"), {})

        # The topic's own figures (whatever the matching) say when a report
        # shows the end: 20 bodies held (the second's unread; the first
        # returned all 40), its slowest consumer 20 behind.
        def settled(t: dict) -> bool:
            return t.get("published") == 40 and t.get("held") == 20 and t.get("depth") == 20 and \
                len(t.get("consumer_list", [])) == 2 and all(c["reported"] for c in t["consumer_list"])
        wait_until(lambda: settled(top_pair()), "the producer reported the end")
        topic = top_pair()
        assert settled(topic)
        published_bytes = topic["published_bytes"]
        assert published_bytes >= 40 * 64 and published_bytes % 40 == 0  # equal bodies
        # Which attached first is not said: the one with no lag read all.
        everything, half = sorted(topic["consumer_list"], key=lambda c: c["lag"])
        assert everything["pid"] == half["pid"] == helper.pid and everything["id"] != half["id"]
        assert (everything["lag"], half["lag"]) == (0, 20)
        assert (everything["read_bytes"], half["read_bytes"]) == (published_bytes,
                                                                  published_bytes // 2)
        assert everything["held_blocks"] == 0 and everything["held_bytes"] == 0
        assert half["held_blocks"] == 20 == topic["held"] and half["held_bytes"] >= 20 * 64
        assert everything["drops"] == half["drops"] == 0

        text = get(b.metrics_url)
        key_all, key_half = (everything["id"], helper.pid), (half["id"], helper.pid)
        assert samples(text, "alkaid_consumer_lag_batches", "pair") == {key_all: 0, key_half: 20}
        assert samples(text, "alkaid_consumer_read_bytes_total", "pair") == {
            key_all: published_bytes, key_half: published_bytes // 2}
        assert samples(text, "alkaid_consumer_held_batches", "pair") == {key_all: 0, key_half: 20}
    finally:
        helper.stdin.close()
        helper.wait(timeout=60)
        if pub is not None:
            pub.close()
    assert helper.returncode == 0, helper.stderr.read()


def test_metrics_bad_input(tmp_path):
    from ops_support import BROKER_BIN
    def start(*args):
        return subprocess.run([BROKER_BIN, "--socket", str(tmp_path / "b.sock"), *args],
                              capture_output=True, timeout=60)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = start("--metrics", f"127.0.0.1:{port}")
        assert r.returncode == 1 and b"Address already in use" in r.stderr, r.stderr
        assert b"127.0.0.1:%d" % port in r.stderr
    r = start("--metrics", "0.0.0.0:9464")
    assert r.returncode == 2 and b"not a loopback address" in r.stderr, r.stderr
    for bad in ("9464", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:70000", "[::1]9464"):
        r = start("--metrics", bad)
        assert r.returncode == 2 and b"--metrics" in r.stderr, (bad, r.stderr)
    assert not (tmp_path / "b.sock").exists()
