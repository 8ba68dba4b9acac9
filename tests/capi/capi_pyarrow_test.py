"""pyarrow through the C ABI (alkaid.h), loaded with ctypes as any language
binding would load it: pyarrow exports a schema and batches into the
producer calls, and imports what alkaid_consumer_next and
alkaid_consumer_stream fill, zero-copy from the producer's shared memory.
A real broker, started here.

    python capi_pyarrow_test.py <libalkaid_c.so> <alkaid-broker>
"""
import ctypes
import os
import subprocess
import sys
import tempfile
import threading
import time

import pyarrow as pa

ARROW_ARRAY_SIZE = 80    # sizeof(struct ArrowArray)
ARROW_SCHEMA_SIZE = 72   # sizeof(struct ArrowSchema)
ARROW_STREAM_SIZE = 40   # sizeof(struct ArrowArrayStream)
OK, INVALID, TIMED_OUT, END_OF_STREAM = 0, 1, 11, 13
FOREVER = -1


def addr(buf):
    return ctypes.addressof(buf)


def released(buf, release_offset):
    return ctypes.c_void_p.from_buffer(buf, release_offset).value is None


def shm_mapped(address):
    """The file mapped at `address` in this process ('' if none)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= address < hi:
                return fields[5] if len(fields) > 5 else ""
    return ""


def batch(base, rows):
    return pa.record_batch(
        [pa.array(range(base, base + rows), pa.int64()),
         pa.array([None if r % 3 == 2 else f"v{r}" for r in range(rows)], pa.utf8())],
        schema=SCHEMA)


SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.utf8())])


def main():
    lib = ctypes.CDLL(sys.argv[1])
    vp, i64 = ctypes.c_void_p, ctypes.c_int64
    lib.alkaid_last_error.restype = ctypes.c_char_p
    lib.alkaid_version.restype = ctypes.c_int32
    lib.alkaid_producer_open.argtypes = [ctypes.c_char_p, vp, vp, ctypes.POINTER(vp)]
    lib.alkaid_producer_publish.argtypes = [vp, vp, vp]
    lib.alkaid_producer_close.argtypes = [vp]
    lib.alkaid_consumer_open.argtypes = [ctypes.c_char_p, vp, ctypes.POINTER(vp)]
    lib.alkaid_consumer_next.argtypes = [vp, i64, vp, vp, vp]
    lib.alkaid_consumer_stream.argtypes = [vp, i64, vp]
    lib.alkaid_consumer_close.argtypes = [vp]
    assert lib.alkaid_version() >= 1

    def check(status, what):
        assert status == OK, f"{what}: status {status}: {lib.alkaid_last_error().decode()}"

    name = f"capipy{os.getpid()}"
    socket = os.path.join(tempfile.gettempdir(), f"alkaid-test-{name}.sock")
    broker = subprocess.Popen([sys.argv[2], "--socket", socket, "--name", name,
                               "--log-level", "warn"])
    try:
        # NULL options: the default socket, which $ALKAID_BROKER_SOCKET names.
        os.environ["ALKAID_BROKER_SOCKET"] = socket
        producer = vp()
        for _ in range(1000):  # until the broker answers
            schema = ctypes.create_string_buffer(ARROW_SCHEMA_SIZE)
            SCHEMA._export_to_c(addr(schema))
            if lib.alkaid_producer_open(b"t", addr(schema), None, ctypes.byref(producer)) == OK:
                break
            time.sleep(0.005)
        assert producer.value, lib.alkaid_last_error().decode()
        consumer = vp()
        check(lib.alkaid_consumer_open(b"t", None, ctypes.byref(consumer)), "consumer_open")
        out = ctypes.create_string_buffer(ARROW_ARRAY_SIZE)
        assert lib.alkaid_consumer_next(consumer, 0, addr(out), None, None) == TIMED_OUT

        # pyarrow's batches in, by copy; one of another schema refused.
        for i in range(3):
            array = ctypes.create_string_buffer(ARROW_ARRAY_SIZE)
            batch(100 * i, 10 + i)._export_to_c(addr(array))
            check(lib.alkaid_producer_publish(producer, addr(array), None), "publish")
            assert released(array, 64)
        wrong = pa.record_batch([pa.array([1.5])], names=["x"])
        array = ctypes.create_string_buffer(ARROW_ARRAY_SIZE)
        schema = ctypes.create_string_buffer(ARROW_SCHEMA_SIZE)
        wrong._export_to_c(addr(array), addr(schema))
        assert lib.alkaid_producer_publish(producer, addr(array), addr(schema)) == INVALID
        assert released(array, 64) and released(schema, 56)

        # Out to pyarrow: the first batch by next, the rest by the stream.
        array = ctypes.create_string_buffer(ARROW_ARRAY_SIZE)
        schema = ctypes.create_string_buffer(ARROW_SCHEMA_SIZE)
        check(lib.alkaid_consumer_next(consumer, 10000, addr(array), addr(schema), None), "next")
        got = pa.RecordBatch._import_from_c(addr(array), addr(schema))
        assert got.equals(batch(0, 10)), got
        values = got.column(0).buffers()[1].address
        assert shm_mapped(values).startswith(f"/dev/shm/{name}."), shm_mapped(values)

        closing = threading.Thread(target=lambda: lib.alkaid_producer_close(producer))
        closing.start()  # close drains: it returns once the stream read everything
        stream = ctypes.create_string_buffer(ARROW_STREAM_SIZE)
        check(lib.alkaid_consumer_stream(consumer, 10000, addr(stream)), "stream")
        reader = pa.RecordBatchReader._import_from_c(addr(stream))
        rest = list(reader)
        assert [b.num_rows for b in rest] == [11, 12], rest
        assert rest[1].equals(batch(200, 12))
        closing.join()
        del reader
        assert lib.alkaid_consumer_next(consumer, 0, addr(out), None, None) == END_OF_STREAM
        check(lib.alkaid_consumer_close(consumer), "consumer_close")
        # The batches outlive the consumer and the producer.
        assert got.equals(batch(0, 10)) and rest[0].equals(batch(100, 11))
        del got, rest
    finally:
        broker.terminate()
        broker.wait(timeout=30)
    print("pyarrow through the C ABI: ok")


if __name__ == "__main__":
    main()
