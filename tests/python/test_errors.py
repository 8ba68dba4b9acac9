"""Bad input and broken peers give clear exceptions, and leave nothing in
/dev/shm (the broker fixture checks that after each test)."""

from __future__ import annotations

import signal
import threading
import time

import pyarrow as pa
import pytest

import alkaid
from conftest import shm_names, wait_until

SCHEMA = pa.schema([("x", pa.int64())])


def test_schema_mismatch(broker):
    with alkaid.Producer("e", SCHEMA, socket=broker.socket) as producer:
        other = pa.record_batch([pa.array([1.0])], names=["x"])
        with pytest.raises(alkaid.InvalidError) as info:
            producer.publish(other)
        assert "double" in str(info.value) and "int64" in str(info.value)
        assert isinstance(info.value, ValueError) and info.value.code == "Invalid"
        # Joining the topic with another schema.
        with pytest.raises(alkaid.InvalidError, match="schema"):
            alkaid.Producer("e", pa.schema([("y", pa.utf8())]), socket=broker.socket)
        assert producer.stats()["published"] == 0


def test_not_arrow(broker):
    with alkaid.Producer("e", SCHEMA, socket=broker.socket) as producer:
        with pytest.raises(TypeError, match="expected an Arrow object.*got <class 'list'>"):
            producer.publish([1, 2, 3])
        with pytest.raises(TypeError, match="__arrow_c_schema__"):
            alkaid.Producer("e2", {"x": "int64"}, socket=broker.socket)

        class Liar:
            def __arrow_c_array__(self, requested_schema=None):
                return ("not", "capsules")

        with pytest.raises(TypeError, match="arrow_schema"):
            producer.publish(Liar())


def test_closed_consumer_and_producer(broker):
    producer = alkaid.Producer("e", SCHEMA, socket=broker.socket)
    consumer = alkaid.Consumer("e", socket=broker.socket)
    consumer.close()
    consumer.close()  # idempotent
    assert consumer.closed
    with pytest.raises(alkaid.InvalidError, match="consumer of topic 'e' is closed"):
        consumer.next(timeout=1)
    with pytest.raises(alkaid.InvalidError, match="closed"):
        consumer.__arrow_c_stream__()
    producer.close()
    with pytest.raises(alkaid.InvalidError, match="producer of topic 'e' is closed"):
        producer.publish(pa.record_batch([pa.array([1])], schema=SCHEMA))
    with pytest.raises(alkaid.InvalidError, match="closed"):
        producer.loan(1)


def test_stream_of_a_consumer_closed_meanwhile(broker):
    with alkaid.Producer("e", SCHEMA, socket=broker.socket):
        consumer = alkaid.Consumer("e", socket=broker.socket)
        reader = pa.RecordBatchReader.from_stream(consumer)
        consumer.close()
        with pytest.raises(Exception, match="closed"):
            reader.read_next_batch()


def test_no_broker():
    with pytest.raises(alkaid.IOFailedError, match="/nonexistent/alkaid.sock") as info:
        alkaid.Producer("e", SCHEMA, socket="/nonexistent/alkaid.sock")
    assert isinstance(info.value, OSError)
    with pytest.raises(alkaid.IOFailedError):
        alkaid.Consumer("e", socket="/nonexistent/alkaid.sock")
    with pytest.raises(alkaid.IOFailedError):
        alkaid.topics("/nonexistent/alkaid.sock")


def test_dead_broker(broker):
    # Producer and consumer keep working without the broker (docs/BROKER.md);
    # what needs it fails with a clear error.
    producer = alkaid.Producer("e", SCHEMA, socket=broker.socket)
    consumer = alkaid.Consumer("e", socket=broker.socket)
    broker.kill()
    producer.publish(pa.record_batch([pa.array([5])], schema=SCHEMA))
    assert consumer.next(timeout=10).to_pyarrow().column(0).to_pylist() == [5]
    with pytest.raises(alkaid.IOFailedError, match=broker.socket):
        alkaid.topics(broker.socket)
    with pytest.raises(alkaid.IOFailedError):
        alkaid.Consumer("e", socket=broker.socket)
    consumer.close()
    producer.close()
    # A broker killed by SIGKILL could not clean up; the clients removed
    # their own names (the fixture's check covers the rest after a restart).
    broker.start()
    broker.stop()


def test_missing_topic_and_timeouts(broker):
    with pytest.raises(alkaid.NotFoundError, match="nope") as info:
        alkaid.Consumer("nope", socket=broker.socket)
    assert isinstance(info.value, LookupError)
    with pytest.raises(alkaid.TimedOutError, match="nope"):
        alkaid.Consumer("nope", socket=broker.socket, wait_for_topic=0.05)
    with alkaid.Producer("e", SCHEMA, socket=broker.socket), \
            alkaid.Consumer("e", socket=broker.socket) as consumer:
        with pytest.raises(alkaid.TimedOutError, match="no batch on topic 'e' within 0.05 s"):
            consumer.next(timeout=0.05)
        with pytest.raises(TimeoutError):
            consumer.next(timeout=0)
    with pytest.raises(alkaid.InvalidError, match="wait_mode"):
        alkaid.Consumer("e", socket=broker.socket, wait_mode="fast")


@pytest.mark.parametrize("what", ["next", "wait_for_topic"])
def test_ctrl_c_interrupts_a_wait(broker, what):
    """SIGINT during a wait that nothing else would end raises KeyboardInterrupt
    from inside the wait. If the wait did not check for signals, a helper
    ends it the ordinary way after 20 s (publishing, creating the topic),
    which the test sees as `rescued`: it fails instead of hanging."""
    waiting = threading.Event()
    done = threading.Event()
    rescued = []

    def interrupter(rescue) -> None:
        waiting.wait()
        time.sleep(0.05)  # let the main thread enter the wait; any delay works
        signal.raise_signal(signal.SIGINT)
        if not done.wait(20):
            rescued.append(True)
            rescue()

    interrupted = False
    if what == "next":
        with alkaid.Producer("e", SCHEMA, socket=broker.socket) as producer, \
                alkaid.Consumer("e", socket=broker.socket) as consumer:
            t = threading.Thread(target=interrupter, args=(
                lambda: producer.publish(pa.record_batch([pa.array([1])], schema=SCHEMA)),))
            t.start()
            try:
                waiting.set()
                consumer.next(timeout=None)
            except KeyboardInterrupt:
                interrupted = True
            finally:
                done.set()
                t.join()
    else:
        made = []
        t = threading.Thread(target=interrupter, args=(lambda: made.append(alkaid.Producer(
            "later", SCHEMA, socket=broker.socket, wait_for_consumers=0)),))
        t.start()
        try:
            waiting.set()
            alkaid.Consumer("later", socket=broker.socket, wait_for_topic=None).close()
        except KeyboardInterrupt:
            interrupted = True
        finally:
            done.set()
            t.join()
            for p in made:
                p.close()
        if interrupted:
            # The interrupt ended the wait itself (its stop request), not
            # only the Python call: the broker no longer counts a consumer
            # waiting for the topic, which nobody will ever create.
            wait_until(lambda: "later" not in _awaited(broker),
                       "the interrupted consumer stopped waiting for its topic")
    assert not rescued, "the wait ignored SIGINT and ended only when the helper ended it"
    assert interrupted


def test_gil_is_released_while_waiting(broker):
    with alkaid.Producer("e", SCHEMA, socket=broker.socket) as producer, \
            alkaid.Consumer("e", socket=broker.socket) as consumer:
        got = []
        t = threading.Thread(target=lambda: got.append(consumer.next(timeout=30)))
        t.start()
        # This thread runs Python while the other waits: publishing from here
        # is what ends its wait.
        producer.publish(pa.record_batch([pa.array([42])], schema=SCHEMA))
        t.join()
        assert got[0].to_pyarrow().column(0).to_pylist() == [42]


def test_wait_for_topic_gets_every_batch_from_the_first(broker):
    results = []

    def consume() -> None:
        with alkaid.Consumer("late", socket=broker.socket, wait_for_topic=30) as c:
            results.extend(b.to_pyarrow().column(0)[0].as_py() for b in c)

    t = threading.Thread(target=consume)
    t.start()
    # The producer opens once the broker counts the waiting consumer: it then
    # waits for it to register, so batch 0 reaches it.
    wait_until(lambda: "late" in _awaited(broker), "consumer waiting")
    with alkaid.Producer("late", SCHEMA, socket=broker.socket) as producer:
        for i in range(5):
            producer.publish(pa.record_batch([pa.array([i])], schema=SCHEMA))
    t.join()
    assert results == [0, 1, 2, 3, 4]


def _awaited(broker) -> dict[str, int]:
    return alkaid.awaited_topics(broker.socket)
