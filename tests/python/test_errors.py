"""Bad input and broken peers give clear exceptions, and leave nothing in
/dev/shm (the broker fixture checks that after each test)."""

from __future__ import annotations

import os
import signal
import subprocess
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


def test_malformed_capsules(broker):
    """__arrow_c_array__ that returns anything but a (schema, array) tuple
    of fresh capsules of those names: TypeError or InvalidError, nothing
    published (a schema capsule taken before the array's is refused is
    released)."""
    batch = pa.record_batch([pa.array([1, 2, 3])], schema=SCHEMA)

    class Returns:
        def __init__(self, value):
            self.value = value

        def __arrow_c_array__(self, requested_schema=None):
            return self.value

    with alkaid.Producer("e", SCHEMA, socket=broker.socket) as producer:
        schema_capsule, array_capsule = batch.__arrow_c_array__()
        for shape in ([schema_capsule, array_capsule], (schema_capsule,),
                      (schema_capsule, array_capsule, None), None):
            with pytest.raises(TypeError, match=r"must return a \(schema, array\) tuple"):
                producer.publish(Returns(shape))
        with pytest.raises(TypeError, match="PyCapsule named 'arrow_schema'"):
            producer.publish(Returns((array_capsule, schema_capsule)))
        with pytest.raises(TypeError, match="PyCapsule named 'arrow_array'"):
            producer.publish(Returns((schema_capsule, schema_capsule)))
        once = Returns(batch.__arrow_c_array__())
        assert producer.publish(once) == 1
        with pytest.raises(alkaid.InvalidError, match="'arrow_schema' capsule was already consumed"):
            producer.publish(once)
        assert producer.stats()["published"] == 1


@pytest.mark.parametrize("other", ["same width", "name", "not null", "type"])
def test_schema_mismatch_after_batches_of_the_topic(broker, other):
    """Once pyarrow batches of the topic's schema were published (later ones
    are exported without their schema, which pyarrow compares with the
    topic's), a batch of another schema is still refused with the same
    error, one of the same layout too; a batch whose metadata alone differs
    is published as before, the general way."""
    schema = pa.schema([("x", pa.int64()), ("y", pa.float64())], metadata={"k": "v"})
    field = {"same width": pa.field("x", pa.timestamp("us")), "name": pa.field("z", pa.int64()),
             "not null": pa.field("x", pa.int64(), nullable=False),
             "type": pa.field("x", pa.int32())}[other]
    wrong = pa.schema([field, ("y", pa.float64())], metadata={"k": "v"})
    other_metadata = schema.with_metadata({"k": "w"})
    rows = 64
    with alkaid.Producer("m", schema, socket=broker.socket) as producer, \
            alkaid.Consumer("m", socket=broker.socket) as consumer:
        for i in range(3):
            good = pa.record_batch([pa.array(range(i, i + rows), pa.int64()),
                                    pa.array([i * 0.5] * rows)], schema=schema)
            assert producer.publish(good) == 1
            assert consumer.next(timeout=10).to_pyarrow().equals(good)
        bad = pa.record_batch([pa.array(range(rows), pa.int64()).cast(field.type),
                               pa.array([0.5] * rows)], schema=wrong)
        for _ in range(2):
            with pytest.raises(alkaid.InvalidError, match="BatchPublisher: batch schema"):
                producer.publish(bad)
        assert producer.stats()["published"] == 3
        relabelled = pa.record_batch([pa.array(range(7, 7 + rows), pa.int64()),
                                      pa.array([7.5] * rows)], schema=other_metadata)
        assert producer.publish(relabelled) == 1
        got = consumer.next(timeout=10).to_pyarrow()
        assert got.column(0).equals(relabelled.column(0)) and got.column(1).equals(relabelled.column(1))
        assert consumer.try_next() is None and producer.stats()["published"] == 4


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
    from inside the wait (_interrupt_inside: signals keep coming while the
    call runs, so one that lands before the wait starts decides nothing). If
    the wait did not check for signals, the helper ends it the ordinary way
    after 20 s (publishing, creating the topic): the test fails instead of
    hanging."""
    if what == "next":
        with alkaid.Producer("e", SCHEMA, socket=broker.socket) as producer, \
                alkaid.Consumer("e", socket=broker.socket) as consumer:
            interrupted, rescued = _interrupt_inside(
                lambda: consumer.next(timeout=None),
                lambda: producer.publish(pa.record_batch([pa.array([1])], schema=SCHEMA)))
    else:
        made = []
        interrupted, rescued = _interrupt_inside(
            lambda: alkaid.Consumer("later", socket=broker.socket, wait_for_topic=None).close(),
            lambda: made.append(alkaid.Producer("later", SCHEMA, socket=broker.socket,
                                                wait_for_consumers=0)))
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


def _interrupt_inside(call, rescue) -> tuple[bool, bool]:
    """Runs `call` on this (the main) thread while a helper sends SIGINT every
    20 ms until it returns; returns (interrupted, rescued).

    A SIGINT handler that raises KeyboardInterrupt once, and only while
    `call` runs (its caller's bytecode between the flag and the call aside),
    makes the verdict independent of when the signals land: one handled
    before or after the call is ignored. If the wait inside `call` ignored
    them, the helper ends it the ordinary way (`rescue`) after 20 s, and the
    test sees `rescued`: it fails instead of hanging."""
    state = {"inside": False, "raised": False}
    started = threading.Event()
    done = threading.Event()
    rescued = []

    def handler(signum, frame) -> None:
        if state["inside"] and not state["raised"]:
            state["raised"] = True
            raise KeyboardInterrupt

    def interrupter() -> None:
        started.wait()
        deadline = time.monotonic() + 20
        while not done.wait(0.02):
            if time.monotonic() >= deadline:
                rescued.append(True)
                rescue()
                return
            if not state["raised"]:
                signal.raise_signal(signal.SIGINT)

    previous = signal.signal(signal.SIGINT, handler)
    interrupted = False
    t = threading.Thread(target=interrupter)
    t.start()
    try:
        started.set()
        state["inside"] = True
        call()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        state["inside"] = False
        done.set()
        t.join()
        _handle_pending_signals()  # still with the handler that ignores them
        signal.signal(signal.SIGINT, previous)
    return interrupted, bool(rescued)


def _handle_pending_signals() -> None:
    """Entering a Python function and looping both let the interpreter run
    the handlers of signals that arrived (the helper's are all raised by
    now: it was joined)."""
    for _ in range(2):
        pass


def _quietly(call) -> None:
    try:
        call()
    except alkaid.Error:
        pass


def _producers(broker, topic: str) -> int:
    return next((t.producers for t in alkaid.topics(broker.socket) if t.name == topic), 0)


def test_ctrl_c_interrupts_producer_construction(broker):
    """Opening waits (wait_for_consumers) for a consumer already attached to
    register on the new producer's channel; this one never reads, so it
    never does."""
    batch = pa.record_batch([pa.array([1])], schema=SCHEMA)
    with alkaid.Producer("e", SCHEMA, socket=broker.socket, wait_for_consumers=0) as first, \
            alkaid.Consumer("e", socket=broker.socket, from_oldest=True) as idle:
        made = []
        interrupted, rescued = _interrupt_inside(
            lambda: made.append(alkaid.Producer("e", SCHEMA, socket=broker.socket,
                                                wait_for_consumers=60)),
            # Looking for data registers it: the wait ends.
            lambda: _quietly(lambda: idle.next(timeout=2)))
        for p in made:
            p.close()
        assert not rescued, "opening ignored SIGINT and ended only when the helper ended it"
        assert interrupted and not made
        # The interrupted producer detached: only the first one is left.
        wait_until(lambda: _producers(broker, "e") == 1, "the interrupted producer detached")
        first.publish(batch)
        assert idle.next(timeout=30).to_pyarrow().num_rows == 1


@pytest.mark.parametrize("how", ["publish", "publish_numpy"])
def test_ctrl_c_interrupts_a_blocked_publish(broker, how):
    """A block-policy topic of 2 slots whose consumer read batch 0 and then
    stopped: batches 1 and 2 fill the slots, batch 3 waits (up to 60 s)."""
    import numpy as np

    batch = pa.record_batch([pa.array([7])], schema=SCHEMA)
    with alkaid.Producer("e", SCHEMA, socket=broker.socket, slot_count=2, policy="block",
                         publish_timeout=60, wait_for_consumers=0) as producer, \
            alkaid.Consumer("e", socket=broker.socket, from_oldest=True) as consumer:
        producer.publish(batch)
        assert consumer.next(timeout=30).to_pyarrow().num_rows == 1
        producer.publish(batch)
        producer.publish(batch)
        if how == "publish":
            blocked = lambda: producer.publish(batch)  # noqa: E731
        else:
            blocked = lambda: producer.publish_numpy({"x": np.array([7])})  # noqa: E731
        interrupted, rescued = _interrupt_inside(blocked, lambda: consumer.next(timeout=30))
        assert not rescued, "the publish ignored SIGINT and ended only when the helper ended it"
        assert interrupted
        # Nothing of the interrupted batch went out; the producer goes on.
        assert producer.stats()["published"] == 3
        for _ in range(2):
            consumer.next(timeout=30)
        producer.publish(batch)
        assert consumer.next(timeout=30).to_pyarrow().num_rows == 1


def test_ctrl_c_interrupts_the_drain_of_close(broker):
    """close() waits (drain_timeout, 60 s) for the consumer to read batch 1,
    which it does not; interrupted, the producer is closed all the same and
    the consumer reads batch 1, then the end of the stream."""
    batch = pa.record_batch([pa.array([5])], schema=SCHEMA)
    producer = alkaid.Producer("e", SCHEMA, socket=broker.socket, drain_timeout=60,
                               wait_for_consumers=0)
    with alkaid.Consumer("e", socket=broker.socket, from_oldest=True) as c:
        producer.publish(batch)
        c.next(timeout=30)
        producer.publish(batch)
        interrupted, rescued = _interrupt_inside(producer.close, lambda: c.next(timeout=30))
        assert not rescued, "close ignored SIGINT and ended only when the helper ended it"
        assert interrupted and producer.closed
        wait_until(lambda: _producers(broker, "e") == 0, "the producer detached")
        assert c.next(timeout=30).to_pyarrow().column(0).to_pylist() == [5]
        with pytest.raises(StopIteration):
            c.next(timeout=30)


# The rogue producer of the C++ fault tests (tests/fault/rogue_producer.cc):
# three batches of (id int64, name utf8), the second's offsets corrupted in
# place before it was published (first and last offsets right, the one
# between them 2^30). ctest sets the variable (tests/python/CMakeLists.txt).
ROGUE_PRODUCER = os.environ.get("ALKAID_ROGUE_PRODUCER", "")


@pytest.mark.skipif(not ROGUE_PRODUCER, reason="ALKAID_ROGUE_PRODUCER is not set (ctest sets it)")
def test_verification_refuses_a_rogue_producers_batch(broker):
    """Three consumers, one per mode, each reading on its own thread (a
    consumer registers with a producer that joins later while it reads):
    "structure" returns the hostile batch, "full" and "private-copy" raise
    InvalidError naming the column, slot and offset, then go on."""
    modes = ["structure", "full", "private-copy"]
    # Per mode: the first id of each batch, or the exception, until the end.
    results: dict[str, list[object]] = {m: [] for m in modes}

    def consume(mode: str) -> None:
        with alkaid.Consumer("rogue", socket=broker.socket, wait_for_topic=30,
                             verification=mode) as c:
            for _ in range(4):
                try:
                    batch = c.next(timeout=30)
                except StopIteration:
                    return
                except alkaid.Error as e:
                    results[mode].append(e)
                    continue
                if len(results[mode]) == 1:
                    # The hostile batch (structure mode): not imported into
                    # pyarrow, only its row count is read.
                    results[mode].append(batch.num_rows)
                else:
                    results[mode].append(batch.to_pyarrow().column(0)[0].as_py())

    readers = [threading.Thread(target=consume, args=(m,)) for m in modes]
    for t in readers:
        t.start()
    rogue = None
    try:
        wait_until(lambda: _awaited(broker).get("rogue", 0) == 3, "three consumers waiting")
        rogue = subprocess.Popen([ROGUE_PRODUCER, broker.socket, "rogue"])
        for t in readers:
            t.join()
        assert rogue.wait(timeout=60) == 0
    finally:
        if rogue is not None and rogue.poll() is None:
            rogue.kill()
            rogue.wait()
    # The default mode: the three batches, the second (3 rows) with its lie.
    assert results["structure"] == [0, 3, 200]
    for mode in ("full", "private-copy"):
        first, refused, third = results[mode]
        assert (first, third) == (0, 200), mode
        assert isinstance(refused, alkaid.InvalidError), (mode, refused)
        assert refused.code == "Invalid"
        assert "field 'name': slot 0: end offset 1073741824 is past the end" in str(refused), (
            mode, str(refused))


def test_the_previous_releases_names_warn_and_still_work(broker):
    """Producer's keywords ring_slots and segment_bytes, and topics()' keys of
    those names, are the previous release's names of slot_count and
    arena_bytes: deprecated for one release (a DeprecationWarning), they
    still set and read the same settings; the new names win where both are
    given."""
    with pytest.warns(DeprecationWarning) as warned:
        old = alkaid.Producer("old", SCHEMA, socket=broker.socket, ring_slots=16,
                              segment_bytes=256 << 10)
    messages = [str(w.message) for w in warned]
    assert "Producer(ring_slots=...) is deprecated; use slot_count=..." in messages
    assert "Producer(segment_bytes=...) is deprecated; use arena_bytes=..." in messages
    with pytest.warns(DeprecationWarning, match="ring_slots"):
        both = alkaid.Producer("both", SCHEMA, socket=broker.socket, slot_count=32, ring_slots=8)
    with old, both:
        topics = {t["name"]: t for t in alkaid.topics(broker.socket)}
        assert topics["old"]["slot_count"] == 16
        assert topics["old"]["arena_bytes"] == 256 << 10
        assert topics["both"]["slot_count"] == 32
        with pytest.warns(DeprecationWarning, match="'ring_slots' is deprecated; use 'slot_count'"):
            assert topics["old"]["ring_slots"] == 16
        with pytest.warns(DeprecationWarning, match="'segment_bytes' is deprecated"):
            assert topics["old"].segment_bytes == 256 << 10
        with pytest.warns(DeprecationWarning):
            assert topics["both"].get("ring_slots") == 32
