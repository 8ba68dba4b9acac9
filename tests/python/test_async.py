"""`async for batch in consumer`: consumers waiting on one asyncio loop, with a
real broker and, where a producer must die, a real producer process."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading

import pyarrow as pa
import pytest

import alkaid
import alkaid._aio

from conftest import wait_until

SCHEMA = pa.schema([("x", pa.int64())])


def batch(first: int, rows: int = 4) -> pa.RecordBatch:
    return pa.record_batch([pa.array(range(first, first + rows), pa.int64())], schema=SCHEMA)


def values(received) -> list[int]:
    return pa.record_batch(received).column(0).to_pylist()


def test_async_for_reads_every_batch_in_order_then_ends(broker):
    producer = alkaid.Producer("t", SCHEMA, socket=broker.socket)
    with alkaid.Consumer("t", socket=broker.socket) as consumer:

        async def publish_later():
            # Each batch comes while the loop sleeps on the descriptor.
            for i in range(20):
                await asyncio.sleep(0.002)
                producer.publish(batch(4 * i))
            producer.close()

        async def main():
            publisher = asyncio.create_task(publish_later())
            got = [values(b) async for b in consumer]
            await publisher
            return got

        got = asyncio.run(asyncio.wait_for(main(), 30))
    assert got == [list(range(4 * i, 4 * i + 4)) for i in range(20)]


def test_one_loop_thread_waits_on_several_topics(broker):
    topics = ["a", "b", "c"]
    producers = [alkaid.Producer(t, SCHEMA, socket=broker.socket) for t in topics]
    consumers = [alkaid.Consumer(t, socket=broker.socket) for t in topics]
    threads_before = threading.active_count()

    def publish_all():
        for i in range(30):
            for k, p in enumerate(producers):
                p.publish(batch(100 * k + i, rows=1))
        for p in producers:
            p.close()

    async def drain(consumer):
        return [values(b)[0] async for b in consumer]

    async def main():
        tasks = [asyncio.create_task(drain(c)) for c in consumers]
        await asyncio.sleep(0.05)  # every consumer asleep on its descriptor
        # No thread per waiting consumer.
        assert threading.active_count() == threads_before
        # Published from another thread while the loop sleeps.
        publisher = threading.Thread(target=publish_all)
        publisher.start()
        got = await asyncio.gather(*tasks)
        publisher.join()
        return got

    got = asyncio.run(asyncio.wait_for(main(), 30))
    for k, received in enumerate(got):
        assert received == [100 * k + i for i in range(30)]
    for c in consumers:
        c.close()


class CountingConsumer:
    """A consumer whose try_next calls are counted (alkaid._aio.anext's loop)."""

    def __init__(self, consumer):
        self.consumer = consumer
        self.looks = 0

    def try_next(self):
        self.looks += 1
        return self.consumer.try_next()

    def arm_wait(self):
        return self.consumer.arm_wait()

    def wait_fd(self):
        return self.consumer.wait_fd()


def test_an_idle_wait_sleeps_and_leaves_the_loop_free(broker):
    producer = alkaid.Producer("t", SCHEMA, socket=broker.socket)
    # Published before the consumer came: not for it (it starts with the
    # next), and no reason to spin (its arming said "there" at every try).
    producer.publish(batch(0))
    with alkaid.Consumer("t", socket=broker.socket) as consumer:
        counting = CountingConsumer(consumer)
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        async def main():
            ticking = asyncio.create_task(ticker())
            waiting = asyncio.create_task(alkaid._aio.anext(counting))
            # The loop runs other tasks while the consumer waits.
            while ticks < 30:
                await asyncio.sleep(0.01)
            assert not waiting.done()
            # Asleep, not polling: a look per dead-producer poll at most
            # (three ticks of 10 ms would be thousands of looks if it spun).
            looks_while_idle = counting.looks
            producer.publish(batch(7))
            got = await waiting
            ticking.cancel()
            return looks_while_idle, got

        looks_while_idle, got = asyncio.run(asyncio.wait_for(main(), 30))
        assert values(got) == [7, 8, 9, 10]
        # Between 0.3 s (30 ticks) and the limit, one look per 0.1 s poll:
        # well under 100 whatever the machine's load; a spinning wait makes
        # thousands.
        assert 1 <= looks_while_idle < 100, looks_while_idle
    producer.close()


def test_a_cancelled_wait_leaves_the_consumer_usable(broker):
    producer = alkaid.Producer("t", SCHEMA, socket=broker.socket)
    with alkaid.Consumer("t", socket=broker.socket) as consumer:

        async def main():
            waiting = asyncio.create_task(consumer.__anext__())
            await asyncio.sleep(0.05)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            # The descriptor is no longer watched by the loop; the next
            # await gets the next batch.
            producer.publish(batch(1))
            return await consumer.__anext__()

        got = asyncio.run(asyncio.wait_for(main(), 30))
        assert values(got) == [1, 2, 3, 4]
    producer.close()


def test_a_closed_consumer_is_an_error_not_a_hang(broker):
    alkaid.Producer("t", SCHEMA, socket=broker.socket)
    consumer = alkaid.Consumer("t", socket=broker.socket)
    consumer.close()

    async def main():
        return await consumer.__anext__()

    with pytest.raises(alkaid.InvalidError, match="closed"):
        asyncio.run(asyncio.wait_for(main(), 30))


KILLED_PRODUCER = """
import sys, pyarrow as pa, alkaid
p = alkaid.Producer("t", pa.schema([("x", pa.int64())]), socket=sys.argv[1])
print("open", flush=True)
sys.stdin.readline()  # the consumer is there
p.publish(pa.record_batch([pa.array([5, 6], pa.int64())], names=["x"]))
sys.stdin.read()  # until killed
"""


def test_the_stream_ends_when_the_only_producer_is_killed(broker):
    child = subprocess.Popen([sys.executable, "-c", KILLED_PRODUCER, broker.socket],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env={**os.environ})
    try:
        assert child.stdout.readline().strip() == "open"
        with alkaid.Consumer("t", socket=broker.socket) as consumer:
            child.stdin.write("go\n")
            child.stdin.flush()

            async def main():
                got = []
                async for b in consumer:
                    got.append(values(b))
                    if len(got) == 1:
                        # The producer dies with nothing more to send: the
                        # broker's word (not the producer's doorbell, which
                        # a dead process cannot sound) ends the stream.
                        child.send_signal(signal.SIGKILL)
                return got

            got = asyncio.run(asyncio.wait_for(main(), 30))
        assert got == [[5, 6]]
    finally:
        child.kill()
        child.wait()
    wait_until(lambda: child.poll() is not None, "the producer process is gone")
