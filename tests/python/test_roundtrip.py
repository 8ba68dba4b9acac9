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
