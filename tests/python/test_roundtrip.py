"""Every gold case's data through a topic, Python to Python, and the
received batches' buffers in shared memory."""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.ipc
import pytest

import alkaid
from conftest import GOLD_DIR, in_mappings, shm_mappings


def gold_cases() -> list[str]:
    return sorted(p.name[len("generated_"):-len(".stream")] for p in GOLD_DIR.glob("generated_*.stream"))


@pytest.mark.parametrize("case", gold_cases())
def test_gold_case_round_trips(broker, case):
    with pa.ipc.open_stream(GOLD_DIR / f"generated_{case}.stream") as reader:
        schema = reader.schema
        batches = list(reader)
    with alkaid.Producer(case, schema, socket=broker.socket) as producer:
        with alkaid.Consumer(case, socket=broker.socket) as consumer:
            assert consumer.schema.to_pyarrow().equals(schema)
            for batch in batches:
                assert producer.publish(batch) == 1
            received = [consumer.next(timeout=10) for _ in batches]
            mappings = shm_mappings(broker.name + ".")
            for sent, got in zip(batches, received):
                assert got.num_rows == sent.num_rows
                as_arrow = got.to_pyarrow()
                assert as_arrow.equals(sent), f"{case}: {as_arrow} != {sent}"
                for address, size in got.buffer_addresses():
                    assert in_mappings(address, size, mappings), (
                        f"{case}: buffer at {address:#x} ({size} bytes) outside /dev/shm mappings")
            producer.close()
            with pytest.raises(StopIteration):
                consumer.next(timeout=10)


def _fixed(first: int, rows: int, schema: pa.Schema) -> pa.RecordBatch:
    return pa.record_batch(
        [pa.array([(first + i) * (k + 1) for i in range(rows)], f.type) for k, f in enumerate(schema)],
        schema=schema)


def test_batches_of_one_layout_round_trip(broker):
    """A batch laid out as the one before it (the same row count,
    fixed-width columns without nulls) is copied straight into a region
    (PublishSameLayout); every other goes through the import. Row counts
    that change and stay (new writers, past the limit of eight), that
    alternate, slices, nulls and a batch received before the next ones are
    published: each must arrive as sent, and each counts as an Arrow copy."""
    schema = pa.schema([("a", pa.int64()), ("b", pa.float32()), ("c", pa.uint16()),
                        ("t", pa.timestamp("us"))])
    sent = [_fixed(i, rows, schema) for i, rows in enumerate((64, 64, 64, 3, 3, 3))]
    big = _fixed(400, 70, schema)
    sent += [big.slice(3, 64), big.slice(5, 64), big.slice(6, 64)]  # offsets into the children
    with_nulls = pa.record_batch([pa.array([1, None] * 32, pa.int64()), pa.array([1.0] * 64, pa.float32()),
                                  pa.array([2] * 64, pa.uint16()), pa.array([3] * 64, pa.timestamp("us"))],
                                 schema=schema)
    sent += [with_nulls, with_nulls, _fixed(600, 64, schema)]
    sent += [_fixed(300 + i, 5 if i % 2 else 6, schema) for i in range(6)]  # alternating
    for rows in range(1, 12):  # eleven layouts, each twice: more writers than allowed
        sent += [_fixed(100 + rows, rows, schema), _fixed(200 + rows, rows, schema)]
    sent += [_fixed(700, 64, schema), _fixed(701, 64, schema)]
    with alkaid.Producer("same", schema, socket=broker.socket, slot_count=64) as producer, \
            alkaid.Consumer("same", socket=broker.socket) as consumer:
        first = None
        for i, batch in enumerate(sent):
            producer.publish(batch)
            got = consumer.next(timeout=10)
            if first is None:
                first = got  # held while every later batch is written
            assert got.to_pyarrow().equals(batch), f"batch {i}: {got.to_pyarrow()} != {batch}"
        assert first.to_pyarrow().equals(sent[0])
        stats = producer.stats()
        assert stats["published"] == len(sent) and stats["arrow_copied"] == len(sent)
        assert stats["copied_bytes"] > 0


def test_table_and_reader_publish_every_batch(broker):
    table = pa.table({"x": pa.array(range(100), pa.int64())}).to_batches(max_chunksize=30)
    table = pa.Table.from_batches(table)
    with alkaid.Producer("t", table.schema, socket=broker.socket) as producer, \
            alkaid.Consumer("t", socket=broker.socket) as consumer:
        assert producer.publish(table) == 4
        assert producer.publish(pa.RecordBatchReader.from_batches(table.schema, table.to_batches())) == 4
        got = [consumer.next(timeout=10) for _ in range(8)]
        assert [b.num_rows for b in got] == [30, 30, 30, 10] * 2
        assert pa.Table.from_batches([b.to_pyarrow() for b in got[:4]]).equals(table)
        stats = producer.stats()
        assert stats["published"] == 8 and stats["arrow_copied"] == 8


def test_a_topic_without_producers_is_removed(broker):
    schema = pa.schema([("x", pa.int64())])
    with pytest.raises(alkaid.NotFoundError, match="no topic 'gone'"):
        alkaid.remove_topic("gone", broker.socket)
    with alkaid.Producer("gone", schema, socket=broker.socket):
        with pytest.raises(alkaid.InvalidError, match="has 1 producer"):
            alkaid.remove_topic("gone", broker.socket)
    with alkaid.Consumer("gone", socket=broker.socket) as consumer:
        alkaid.remove_topic("gone", socket=broker.socket)
        assert "gone" not in [t.name for t in alkaid.topics(broker.socket)]
        with pytest.raises(StopIteration, match="the topic was removed by pid"):
            consumer.next(timeout=30)
    other = pa.schema([("name", pa.utf8())])
    with alkaid.Producer("gone", other, socket=broker.socket):
        (info,) = [t for t in alkaid.topics(broker.socket) if t.name == "gone"]
        assert info.schema.to_pyarrow().equals(other)


def test_topics_name_the_kind_under_both_keys(broker):
    schema = pa.schema([("x", pa.int64())])
    with alkaid.Producer("kinds", schema, socket=broker.socket):
        (info,) = [t for t in alkaid.topics(broker.socket) if t.name == "kinds"]
        assert info.kind == "record-batch"
        assert info["payload_kind"] == info.kind


def test_publish_ns_on_topics_created_with_publish_timestamps(broker):
    """Batch.publish_ns: the producer's publish time, between the clock read
    before publish() and the one after the batch was received (next() and
    try_next()); 0 on a topic created without publish_timestamps."""
    schema = pa.schema([("x", pa.int64())])
    batch = pa.record_batch([pa.array([1, 2, 3], pa.int64())], schema=schema)
    for stamped in (True, False):
        topic = "stamped" if stamped else "plain"
        with alkaid.Producer(topic, schema, socket=broker.socket,
                             publish_timestamps=stamped) as producer, \
                alkaid.Consumer(topic, socket=broker.socket) as consumer:
            for receive in (lambda: consumer.next(timeout=10), consumer.try_next):
                before = time.time_ns()
                producer.publish(batch)
                got = receive()
                after = time.time_ns()
                assert got is not None and got.num_rows == 3
                if stamped:
                    assert before <= got.publish_ns <= after
                else:
                    assert got.publish_ns == 0
            [info] = [t for t in broker.topics() if t["name"] == topic]
            assert info.publish_timestamps is stamped


def test_fixed_blocks_carry_loans_and_bad_counts_are_refused(broker):
    """Producer(fixed_block_bytes=...): the broker grants them (the
    properties say what the channel has), loans of 64 int64 rows (512 bytes,
    one block) arrive with their values, and a count without bytes is refused
    before the broker is asked."""
    schema = pa.schema([pa.field("x", pa.int64(), nullable=False)])
    with alkaid.Producer("fixed", schema, socket=broker.socket, fixed_block_bytes=500,
                         fixed_block_count=16) as producer, \
            alkaid.Consumer("fixed", socket=broker.socket) as consumer:
        assert (producer.fixed_block_bytes, producer.fixed_block_count) == (512, 16)
        for n in range(40):
            loan = producer.loan(64)
            loan["x"][:] = range(n * 100, n * 100 + 64)
            loan.publish()
            got = consumer.next(timeout=10).to_pyarrow()
            assert got.column(0).to_pylist() == list(range(n * 100, n * 100 + 64))
    with alkaid.Producer("plain", schema, socket=broker.socket) as plain:
        assert (plain.fixed_block_bytes, plain.fixed_block_count) == (0, 0)
    with pytest.raises(alkaid.InvalidError, match="fixed_block_count 8 without fixed_block_bytes"):
        alkaid.Producer("bad", schema, socket=broker.socket, fixed_block_count=8)
