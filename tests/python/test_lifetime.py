"""When the producer's blocks come back: batches outliving the consumer,
held by pyarrow after the alkaid object is gone, released on another
thread. ProducerStats.held_by_consumers (Producer.stats()['held_by_consumers'])
counts the bodies consumers, and whatever they exported to, still hold."""

from __future__ import annotations

import gc
import threading

import pyarrow as pa

import alkaid
from conftest import wait_until

SCHEMA = pa.schema([("x", pa.int64())])


def batch(first: int, rows: int = 10) -> pa.RecordBatch:
    return pa.record_batch([pa.array(range(first, first + rows), pa.int64())], schema=SCHEMA)


def held(producer: alkaid.Producer) -> int:
    return producer.stats()["held_by_consumers"]


def test_batches_outlive_the_consumer(broker):
    with alkaid.Producer("l", SCHEMA, socket=broker.socket) as producer:
        consumer = alkaid.Consumer("l", socket=broker.socket)
        for i in range(3):
            producer.publish(batch(i * 10))
        got = [consumer.next(timeout=10) for _ in range(3)]
        consumer.close()
        del consumer
        gc.collect()
        # Still readable: the blocks stay held by the batches.
        assert [b.to_pyarrow().column(0)[0].as_py() for b in got] == [0, 10, 20]
        wait_until(lambda: held(producer) == 3, "3 blocks held by the batches")
        del got
        gc.collect()
        wait_until(lambda: held(producer) == 0, "every block returned")


def test_pyarrow_holds_the_block_after_the_batch_is_gone(broker):
    with alkaid.Producer("l", SCHEMA, socket=broker.socket) as producer, \
            alkaid.Consumer("l", socket=broker.socket) as consumer:
        producer.publish(batch(100))
        received = consumer.next(timeout=10)
        rb = received.to_pyarrow()
        column = rb.column(0)
        del received, rb
        gc.collect()
        wait_until(lambda: held(producer) == 1, "the pyarrow array holds the block")
        assert column.to_pylist() == list(range(100, 110))
        del column
        gc.collect()
        wait_until(lambda: held(producer) == 0, "released with the last pyarrow reference")


def test_release_on_another_thread(broker):
    with alkaid.Producer("l", SCHEMA, socket=broker.socket) as producer, \
            alkaid.Consumer("l", socket=broker.socket) as consumer:
        for i in range(4):
            producer.publish(batch(i))
        arrays = [consumer.next(timeout=10).to_pyarrow() for _ in range(4)]
        wait_until(lambda: held(producer) == 4, "4 blocks held")
        handed = [arrays]
        del arrays

        def drop() -> None:
            handed.clear()
            gc.collect()

        t = threading.Thread(target=drop)
        t.start()
        t.join()
        wait_until(lambda: held(producer) == 0, "released by the other thread")


def test_release_method_and_a_dropped_loan(broker):
    with alkaid.Producer("l", SCHEMA, socket=broker.socket) as producer, \
            alkaid.Consumer("l", socket=broker.socket) as consumer:
        producer.publish(batch(0))
        received = consumer.next(timeout=10)
        wait_until(lambda: held(producer) == 1, "1 block held")
        received.release()
        assert received.released
        wait_until(lambda: held(producer) == 0, "release() returned it")
        try:
            received.num_rows
        except alkaid.InvalidError as e:
            assert "released" in str(e)
        else:
            raise AssertionError("a released batch was usable")
        # A loan dropped unpublished returns its region.
        before = producer.stats()["arena_bytes_free"]
        loan = producer.loan(1000)
        loan["x"][:] = 1
        assert producer.stats()["arena_bytes_free"] < before
        del loan
        gc.collect()
        assert producer.stats()["arena_bytes_free"] == before


def test_every_block_returns_after_a_stream(broker):
    with alkaid.Producer("l", SCHEMA, socket=broker.socket, slot_count=8) as producer, \
            alkaid.Consumer("l", socket=broker.socket) as consumer:
        kept = []
        for i in range(40):  # five times the slots
            producer.publish(batch(i))
            b = consumer.next(timeout=10)
            if i % 7 == 0:
                kept.append(pa.record_batch(b))
        del b
        wait_until(lambda: held(producer) == len(kept), "only the kept batches are held")
        kept.clear()
        gc.collect()
        wait_until(lambda: held(producer) == 0, "all returned")
        # What is still live is what the slots themselves keep, at most one block per slot.
        assert producer.stats()["blocks_live"] <= 8
