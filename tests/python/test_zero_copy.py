"""pyarrow, polars and DuckDB read received batches where they lie, in the
producer's shared memory, and the loan API publishes numpy writes without a
copy."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import alkaid
from conftest import in_mappings, shm_location, shm_mappings

SCHEMA = pa.schema([("id", pa.int64()), ("price", pa.float64()), ("name", pa.utf8())])


def make_batch(first: int, rows: int) -> pa.RecordBatch:
    ids = np.arange(first, first + rows, dtype=np.int64)
    return pa.record_batch([pa.array(ids), pa.array(ids * 0.5), pa.array([f"n{i}" for i in ids])],
                           schema=SCHEMA)


def arrow_buffer_addresses(rb: pa.RecordBatch) -> set[int]:
    return {b.address for col in rb.columns for b in col.buffers() if b is not None and b.size > 0}


@pytest.fixture
def topic(broker):
    producer = alkaid.Producer("z", SCHEMA, socket=broker.socket)
    consumer = alkaid.Consumer("z", socket=broker.socket)
    yield broker, producer, consumer
    consumer.close()
    producer.close()


def test_pyarrow_reads_the_shared_buffers(topic):
    broker, producer, consumer = topic
    producer.publish(make_batch(0, 1000))
    batch = consumer.next(timeout=10)
    rb = pa.record_batch(batch)
    assert rb.equals(make_batch(0, 1000))
    ours = {address for address, _ in batch.buffer_addresses()}
    assert arrow_buffer_addresses(rb) == ours
    mappings = shm_mappings(broker.name + ".")
    for col in rb.columns:
        for b in col.buffers():
            if b is not None and b.size > 0:
                assert in_mappings(b.address, b.size, mappings)


def test_polars_reads_the_shared_buffers(topic):
    pl = pytest.importorskip("polars")
    broker, producer, consumer = topic
    producer.publish(make_batch(10, 500))
    batch = consumer.next(timeout=10)
    df = pl.DataFrame(batch)
    assert df.shape == (500, 3)
    assert df["id"].to_list() == list(range(10, 510))
    # Fixed-width columns without nulls: polars' own memory is the shared buffer.
    ids = df["id"].to_numpy(allow_copy=False)
    prices = df["price"].to_numpy(allow_copy=False)
    addresses = [a for a, _ in batch.buffer_addresses()]
    assert ids.__array_interface__["data"][0] in addresses
    assert prices.__array_interface__["data"][0] in addresses
    mappings = shm_mappings(broker.name + ".")
    assert in_mappings(ids.__array_interface__["data"][0], ids.nbytes, mappings)


def test_duckdb_scans_a_batch_and_the_consumer(topic):
    duckdb = pytest.importorskip("duckdb")
    broker, producer, consumer = topic
    for first in (0, 100, 200):
        producer.publish(make_batch(first, 100))
    batch = consumer.next(timeout=10)  # noqa: F841 (scanned by name below)
    assert duckdb.sql("SELECT count(*), sum(id) FROM batch").fetchone() == (100, sum(range(100)))
    producer.close()
    # The rest of the topic, to its end, as one Arrow stream.
    stream = consumer  # noqa: F841
    assert duckdb.sql("SELECT count(*), min(id), max(id) FROM stream").fetchone() == (200, 100, 299)


def test_consumer_is_an_arrow_stream(topic):
    broker, producer, consumer = topic
    for first in range(0, 300, 100):
        producer.publish(make_batch(first, 100))
    producer.close()
    table = pa.RecordBatchReader.from_stream(consumer).read_all()
    assert table.num_rows == 300
    assert table.column("id").to_pylist() == list(range(300))


def test_consumer_stream_into_polars(topic):
    pl = pytest.importorskip("polars")
    broker, producer, consumer = topic
    for first in range(0, 200, 100):
        producer.publish(make_batch(first, 100))
    producer.close()
    df = pl.DataFrame(consumer)
    assert df["id"].to_list() == list(range(200))


def test_loan_publishes_numpy_writes_without_a_copy(broker):
    schema = pa.schema([("t", pa.timestamp("ns")), ("v", pa.float32()), ("k", pa.uint16())])
    with alkaid.Producer("loan", schema, socket=broker.socket) as producer, \
            alkaid.Consumer("loan", socket=broker.socket) as consumer:
        loan = producer.loan(64)
        t, v, k = loan["t"], loan["v"], loan[2]
        assert t.dtype == np.int64 and v.dtype == np.float32 and k.dtype == np.uint16
        assert t.flags.writeable
        t[:] = np.arange(64) * 1000
        v[:] = 1.5
        k[:] = np.arange(64)
        written_at = t.__array_interface__["data"][0]
        loan.publish()
        assert not t.flags.writeable  # what consumers read can no longer change from here
        batch = consumer.next(timeout=10)
        # Zero copies: the consumer reads the very bytes numpy wrote (the
        # same place of the same segment, mapped twice in this process).
        assert shm_location(batch.buffer_addresses()[0][0]) == shm_location(written_at)
        rb = batch.to_pyarrow()
        assert rb.column("t").cast(pa.int64()).to_pylist() == list(range(0, 64000, 1000))
        assert rb.column("v").to_pylist() == [1.5] * 64
        stats = producer.stats()
        assert stats["copied_bytes"] == 0 and stats["published"] == 1
        with pytest.raises(alkaid.InvalidError, match="already published"):
            loan.publish()


def test_loan_views_hold_the_loan_and_turn_read_only(broker):
    """A column view keeps its loan, and so its shared region, alive: after
    the loan object is gone and many batches went through the same arena, it
    still shows what was published, and refuses writes."""
    import gc

    schema = pa.schema([("a", pa.int32()), ("b", pa.float64())])
    with alkaid.Producer("views", schema, socket=broker.socket, slot_count=4,
                         arena_bytes=1 << 16) as producer, \
            alkaid.Consumer("views", socket=broker.socket) as consumer:
        loan = producer.loan(100)
        a, b = loan["a"], loan[1]
        assert a.base is loan and b.base is loan
        a[:] = np.arange(100, dtype=np.int32)
        b[:] = 0.25
        loan.publish()
        del loan
        gc.collect()
        consumer.next(timeout=10)
        for i in range(200):  # the arena (64 KiB) turns over many times
            with producer.loan(100) as other:
                other["a"][:] = -i
                other["b"][:] = -1.0
            consumer.next(timeout=10)
        assert a.tolist() == list(range(100)) and b.tolist() == [0.25] * 100
        assert not a.flags.writeable and not b.flags.writeable
        with pytest.raises(ValueError):
            a[0] = 7


def test_repeated_loans_are_zeroed_hold_their_views_and_give_back_their_memory(broker):
    """Loans of a row count asked for again go through one of the producer's
    fixed-shape writers, whose regions come back holding earlier batches:
    each loan still starts zeroed, a view kept past its loan's publish still
    shows what was published while the arena turns over, and loans dropped
    unpublished give their memory back (a small arena would run out)."""
    import gc

    schema = pa.schema([("a", pa.int32()), ("b", pa.float64()), ("c", pa.uint8())])
    with alkaid.Producer("writers", schema, socket=broker.socket, slot_count=4,
                         arena_bytes=1 << 16) as producer, \
            alkaid.Consumer("writers", socket=broker.socket) as consumer:
        for i in range(20):
            with producer.loan(100) as loan:
                assert loan["a"].tolist() == [0] * 100 and loan["b"].tolist() == [0.0] * 100
                loan["a"][:] = -1 - i
                loan["b"][:] = -1.0
            got = consumer.next(timeout=10).to_pyarrow()
            assert got.column("a").to_pylist() == [-1 - i] * 100
        kept = producer.loan(100)
        a = kept["a"]
        a[:] = np.arange(100, dtype=np.int32)
        kept.publish()
        del kept
        gc.collect()
        assert consumer.next(timeout=10).to_pyarrow().column("a").to_pylist() == list(range(100))
        for i in range(200):  # the arena (64 KiB) turns over many times
            with producer.loan(100) as other:
                other["a"][:] = -i
            consumer.next(timeout=10)
            producer.loan(100)  # dropped unpublished: its memory goes back
            gc.collect()
        assert a.tolist() == list(range(100)) and not a.flags.writeable
        assert producer.stats()["copied_bytes"] == 0


def test_publish_numpy_and_loan_context_manager(broker):
    schema = pa.schema([("a", pa.int32()), ("b", pa.float64())])
    with alkaid.Producer("np", schema, socket=broker.socket) as producer, \
            alkaid.Consumer("np", socket=broker.socket) as consumer:
        producer.publish_numpy({"a": np.arange(5, dtype=np.int32), "b": np.ones(5)})
        with producer.loan(3) as loan:
            loan["a"][:] = [7, 8, 9]
        assert consumer.next(timeout=10).to_pyarrow().column("a").to_pylist() == [0, 1, 2, 3, 4]
        assert consumer.next(timeout=10).to_pyarrow().column("a").to_pylist() == [7, 8, 9]
        with pytest.raises(alkaid.InvalidError, match="missing"):
            producer.publish_numpy({"a": np.arange(5, dtype=np.int32)})
        with pytest.raises(TypeError):  # float into int32 is not a same-kind cast
            producer.publish_numpy([np.ones(2), np.ones(2)])


def test_loan_refuses_columns_without_a_numpy_view(topic):
    broker, producer, consumer = topic
    with pytest.raises(alkaid.InvalidError, match="column 'name' has type string"):
        producer.loan(10)


LIVE_READER = r'''
import sys, threading, time
import pyarrow as pa
import alkaid
reader, socket = sys.argv[1], sys.argv[2]
schema = pa.schema([("x", pa.int64())])
with alkaid.Producer("live", schema, socket=socket) as producer:
    consumer = alkaid.Consumer("live", socket=socket)

    def feed():
        for i in range(5):
            time.sleep(0.06)  # the reader waits for each batch (more than one 50 ms slice)
            producer.publish(pa.record_batch([pa.array([i])], schema=schema))
        producer.close()

    feeder = threading.Thread(target=feed)
    feeder.start()
    if reader == "pyarrow":
        got = pa.RecordBatchReader.from_stream(consumer).read_all().column("x").to_pylist()
    elif reader == "polars":
        import polars as pl
        got = pl.DataFrame(consumer)["x"].to_list()
    else:
        import duckdb
        got = [r[0] for r in duckdb.sql("SELECT x FROM consumer ORDER BY x").fetchall()]
    feeder.join()
    consumer.close()
print(got)
'''


@pytest.mark.parametrize("reader", ["pyarrow", "polars", "duckdb"])
def test_consumer_stream_while_this_process_publishes(broker, reader):
    """A reader that holds the GIL while it pulls the consumer's stream
    (polars does) must not starve a producer thread of the same process: the
    stream waits with the GIL released. Run in a child so that a deadlock is
    a failure, not a hang."""
    import subprocess
    import sys

    child = subprocess.run([sys.executable, "-c", LIVE_READER, reader, broker.socket],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "[0, 1, 2, 3, 4]"
