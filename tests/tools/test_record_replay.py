"""alkaid record / replay against a real broker, read back by pyarrow, polars
and DuckDB (docs/BROKER.md, "Recording and replaying")."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pytest

from ops_support import (PipePublisher, broker, read_file_batches,  # noqa: F401 (fixture)
                         read_stream_batches, wait_until)

SCHEMA = pa.schema([("producer", pa.int32()), ("i", pa.int64()), ("s", pa.string())])
EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"  # a complete stream ends with it
RECORD_KEYS = {"alkaid.receive_time_ns", "alkaid.producer_id", "alkaid.producer_pid",
               "alkaid.sequence", "alkaid.lost_before"}


def make_batch(producer: int, i: int, rows: int = 4) -> pa.RecordBatch:
    return pa.record_batch([pa.array([producer] * rows, pa.int32()),
                            pa.array([i * 100 + r for r in range(rows)], pa.int64()),
                            pa.array([f"p{producer}-{i}-" + "x" * (i % 7)] * rows)],
                           schema=SCHEMA)


def start_recorder(broker, topics: list[str], out: Path, *extra: str) -> subprocess.Popen:
    proc = broker.spawn("record", *topics, "--out", out if isinstance(out, str) else str(out),
                        *extra)
    # Registered as waiting for the topics: it gets every batch from the first.
    wait_until(lambda: all(broker.awaited_consumers(t) >= 1 or
                           (broker.topic(t) or {}).get("consumers", 0) >= 1 for t in topics)
               or proc.poll() is not None, "the recorder waits for its topics")
    assert proc.poll() is None, proc.communicate()
    return proc


def attached_producers(broker, topic: str, n: int) -> None:
    wait_until(lambda: (broker.topic(topic) or {}).get("producers", 0) >= n,
               f"{n} producers attached to {topic}")


def finish(proc: subprocess.Popen, code: int = 0) -> str:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err.decode()
    return err.decode()


def test_record_multi_producer_then_replay_in_order(broker, tmp_path):
    rec = tmp_path / "rec.arrows"
    recorder = start_recorder(broker, ["live"], rec)
    sent = {p: [make_batch(p, 0)] for p in range(2)}
    pubs = [PipePublisher(broker, "live", SCHEMA, sent[p][0]) for p in range(2)]
    attached_producers(broker, "live", 2)
    for i in range(1, 40):
        for p, pub in enumerate(pubs):
            b = make_batch(p, i)
            pub.write(b)
            sent[p].append(b)
        time.sleep(0.01)  # a recording with a span to pace the replay by
    for pub in pubs:
        pub.close()
    finish(recorder)  # the topic's end ends the recording
    assert not list(tmp_path.glob("*.partial"))
    assert rec.read_bytes().endswith(EOS)

    recorded = read_stream_batches(rec)
    assert len(recorded) == 80
    # Per producer: every batch, in publish order, its sequence counting up.
    by_pid: dict[str, list] = {}
    for batch, md in recorded:
        assert RECORD_KEYS <= md.keys(), md
        assert md["alkaid.lost_before"] == "0"
        by_pid.setdefault(md["alkaid.producer_pid"], []).append((batch, md))
    assert len(by_pid) == 2
    for items in by_pid.values():
        producer = items[0][0].column("producer")[0].as_py()
        assert [b.equals(s) for (b, _), s in zip(items, sent[producer])] == [True] * 40
        seqs = [int(md["alkaid.sequence"]) for _, md in items]
        assert seqs == sorted(seqs) and len(set(seqs)) == 40
        assert len({md["alkaid.producer_id"] for _, md in items}) == 1
    times = [int(md["alkaid.receive_time_ns"]) for _, md in recorded]
    assert times == sorted(times)
    span = (times[-1] - times[0]) / 1e9

    # Replay at twice the recorded pace into another topic: a consumer gets
    # the recorded batches, value-equal and in recorded order, without the
    # recorder's metadata.
    sub = broker.spawn("subscribe", "again", "--out", str(tmp_path / "again.arrows"))
    wait_until(lambda: broker.awaited_consumers("again") >= 1, "subscriber waits")
    start = time.monotonic()
    replay = broker.tool("replay", str(rec), "again", "--speed", "2")
    took = time.monotonic() - start
    assert replay.returncode == 0, replay.stderr
    finish(sub)
    again = read_stream_batches(tmp_path / "again.arrows")
    assert len(again) == 80
    for (b, md), (r, _) in zip(again, recorded):
        assert b.equals(r)
        assert not (RECORD_KEYS & md.keys())
    # The pace is kept: replay cannot end before half the recorded span has
    # passed (a lower bound, whatever the machine's load).
    assert took >= span / 2

    # Read as they are by polars and DuckDB too.
    import duckdb
    import polars
    df = polars.read_ipc_stream(rec)
    assert df.shape == (320, 3)
    # DuckDB 1.5 has no Arrow IPC reader of its own (the `arrow` community
    # extension is not installable offline): it scans pyarrow's reader.
    reader = pa.ipc.open_stream(str(rec))  # noqa: F841 (named in the query)
    assert duckdb.sql("select count(*), sum(i) from reader").fetchone() == (
        320, sum(b.column("i").to_pylist()[r] for b, _ in recorded for r in range(4)))


@pytest.mark.parametrize("fmt", ["stream", "file"])
def test_rotation_closes_each_file_cleanly(broker, tmp_path, fmt):
    out = tmp_path / "dir"
    recorder = start_recorder(broker, ["rot"], f"{out}/", "--rotate-bytes", "3000", "--format", fmt)
    sent = [make_batch(0, i, rows=16) for i in range(30)]
    pub = PipePublisher(broker, "rot", SCHEMA, sent[0])
    for b in sent[1:]:
        pub.write(b)
    pub.close()
    finish(recorder)
    ext = ".arrows" if fmt == "stream" else ".arrow"
    files = sorted(out.iterdir())
    assert len(files) > 3 and all(f.name.endswith(ext) for f in files), files
    assert [f.name for f in files] == [f"rot.{k:06d}{ext}" for k in range(len(files))]
    got = []
    for k, f in enumerate(files):
        batches = read_file_batches(f) if fmt == "file" else read_stream_batches(f)
        if fmt == "stream":
            assert pa.ipc.open_stream(str(f)).read_all().num_rows == 16 * len(batches)
            assert f.read_bytes().endswith(EOS)
        got += [b for b, _ in batches]
        if k < len(files) - 1:
            assert f.stat().st_size >= 3000  # closed once past the size
    assert len(got) == 30 and all(a.equals(b) for a, b in zip(got, sent))
    # Replayed as fast as possible from every file, in order.
    sub = broker.spawn("subscribe", "rot2", "--out", str(tmp_path / "rot2.arrows"))
    wait_until(lambda: broker.awaited_consumers("rot2") >= 1, "subscriber waits")
    r = broker.tool("replay", *map(str, files), "rot2", "--as-fast-as-possible")
    assert r.returncode == 0, r.stderr
    finish(sub)
    assert [b for b, _ in read_stream_batches(tmp_path / "rot2.arrows")] == got


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("fmt", ["stream", "file"])
def test_signal_ends_the_current_file_valid(broker, tmp_path, sig, fmt):
    out = tmp_path / ("rec.arrow" if fmt == "file" else "rec.arrows")
    recorder = start_recorder(broker, ["sig"], out, "--format", fmt)
    pub = PipePublisher(broker, "sig", SCHEMA, make_batch(0, 0))
    for i in range(1, 10):
        pub.write(make_batch(0, i))
    partial = Path(str(out) + ".partial")
    # The stream part of the unfinished file (past an ARROW1 file's 8-byte
    # magic) holds the ten batches: they were recorded.
    skip = 8 if fmt == "file" else 0

    def partial_batches() -> int:
        data = partial.read_bytes()[skip:]
        try:
            return len(read_stream_batches_bytes(data))
        except pa.ArrowInvalid:
            return 0
    wait_until(lambda: partial.exists() and partial_batches() == 10, "ten batches recorded")
    recorder.send_signal(sig)
    finish(recorder)
    pub.close()
    assert not partial.exists()
    if fmt == "stream":
        assert out.read_bytes().endswith(EOS)
    batches = read_file_batches(out) if fmt == "file" else read_stream_batches(out)
    assert [b.equals(make_batch(0, i)) for i, (b, _) in enumerate(batches)] == [True] * 10


def read_stream_batches_bytes(data: bytes) -> list:
    """The whole batches of a stream cut anywhere: none if it was cut before
    the end of its schema (a file the recorder has just begun)."""
    try:
        reader = pa.ipc.open_stream(pa.BufferReader(data))
    except (pa.ArrowInvalid, OSError):
        return []
    out = []
    while True:
        try:
            out.append(reader.read_next_batch())
        except StopIteration:
            return out
        except (pa.ArrowInvalid, OSError):
            return out


def frozen(proc: subprocess.Popen) -> None:
    """Stops `proc` (SIGSTOP) and returns once each of its threads is stopped:
    its files stay as they are (a rename or a write in progress finished
    first) until SIGCONT, or SIGKILL leaves them so."""
    proc.send_signal(signal.SIGSTOP)
    tasks = Path(f"/proc/{proc.pid}/task")

    def all_stopped() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"the recorder exited with {proc.returncode}: {proc.communicate()}")
        states = []
        for task in tasks.iterdir():
            try:  # the state follows the parenthesised command name
                states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:
                continue  # a thread that exited meanwhile
        return all(s in "tT" for s in states)
    wait_until(all_stopped, f"every thread of {proc.pid} stopped")


@pytest.mark.parametrize("fmt", ["stream", "file"])
def test_sigkill_leaves_completed_files_valid_and_the_current_readable(broker, tmp_path, fmt):
    out = tmp_path / "dir"
    recorder = start_recorder(broker, ["kill"], f"{out}/", "--rotate-bytes", "2000", "--format", fmt)
    sent = [make_batch(0, 0, rows=16)]
    pub = PipePublisher(broker, "kill", SCHEMA, sent[0])
    ext = ".arrows" if fmt == "stream" else ".arrow"
    skip = 8 if fmt == "file" else 0  # an ARROW1 file's stream starts past its magic

    # The directory as SIGKILL would leave it: (complete files, their
    # batches, the partial's). The recorder renames a file when it completes
    # it, so the files are only looked at while it is stopped.
    def recorded_stopped() -> tuple[int, int, int]:
        frozen(recorder)
        complete = sorted(out.glob("*" + ext))
        n = sum(len(read_file_batches(f) if fmt == "file" else read_stream_batches(f))
                for f in complete)
        partial = sorted(out.glob("*.partial"))
        tail = len(read_stream_batches_bytes(partial[0].read_bytes()[skip:])) if partial else 0
        return len(complete), n, tail

    state = (0, 0, 0)

    def all_recorded() -> bool:  # if so, the recorder stays stopped
        nonlocal state
        state = recorded_stopped()
        if sum(state[1:]) == len(sent):
            return True
        recorder.send_signal(signal.SIGCONT)
        return False

    # Each batch recorded before the next is sent, until the recorder,
    # stopped, has two complete files and a third that holds a batch.
    while True:
        wait_until(all_recorded, f"{len(sent)} batches recorded")
        files, _, tail = state
        if files >= 2 and tail >= 1:
            break
        recorder.send_signal(signal.SIGCONT)
        assert len(sent) < 500
        sent.append(make_batch(0, len(sent), rows=16))
        pub.write(sent[-1])
    recorder.send_signal(signal.SIGKILL)
    recorder.communicate(timeout=60)
    pub.close()
    complete = sorted(out.glob("*" + ext))
    partial = sorted(out.glob("*.partial"))
    assert len(partial) == 1
    got = []
    for f in complete:
        got += [b for b, _ in (read_file_batches(f) if fmt == "file" else read_stream_batches(f))]
    data = partial[0].read_bytes()[8 if fmt == "file" else 0:]
    tail = read_stream_batches_bytes(data)
    assert tail
    # A write torn inside a batch: the whole batches before it still read.
    torn = read_stream_batches_bytes(data[:-5])
    assert len(torn) >= len(tail) - 1
    got += tail
    # The stopped recorder had every batch sent on disk: SIGKILL lost none.
    assert len(got) == len(sent) and all(a.equals(b) for a, b in zip(got, sent))


def test_full_disk_is_a_clear_error_with_completed_files_intact(broker, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    disk = tmp_path / "small"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        recorder = start_recorder(broker, ["full"], f"{disk}/d/", "--rotate-bytes", "8000")
        pub = PipePublisher(broker, "full", SCHEMA, make_batch(0, 0, rows=64))
        for i in range(1, 200):
            pub.write(make_batch(0, i, rows=64))
            if recorder.poll() is not None:
                break
        pub.close()
        err = finish(recorder, 2)
        assert "No space left on device" in err and ".partial" in err, err
        complete = sorted((disk / "d").glob("*.arrows"))
        assert len(complete) >= 2
        n = 0
        for f in complete:
            batches = read_stream_batches(f)
            assert pa.ipc.open_stream(str(f)).read_all().num_rows == 64 * len(batches)
            n += len(batches)
        assert [p.name for p in (disk / "d").glob("*.partial")]
    finally:
        subprocess.run(["umount", str(disk)])


def test_bad_input(broker, tmp_path):
    # Not Arrow IPC: a clear error naming the file, nothing published.
    junk = tmp_path / "junk.arrows"
    junk.write_bytes(b"this is not arrow at all, not even close\n" * 4)
    r = broker.tool("replay", str(junk), "t")
    assert r.returncode == 1 and str(junk) in r.stderr.decode(), r.stderr
    assert broker.topic("t") is None
    # A recording whose schema differs from the existing topic's.
    z = pa.schema([("z", pa.float64())])
    pub = PipePublisher(broker, "other", z, pa.record_batch([pa.array([1.0])], schema=z))
    attached_producers(broker, "other", 1)
    good = tmp_path / "good.arrows"
    with pa.OSFile(str(good), "wb") as f, pa.ipc.new_stream(f, SCHEMA) as w:
        w.write_batch(make_batch(0, 0))
    r = broker.tool("replay", str(good), "other")
    assert r.returncode != 0 and b"schema" in r.stderr, r.stderr
    pub.close()
    # Recordings of different schemas in one replay.
    other = tmp_path / "other.arrows"
    with pa.OSFile(str(other), "wb") as f, pa.ipc.new_stream(f, pa.schema([("z", pa.int8())])):
        pass
    r = broker.tool("replay", str(good), str(other), "t2")
    assert r.returncode == 1 and str(other) in r.stderr.decode(), r.stderr
    # An output directory that cannot be made.
    r = broker.tool("record", "t", "u", "--out", str(tmp_path / "no" / "such" / "dir"))
    assert r.returncode == 2 and b"cannot create output directory" in r.stderr, r.stderr
    # A topic that is not created in time: said, naming it.
    r = broker.tool("record", "never", "--out", str(tmp_path / "n.arrows"), "--timeout", "0.2")
    assert r.returncode == 1 and b"'never'" in r.stderr, r.stderr
    # A recording is not overwritten.
    r = broker.tool("record", "other", "--out", str(good), "--timeout", "0.2")
    assert r.returncode != 0 and b"does not overwrite" in r.stderr, r.stderr
    assert read_stream_batches(good)[0][0].equals(make_batch(0, 0))
    # Usage errors: exit 2.
    assert broker.tool("replay", str(good)).returncode == 2
    assert broker.tool("replay", str(good), "t", "--speed", "0").returncode == 2
    assert broker.tool("record", "t", "--out", "x", "--format", "csv").returncode == 2


def test_publish_times_recorded_where_the_topic_stamps_them(broker, tmp_path):
    """A topic created with `publish --timestamps` gets each batch's publish
    time in alkaid.publish_time_ns, between the test's clock read before it
    handed the batch to the publisher and the recorder's receive time; a
    topic without has no such key."""
    recorders = {t: start_recorder(broker, [t], tmp_path / f"{t}.arrows")
                 for t in ("stamped", "plain")}
    written: dict[str, list[int]] = {}
    for topic, extra in (("stamped", ("--timestamps",)), ("plain", ())):
        written[topic] = [time.time_ns()]
        pub = PipePublisher(broker, topic, SCHEMA, make_batch(0, 0), extra)
        for i in range(1, 10):
            written[topic].append(time.time_ns())
            pub.write(make_batch(0, i))
        pub.close()
    assert broker.topic("stamped")["publish_timestamps"] is True
    assert broker.topic("plain")["publish_timestamps"] is False
    for topic, recorder in recorders.items():
        finish(recorder)
        recorded = read_stream_batches(tmp_path / f"{topic}.arrows")
        assert len(recorded) == 10
        for (batch, md), before in zip(recorded, written[topic]):
            assert RECORD_KEYS <= md.keys(), md
            if topic == "stamped":
                publish_ns = int(md["alkaid.publish_time_ns"])
                assert before <= publish_ns <= int(md["alkaid.receive_time_ns"]), md
            else:
                assert "alkaid.publish_time_ns" not in md, md
