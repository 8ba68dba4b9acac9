"""Both ways with the C++ tools over a real broker: a Python producer read
by `alkaid subscribe` (the C++ consumer), and `alkaid publish` (the C++
producer) read by a Python consumer."""

from __future__ import annotations

import subprocess

import pyarrow as pa
import pyarrow.ipc

import alkaid
from conftest import wait_until

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.utf8()), ("v", pa.list_(pa.float32()))])


def batches() -> list[pa.RecordBatch]:
    return [pa.record_batch([pa.array([i, i + 1]), pa.array([f"a{i}", None]),
                             pa.array([[1.0, 2.0], [float(i)]], pa.list_(pa.float32()))],
                            schema=SCHEMA) for i in range(0, 10, 2)]


def test_python_producer_cpp_consumer(broker, tmp_path):
    out = tmp_path / "received.arrows"
    cli = alkaid.binary_path("alkaid")
    # The C++ consumer waits for the topic (--timeout also bounds that wait),
    # so it gets every batch from the first.
    sub = subprocess.Popen([cli, "subscribe", "py2cpp", "--socket", broker.socket,
                            "--out", str(out), "--timeout", "30"])
    try:
        wait_until(lambda: "py2cpp" in alkaid.awaited_topics(broker.socket),
                   "alkaid subscribe waiting for the topic")
        with alkaid.Producer("py2cpp", SCHEMA, socket=broker.socket) as producer:
            for b in batches():
                producer.publish(b)
        assert sub.wait(timeout=60) == 0
    finally:
        if sub.poll() is None:
            sub.kill()
    with pa.ipc.open_stream(out) as reader:
        got = reader.read_all()
    assert got.equals(pa.Table.from_batches(batches()))


def test_cpp_producer_python_consumer(broker, tmp_path):
    source = tmp_path / "source.arrows"
    with pa.ipc.new_stream(source, SCHEMA) as writer:
        for b in batches():
            writer.write_batch(b)
    cli = alkaid.binary_path("alkaid")
    received = []
    import threading

    def consume() -> None:
        with alkaid.Consumer("cpp2py", socket=broker.socket, wait_for_topic=30) as consumer:
            received.extend(b.to_pyarrow() for b in consumer)

    t = threading.Thread(target=consume)
    t.start()
    wait_until(lambda: "cpp2py" in alkaid.awaited_topics(broker.socket),
               "the Python consumer waiting for the topic")
    pub = subprocess.run([cli, "publish", "cpp2py", str(source), "--socket", broker.socket],
                         capture_output=True, text=True, timeout=60)
    assert pub.returncode == 0, pub.stderr
    t.join()
    assert pa.Table.from_batches(received).equals(pa.Table.from_batches(batches()))
