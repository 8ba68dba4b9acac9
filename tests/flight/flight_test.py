"""The Arrow Flight bridge (alkaid-flight) against real clients: pyarrow.flight
and our own C++ client (`alkaid subscribe|publish grpc://...`), with a real
broker, real producers and consumers, loopback only (docs/FLIGHT.md).

Driven by ctest (tests/flight/CMakeLists.txt) with the project's .venv
python:  flight_test.py BROKER ALKAID ALKAID_FLIGHT GOLD_DIR [unittest args]

Every wait is for a condition (a process's exit, a line of output, a
broker's topic list), bounded so that a hang fails instead of blocking; no
test is decided by how long something took.
"""

import glob
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import pyarrow as pa
import pyarrow.flight as fl
import pyarrow.ipc

BROKER, ALKAID, FLIGHT, GOLD = sys.argv[1:5]
del sys.argv[1:5]

# Upper bound of every wait: only reached when something hangs.
HANG = 60.0
_counter = [0]


def wait_for(condition, what, bound=HANG):
    """Polls `condition` until it is true; fails the test after `bound`."""
    deadline = time.monotonic() + bound
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.01)


def gold_streams():
    return sorted(glob.glob(os.path.join(GOLD, "generated_*.stream")))


def read_stream(path):
    with pa.OSFile(path) as f:
        reader = pa.ipc.open_stream(f)
        return reader.schema, list(reader)


class Broker:
    """One alkaid-broker on its own socket, with its own segment names."""

    def __init__(self):
        _counter[0] += 1
        self.name = f"fl{os.getpid()}x{_counter[0]}"
        self.socket = f"/tmp/alkaid-test-{self.name}.sock"
        self.start()

    def start(self):
        self.proc = subprocess.Popen([BROKER, "--socket", self.socket, "--name", self.name,
                                      "--log-level", "warn"])
        wait_for(lambda: subprocess.run([ALKAID, "topics", "--socket", self.socket],
                                        capture_output=True).returncode == 0,
                 "the broker to answer")

    def topics(self):
        """{topic: (producers, consumers, published)} and awaited topics'
        waiting consumers, from `alkaid topics`."""
        # The rows: after the header, up to the blank line before the
        # shared-memory summary.
        out = subprocess.run([ALKAID, "topics", "--socket", self.socket], capture_output=True,
                             text=True, check=True).stdout.split("\n\n")[0].splitlines()[1:]
        existing, awaited = {}, {}
        for line in out:
            f = line.split()
            if "(not created yet)" in line:
                awaited[f[0]] = int(f[2])
            else:
                existing[f[0]] = (int(f[1]), int(f[2]), int(f[3]))
        return existing, awaited

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=HANG)

    def segments(self):
        return [n for n in os.listdir("/dev/shm") if n.startswith(self.name)]


class FlightServer:
    def __init__(self, broker, *extra, listen="127.0.0.1:0"):
        self.proc = subprocess.Popen([FLIGHT, "--socket", broker.socket, "--listen", listen,
                                      *extra], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if "listening on port" not in line:
            raise AssertionError(f"alkaid-flight did not start: {line!r}")
        self.port = int(line.rsplit(" ", 1)[1])
        self.location = f"grpc://127.0.0.1:{self.port}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.assert_exit(0)
        self.proc.stdout.close()

    def assert_exit(self, code):
        assert self.proc.wait(timeout=HANG) == code


class FlightTestCase(unittest.TestCase):
    server_args = ()

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.broker = Broker()
        self.server = FlightServer(self.broker, *self.server_args_for(self.tmp.name))
        self.client = fl.connect(self.server.location)

    def server_args_for(self, tmp):
        return self.server_args

    def tearDown(self):
        self.client.close()
        self.server.stop()
        self.broker.stop()
        leftover = self.broker.segments()
        self.tmp.cleanup()
        self.assertEqual(leftover, [], "segments left in /dev/shm")

    def publish(self, topic, path, *, socket=None, wait=True):
        proc = subprocess.Popen([ALKAID, "publish", topic, path, "--socket",
                                 socket or self.broker.socket])
        if wait:
            self.assertEqual(proc.wait(timeout=HANG), 0)
        return proc

    def wait_for_waiting_consumer(self, topic, broker=None):
        broker = broker or self.broker
        wait_for(lambda: broker.topics()[1].get(topic, 0) >= 1,
                 f"a consumer waiting for '{topic}'")


class DoGetThread(threading.Thread):
    """A pyarrow.flight do_get read to its end on a thread."""

    def __init__(self, client, ticket, options=None):
        super().__init__(daemon=True)
        self.client, self.ticket, self.options = client, ticket, options
        self.batches, self.error, self.schema = [], None, None

    def run(self):
        reader = None
        try:
            reader = self.client.do_get(fl.Ticket(self.ticket), self.options)
            self.schema = reader.schema
            for chunk in reader:
                self.batches.append(chunk.data)
        except Exception as e:  # the test looks at it
            self.error = e
            # Let the server go at once (a reader kept open by the
            # traceback would hold the producer back).
            if reader is not None:
                reader.cancel()

    def result(self):
        self.join(HANG)
        if self.is_alive():
            raise AssertionError("do_get did not end")
        if self.error is not None:
            raise self.error
        return self.schema, self.batches


class DoGetRest(threading.Thread):
    """The rest of an open do_get reader, read to its end on a thread."""

    def __init__(self, reader):
        super().__init__(daemon=True)
        self.reader, self.batches, self.error = reader, [], None
        self.start()

    def run(self):
        try:
            for chunk in self.reader:
                self.batches.append(chunk.data)
        except Exception as e:  # the test looks at it
            self.error = e

    def result(self):
        self.join(HANG)
        if self.is_alive():
            raise AssertionError("do_get did not end")
        if self.error is not None:
            raise self.error
        return self.batches


class ListingTest(FlightTestCase):
    def test_list_flights_info_and_schema(self):
        path = os.path.join(GOLD, "generated_primitive.stream")
        schema, _ = read_stream(path)
        self.publish("prim", path)
        infos = list(self.client.list_flights())
        self.assertEqual([i.descriptor.path for i in infos], [[b"prim"]])
        self.assertTrue(infos[0].schema.equals(schema, check_metadata=True))
        info = self.client.get_flight_info(fl.FlightDescriptor.for_path("prim"))
        self.assertEqual([e.ticket.ticket for e in info.endpoints], [b"oldest/prim", b"live/prim"])
        got = self.client.get_schema(fl.FlightDescriptor.for_path("prim")).schema
        self.assertTrue(got.equals(schema, check_metadata=True))

    def test_unknown_topic_is_not_found(self):
        # NOT_FOUND and INVALID_ARGUMENT, as pyarrow maps them.
        with self.assertRaises(pa.ArrowKeyError) as e:
            self.client.get_flight_info(fl.FlightDescriptor.for_path("nope"))
        self.assertIn("nope", str(e.exception))
        with self.assertRaises(pa.ArrowInvalid):
            self.client.get_flight_info(fl.FlightDescriptor.for_command(b"x"))
        with self.assertRaises(pa.ArrowInvalid):
            self.client.do_get(fl.Ticket(b"elsewhere/x")).read_all()

    def test_garbage_on_the_port(self):
        for junk in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", os.urandom(4096),
                     b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + os.urandom(512)):
            with socket.create_connection(("127.0.0.1", self.server.port)) as s:
                s.sendall(junk)
                s.settimeout(HANG)
                try:
                    while s.recv(4096):
                        pass
                except (ConnectionResetError, socket.timeout):
                    pass
        # Still serving.
        self.assertEqual(list(self.client.list_flights()), [])
        self.assertIsNone(self.server.proc.poll())


class DoGetTest(FlightTestCase):
    def test_every_gold_case_live_while_published(self):
        cases = gold_streams()
        self.assertGreater(len(cases), 20)
        for path in cases:
            name = os.path.basename(path)[len("generated_"):-len(".stream")]
            with self.subTest(case=name):
                schema, expected = read_stream(path)
                # The live ticket, taken before the topic exists: the server
                # waits for it, as a consumer the broker attaches at once.
                get = DoGetThread(self.client, b"live/" + name.encode())
                get.start()
                self.wait_for_waiting_consumer(name)
                self.publish(name, path)
                got_schema, got = get.result()
                self.assertTrue(got_schema.equals(schema, check_metadata=True), name)
                self.assertEqual(len(got), len(expected), name)
                for i, (a, b) in enumerate(zip(got, expected)):
                    self.assertTrue(a.equals(b), f"{name}: batch {i} differs")

    def test_oldest_ticket_reads_what_the_topic_holds(self):
        path = os.path.join(GOLD, "generated_primitive.stream")
        _, expected = read_stream(path)
        # A publisher that stays open (stdin) after its batches.
        feeder = subprocess.Popen([ALKAID, "publish", "held", "-", "--socket", self.broker.socket],
                                  stdin=subprocess.PIPE)
        with open(path, "rb") as f:
            data = f.read()
        feeder.stdin.write(data[:-8])  # everything but the end-of-stream marker
        feeder.stdin.flush()
        wait_for(lambda: self.broker.topics()[0].get("held", (0, 0, 0))[2] == len(expected),
                 "the batches to be published")
        # Both batches were published before this do_get started. Its first
        # batch read, the producer is told to end (the consumer must have
        # attached to the producer's channel first: a producer that closes
        # before does not wait for it).
        reader = self.client.do_get(fl.Ticket(b"oldest/held"))
        got = [reader.read_chunk().data]
        feeder.stdin.close()
        self.assertEqual(feeder.wait(timeout=HANG), 0)
        got += [c.data for c in reader]
        self.assertEqual(len(got), len(expected))
        for a, b in zip(got, expected):
            self.assertTrue(a.equals(b))


    def test_row_topic_with_dictionaries(self):
        # An unsafe-row topic carries no dictionaries: its batches are read
        # with the dictionary columns decoded (RowOutputSchema), and
        # FlightInfo, GetSchema and DoGet all say that schema.
        path = os.path.join(GOLD, "generated_dictionary.stream")
        schema, expected = read_stream(path)
        decoded = pa.schema([f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type)
                             else f for f in schema])
        get = DoGetThread(self.client, b"live/rows")
        get.start()
        self.wait_for_waiting_consumer("rows")
        proc = subprocess.run([ALKAID, "publish", "rows", path, "--unsafe-row", "--socket",
                               self.broker.socket], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        got_schema, got = get.result()
        self.assertTrue(got_schema.equals(decoded), f"{got_schema} vs {decoded}")
        info = self.client.get_flight_info(fl.FlightDescriptor.for_path("rows"))
        self.assertTrue(info.schema.equals(got_schema))
        self.assertTrue(self.client.get_schema(fl.FlightDescriptor.for_path("rows"))
                        .schema.equals(got_schema))
        self.assertEqual(len(got), len(expected))
        for a, b in zip(got, expected):
            self.assertEqual(a.to_pylist(), b.to_pylist())


class DoPutTest(FlightTestCase):
    def table(self):
        n = 1000
        dict_col = pa.array([f"k{i % 7}" for i in range(n)]).dictionary_encode()
        return pa.table({"i": pa.array(range(n), pa.int64()),
                         "s": pa.array([None if i % 5 == 0 else f"v{i}" for i in range(n)]),
                         "d": dict_col,
                         "l": pa.array([[i, i + 1] for i in range(n)], pa.list_(pa.int32()))})

    def test_do_put_read_by_a_local_consumer(self):
        table = self.table()
        out = os.path.join(self.tmp.name, "got.arrows")
        sub = subprocess.Popen([ALKAID, "subscribe", "put", "--out", out, "--socket",
                                self.broker.socket])
        self.wait_for_waiting_consumer("put")
        writer, _ = self.client.do_put(fl.FlightDescriptor.for_path("put"), table.schema)
        for batch in table.to_batches(max_chunksize=128):
            writer.write_batch(batch)
        writer.close()
        self.assertEqual(sub.wait(timeout=HANG), 0)
        schema, got = read_stream(out)
        self.assertTrue(schema.equals(table.schema))
        self.assertTrue(pa.Table.from_batches(got, schema).equals(table))
        self.assertEqual([b.num_rows for b in got], [b.num_rows for b in table.to_batches(128)])

    def test_dictionary_deltas_and_replacements_carried(self):
        # Batches whose dictionary grows (deltas) and then changes (a
        # replacement), published through do_put, read back with do_get.
        dict_type = pa.dictionary(pa.int32(), pa.string())
        batches = []
        for values, indices in ((["a", "b"], [0, 1, 1]), (["a", "b", "c"], [2, 0]),
                                (["a", "b", "c", "d"], [3, 3, 1]), (["x", "y"], [1, 0])):
            arr = pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), pa.array(values))
            batches.append(pa.record_batch([arr], names=["d"]))
        schema = batches[0].schema
        self.assertEqual(schema.field("d").type, dict_type)
        get = DoGetThread(self.client, b"live/dicts")
        get.start()
        self.wait_for_waiting_consumer("dicts")
        writer, _ = self.client.do_put(fl.FlightDescriptor.for_path("dicts"), schema,
                                       fl.FlightCallOptions())
        for b in batches:
            writer.write_batch(b)
        writer.close()
        _, got = get.result()
        self.assertEqual(len(got), len(batches))
        for a, b in zip(got, batches):
            self.assertEqual(a.column(0).to_pylist(), b.column(0).to_pylist())

    def test_one_put_result_per_batch(self):
        # Arrow's clients read a PutResult per batch from do_put's metadata
        # reader: ours carry {"published": N}, N batches published so far.
        table = self.table()
        writer, metadata = self.client.do_put(fl.FlightDescriptor.for_path("acks"), table.schema)
        for n, batch in enumerate(table.to_batches(max_chunksize=100), start=1):
            writer.write_batch(batch)
            ack = metadata.read()
            self.assertIsNotNone(ack, f"no PutResult for batch {n}")
            self.assertEqual(json.loads(ack.to_pybytes()), {"published": n})
        writer.done_writing()
        self.assertIsNone(metadata.read())
        writer.close()
        self.assertEqual(self.broker.topics()[0]["acks"][2], 10)

    def test_unread_put_results_do_not_stall_the_put(self):
        # A client that never reads the metadata: 20000 PutResults (more than
        # a gRPC stream's flow-control window holds) must not block the
        # server's writes and with them the put.
        schema = pa.schema([("x", pa.int64())])
        batch = pa.record_batch([pa.array([1], pa.int64())], schema=schema)
        writer, _ = self.client.do_put(fl.FlightDescriptor.for_path("many"), schema)
        for _ in range(20000):
            writer.write_batch(batch)
        writer.close()
        self.assertEqual(self.broker.topics()[0]["many"][2], 20000)

    def test_put_into_a_topic_with_another_schema_is_refused(self):
        path = os.path.join(GOLD, "generated_primitive.stream")
        _, expected = read_stream(path)
        self.publish("typed", path)
        before = self.broker.topics()[0]["typed"]
        self.assertEqual(before[2], len(expected))
        table = pa.table({"other": pa.array([1, 2, 3], pa.int64())})
        with self.assertRaises(pa.ArrowInvalid) as e:
            writer, _ = self.client.do_put(fl.FlightDescriptor.for_path("typed"), table.schema)
            writer.write_table(table)
            writer.close()
        self.assertIn("different schema", str(e.exception))
        self.assertEqual(self.broker.topics()[0]["typed"], before)

    def test_bad_descriptor_publishes_nothing(self):
        table = self.table()
        with self.assertRaises(pa.ArrowInvalid):
            writer, _ = self.client.do_put(fl.FlightDescriptor.for_command(b"x"), table.schema)
            writer.write_table(table)
            writer.close()
        self.assertEqual(self.broker.topics()[0], {})


class MessageLimitTest(FlightTestCase):
    """--max-message-bytes: a DoPut message is bounded by what its compressed
    buffers decompress to, not only by its size on the wire."""

    LIMIT = 1 << 20
    server_args = ("--max-message-bytes", str(LIMIT))
    SCHEMA = pa.schema([("v", pa.int64())])
    ZSTD = fl.FlightCallOptions(write_options=pa.ipc.IpcWriteOptions(compression="zstd"))

    def zeros(self, nbytes):
        return pa.record_batch([pa.array([0] * (nbytes // 8), pa.int64())], schema=self.SCHEMA)

    def test_compressed_batch_decompressing_past_the_limit_is_refused(self):
        first = pa.record_batch([pa.array([1, 2, 3], pa.int64())], schema=self.SCHEMA)
        over = self.zeros(self.LIMIT + 8)  # its ZSTD body: a few hundred bytes
        get = DoGetThread(self.client, b"live/big")
        get.start()
        self.wait_for_waiting_consumer("big")
        with self.assertRaises(pa.ArrowInvalid) as e:
            writer, metadata = self.client.do_put(fl.FlightDescriptor.for_path("big"),
                                                  self.SCHEMA, self.ZSTD)
            writer.write_batch(first)
            self.assertEqual(json.loads(metadata.read().to_pybytes()), {"published": 1})
            writer.write_batch(over)
            writer.close()
        self.assertIn(f"declares {self.LIMIT + 8} uncompressed bytes (limit {self.LIMIT})",
                      str(e.exception))
        # The batch before it was published, the refused one not; the put
        # ended, and with it the topic's stream.
        _, got = get.result()
        self.assertEqual([b.column(0).to_pylist() for b in got], [[1, 2, 3]])
        self.assertEqual(self.broker.topics()[0]["big"][2], 1)

    def test_uncompressed_bodies_over_the_limit_are_refused(self):
        # Up to twice the limit plus 1 MiB reaches the server's decoder
        # (INVALID_ARGUMENT naming the limit); beyond, gRPC refuses it unread.
        for nbytes, error in ((self.LIMIT * 3 // 2, "the message's data_body is "
                               f"{self.LIMIT * 3 // 2} bytes, over the server's limit of "
                               f"{self.LIMIT} bytes"),
                              (self.LIMIT * 4, "Received message larger than max")):
            with self.assertRaises(pa.ArrowInvalid) as e:
                writer, _ = self.client.do_put(fl.FlightDescriptor.for_path(f"b{nbytes}"),
                                               self.SCHEMA)
                writer.write_batch(self.zeros(nbytes))
                writer.close()
            self.assertIn(error, str(e.exception))
        # Nothing published (whether gRPC's refusal came before or after the
        # server created the topic from the schema message).
        self.assertEqual([v[2] for v in self.broker.topics()[0].values() if v[2] != 0], [])

    def test_compressed_batch_just_under_the_limit_is_published(self):
        under = self.zeros(self.LIMIT - 64)
        get = DoGetThread(self.client, b"live/under")
        get.start()
        self.wait_for_waiting_consumer("under")
        writer, _ = self.client.do_put(fl.FlightDescriptor.for_path("under"), self.SCHEMA,
                                       self.ZSTD)
        writer.write_batch(under)
        writer.close()
        _, got = get.result()
        self.assertEqual(len(got), 1)
        self.assertTrue(got[0].equals(under))


class CppClientTest(FlightTestCase):
    """`alkaid subscribe|publish grpc://...` (our own Flight client)."""

    def test_subscribe_and_publish_through_flight(self):
        for case in ("primitive", "dictionary", "nested"):
            path = os.path.join(GOLD, f"generated_{case}.stream")
            schema, expected = read_stream(path)
            out = os.path.join(self.tmp.name, f"{case}.arrows")
            sub = subprocess.Popen([ALKAID, "subscribe", f"{self.server.location}/{case}",
                                    "--out", out])
            self.wait_for_waiting_consumer(case)
            # Published through Flight too: DoPut into the same topic.
            pub = subprocess.run([ALKAID, "publish", f"{self.server.location}/{case}", path],
                                 capture_output=True, text=True)
            self.assertEqual(pub.returncode, 0, pub.stderr)
            self.assertEqual(sub.wait(timeout=HANG), 0)
            got_schema, got = read_stream(out)
            self.assertTrue(got_schema.equals(schema), case)
            self.assertEqual(len(got), len(expected))
            for a, b in zip(got, expected):
                self.assertTrue(a.equals(b), case)

    def test_bad_uri_and_unreachable_server(self):
        r = subprocess.run([ALKAID, "subscribe", "grpc://127.0.0.1/x"], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("HOST:PORT", r.stderr)
        # Nothing listens on port 1.
        r = subprocess.run([ALKAID, "subscribe", "grpc://127.0.0.1:1/x"], capture_output=True,
                           text=True, timeout=HANG)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("UNAVAILABLE", r.stderr)

    def test_two_brokers_bridged(self):
        # Topic "src" on broker A republished as "dst" on broker B:
        #   alkaid subscribe grpc://A/src | alkaid publish dst - --socket B
        broker_b = Broker()
        try:
            cases = [os.path.join(GOLD, f"generated_{c}.stream")
                     for c in ("primitive", "dictionary", "nested", "union")]
            expected = [b for p in cases[:1] for b in read_stream(p)[1]]
            path = cases[0]
            out = os.path.join(self.tmp.name, "bridged.arrows")
            local = subprocess.Popen([ALKAID, "subscribe", "dst", "--out", out, "--socket",
                                      broker_b.socket])
            self.wait_for_waiting_consumer("dst", broker_b)
            bridge_in = subprocess.Popen([ALKAID, "subscribe", f"{self.server.location}/src",
                                          "--out", "-"], stdout=subprocess.PIPE)
            bridge_out = subprocess.Popen([ALKAID, "publish", "dst", "-", "--socket",
                                           broker_b.socket], stdin=bridge_in.stdout)
            bridge_in.stdout.close()
            self.wait_for_waiting_consumer("src")
            self.publish("src", path)
            self.assertEqual(bridge_in.wait(timeout=HANG), 0)
            self.assertEqual(bridge_out.wait(timeout=HANG), 0)
            self.assertEqual(local.wait(timeout=HANG), 0)
            _, got = read_stream(out)
            self.assertEqual(len(got), len(expected))
            for a, b in zip(got, expected):
                self.assertTrue(a.equals(b))
        finally:
            broker_b.stop()
            self.assertEqual(broker_b.segments(), [])


TOKENS = {"tokens": [{"token": "reader-token", "read": ["a"]},
                     {"token": "writer-token", "read": ["b"], "write": ["b"]},
                     {"token": "all-token", "read": ["*"], "write": ["*"]}]}


def bearer(token):
    return fl.FlightCallOptions(headers=[(b"authorization", b"Bearer " + token.encode())])


class PingAuth(fl.ClientAuthHandler):
    """A Handshake of one request and its answer; the token travels in the
    call's authorization header."""

    def authenticate(self, outgoing, incoming):
        outgoing.write(b"ping")
        incoming.read()

    def get_token(self):
        return b""


class TokenTest(FlightTestCase):
    def server_args_for(self, tmp):
        path = os.path.join(tmp, "tokens.json")
        with open(path, "w") as f:
            json.dump(TOKENS, f)
        return ("--tokens", path)

    def test_refusals(self):
        path = os.path.join(GOLD, "generated_primitive.stream")
        self.publish("a", path)
        self.publish("b", path)
        # No token, a wrong token: UNAUTHENTICATED on every call.
        for options in (None, bearer("wrong"), fl.FlightCallOptions(
                headers=[(b"authorization", b"reader-token")])):
            with self.assertRaises(fl.FlightUnauthenticatedError):
                list(self.client.list_flights(options=options))
            # (pyarrow 21's get_schema raises a plain OSError for it.)
            with self.assertRaisesRegex(OSError, "unauthenticated"):
                self.client.get_schema(fl.FlightDescriptor.for_path("a"), options)
            with self.assertRaises(fl.FlightUnauthenticatedError):
                self.client.do_get(fl.Ticket(b"live/a"), options).read_all()
        # A token lists only what it may read.
        names = [i.descriptor.path[0] for i in self.client.list_flights(options=bearer("reader-token"))]
        self.assertEqual(names, [b"a"])
        # Forbidden topic: PERMISSION_DENIED.
        with self.assertRaises(fl.FlightUnauthorizedError):
            self.client.get_flight_info(fl.FlightDescriptor.for_path("b"), bearer("reader-token"))
        with self.assertRaises(fl.FlightUnauthorizedError):
            self.client.do_get(fl.Ticket(b"oldest/b"), bearer("reader-token")).read_all()
        # Writing: refused, and nothing published (the topic is not created).
        table = pa.table({"x": pa.array([1, 2, 3])})
        for token, code in (("reader-token", fl.FlightUnauthorizedError),
                            ("wrong", fl.FlightUnauthenticatedError)):
            with self.assertRaises(code):
                writer, _ = self.client.do_put(fl.FlightDescriptor.for_path("c"), table.schema,
                                               bearer(token))
                writer.write_table(table)
                writer.close()
        self.assertNotIn("c", self.broker.topics()[0])
        # Allowed: writer-token writes b2? no: only "b"; all-token writes "c".
        writer, _ = self.client.do_put(fl.FlightDescriptor.for_path("c"), table.schema,
                                       bearer("all-token"))
        writer.write_table(table)
        writer.close()
        self.assertEqual(self.broker.topics()[0]["c"][2], 1)

    def test_each_call_checks_its_own_permission(self):
        path = os.path.join(GOLD, "generated_primitive.stream")
        self.publish("a", path)
        self.publish("b", path)
        published_a = self.broker.topics()[0]["a"][2]
        # DoPut checks write permission: reader-token may read "a", not write it.
        table = pa.table({"x": pa.array([1, 2, 3])})
        with self.assertRaisesRegex(fl.FlightUnauthorizedError, "may not write topic 'a'"):
            writer, _ = self.client.do_put(fl.FlightDescriptor.for_path("a"), table.schema,
                                           bearer("reader-token"))
            writer.write_table(table)
            writer.close()
        self.assertEqual(self.broker.topics()[0]["a"][2], published_a)
        # writer-token may read and write "b", not read "a": GetSchema, every
        # ticket kind and GetFlightInfo on "a" are refused with a valid token.
        with self.assertRaisesRegex(Exception, "may not read topic 'a'"):
            self.client.get_schema(fl.FlightDescriptor.for_path("a"), bearer("writer-token"))
        for ticket in (b"live/a", b"oldest/a"):
            with self.assertRaisesRegex(fl.FlightUnauthorizedError, "may not read topic 'a'"):
                self.client.do_get(fl.Ticket(ticket), bearer("writer-token")).read_all()
        with self.assertRaisesRegex(fl.FlightUnauthorizedError, "may not read topic 'a'"):
            self.client.get_flight_info(fl.FlightDescriptor.for_path("a"), bearer("writer-token"))
        # The same calls on the topic it may read are answered.
        schema = self.client.get_schema(fl.FlightDescriptor.for_path("b"),
                                        bearer("writer-token")).schema
        self.assertEqual(schema, read_stream(path)[0])
        # Handshake: a wrong token is refused, a valid one answered.
        with self.assertRaises(fl.FlightUnauthenticatedError):
            self.client.authenticate(PingAuth(), options=bearer("wrong"))
        with self.assertRaises(fl.FlightUnauthenticatedError):
            self.client.authenticate(PingAuth(), options=None)
        self.client.authenticate(PingAuth(), options=bearer("reader-token"))

    def test_a_refused_put_is_refused_at_its_first_message(self):
        # reader-token may not write "a": the server refuses after the first
        # message (schema + descriptor) and reads nothing more, so of 256
        # batches of 1 MiB the client gets only as far as gRPC's buffers and
        # flow-control window take it (a server that read the stream before
        # deciding would take all 256 MiB).
        self.publish("a", os.path.join(GOLD, "generated_primitive.stream"))
        big = pa.record_batch([pa.array(range(128 * 1024), type=pa.int64())], names=["x"])
        writer, _ = self.client.do_put(fl.FlightDescriptor.for_path("a"), big.schema,
                                       bearer("reader-token"))
        written = 0
        try:
            for _ in range(256):
                writer.write_batch(big)
                written += 1
        except Exception:  # the call ended: the status comes with close()
            pass
        with self.assertRaisesRegex(fl.FlightUnauthorizedError, "may not write topic 'a'"):
            writer.close()
        self.assertLess(written, 64, "the server read a refused DoPut's stream")

    def test_cpp_client_sends_the_token(self):
        path = os.path.join(GOLD, "generated_primitive.stream")
        env = dict(os.environ, ALKAID_FLIGHT_TOKEN="wrong")
        r = subprocess.run([ALKAID, "publish", f"{self.server.location}/b", path], env=env,
                           capture_output=True, text=True, timeout=HANG)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("UNAUTHENTICATED", r.stderr)
        env["ALKAID_FLIGHT_TOKEN"] = "writer-token"
        r = subprocess.run([ALKAID, "publish", f"{self.server.location}/b", path], env=env,
                           capture_output=True, text=True, timeout=HANG)
        self.assertEqual(r.returncode, 0, r.stderr)


class ListenRuleTest(unittest.TestCase):
    def test_non_loopback_without_tokens_is_refused(self):
        broker = Broker()
        try:
            for listen in ("0.0.0.0:0", "[::]:0", "192.0.2.1:0"):
                r = subprocess.run([FLIGHT, "--socket", broker.socket, "--listen", listen],
                                   capture_output=True, text=True, timeout=HANG)
                self.assertEqual(r.returncode, 1, listen)
                self.assertIn("without a token file", r.stderr)
        finally:
            broker.stop()


class TlsTest(FlightTestCase):
    def server_args_for(self, tmp):
        self.cert = os.path.join(tmp, "cert.pem")
        key = os.path.join(tmp, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=localhost", "-addext",
                        "subjectAltName=DNS:localhost,IP:127.0.0.1",
                        "-keyout", key, "-out", self.cert], check=True, capture_output=True)
        return ("--tls-cert", self.cert, "--tls-key", key)

    def setUp(self):
        super().setUp()
        self.client.close()
        with open(self.cert, "rb") as f:
            roots = f.read()
        self.client = fl.connect(f"grpc+tls://localhost:{self.server.port}",
                                 tls_root_certs=roots)

    def test_tls(self):
        path = os.path.join(GOLD, "generated_primitive.stream")
        _, expected = read_stream(path)
        get = DoGetThread(self.client, b"live/t")
        get.start()
        self.wait_for_waiting_consumer("t")
        self.publish("t", path)
        _, got = get.result()
        self.assertEqual(len(got), len(expected))
        # A plaintext client gets no answer from the TLS port.
        plain = fl.connect(f"grpc://127.0.0.1:{self.server.port}")
        with self.assertRaises(fl.FlightError):
            list(plain.list_flights(options=fl.FlightCallOptions(timeout=10)))
        plain.close()
        # A client that does not trust the certificate is refused.
        untrusting = fl.connect(f"grpc+tls://localhost:{self.server.port}")
        with self.assertRaises(fl.FlightError):
            list(untrusting.list_flights(options=fl.FlightCallOptions(timeout=10)))
        untrusting.close()
        # Our client over TLS, reading a second topic live; through the IP
        # address, the certificate's name given (no DNS lookup: gRPC's c-ares
        # resolver leaks 10 bytes per lookup, which LeakSanitizer reports in
        # the asan-ubsan build).
        env = dict(os.environ, ALKAID_FLIGHT_TLS_ROOTS=self.cert,
                   ALKAID_FLIGHT_TLS_SERVER_NAME="localhost")
        out = os.path.join(self.tmp.name, "t2.arrows")
        sub = subprocess.Popen([ALKAID, "subscribe", f"grpc+tls://127.0.0.1:{self.server.port}/t2",
                                "--out", out], env=env)
        self.wait_for_waiting_consumer("t2")
        self.publish("t2", path)
        self.assertEqual(sub.wait(timeout=HANG), 0)
        self.assertEqual(len(read_stream(out)[1]), len(expected))
        # Our client without the roots: refused.
        r = subprocess.run([ALKAID, "subscribe", f"grpc+tls://127.0.0.1:{self.server.port}/t2"],
                           env=dict(os.environ, ALKAID_FLIGHT_TLS_SERVER_NAME="localhost"),
                           capture_output=True, text=True, timeout=HANG)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("UNAVAILABLE", r.stderr)


class TlsTokenTest(FlightTestCase):
    """--tls-cert/--tls-key and --tokens together: the tokens are checked on
    the TLS connection as on a plaintext one."""

    def server_args_for(self, tmp):
        self.cert = os.path.join(tmp, "cert.pem")
        key = os.path.join(tmp, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=localhost", "-addext",
                        "subjectAltName=DNS:localhost,IP:127.0.0.1",
                        "-keyout", key, "-out", self.cert], check=True, capture_output=True)
        path = os.path.join(tmp, "tokens.json")
        with open(path, "w") as f:
            json.dump(TOKENS, f)
        return ("--tls-cert", self.cert, "--tls-key", key, "--tokens", path)

    def setUp(self):
        super().setUp()
        self.client.close()
        with open(self.cert, "rb") as f:
            roots = f.read()
        self.client = fl.connect(f"grpc+tls://localhost:{self.server.port}",
                                 tls_root_certs=roots)

    def test_tokens_over_tls(self):
        path = os.path.join(GOLD, "generated_primitive.stream")
        _, expected = read_stream(path)
        # A valid token reads live over TLS.
        get = DoGetThread(self.client, b"live/a", bearer("reader-token"))
        get.start()
        self.wait_for_waiting_consumer("a")
        self.publish("a", path)
        _, got = get.result()
        self.assertEqual(len(got), len(expected))
        self.publish("b", path)
        # No token or a wrong one: refused over TLS too.
        for options in (None, bearer("wrong")):
            with self.assertRaises(fl.FlightUnauthenticatedError):
                list(self.client.list_flights(options=options))
            with self.assertRaises(fl.FlightUnauthenticatedError):
                self.client.do_get(fl.Ticket(b"oldest/a"), options).read_all()
            with self.assertRaises(fl.FlightUnauthenticatedError):
                self.client.authenticate(PingAuth(), options=options)
        # A token sees what it may read, and nothing else.
        names = [i.descriptor.path[0]
                 for i in self.client.list_flights(options=bearer("reader-token"))]
        self.assertEqual(names, [b"a"])
        with self.assertRaises(fl.FlightUnauthorizedError):
            self.client.do_get(fl.Ticket(b"oldest/b"), bearer("reader-token")).read_all()
        table = pa.table({"x": pa.array([1, 2, 3])})
        with self.assertRaises(fl.FlightUnauthorizedError):
            writer, _ = self.client.do_put(fl.FlightDescriptor.for_path("a"), table.schema,
                                           bearer("reader-token"))
            writer.write_table(table)
            writer.close()
        writer, _ = self.client.do_put(fl.FlightDescriptor.for_path("c"), table.schema,
                                       bearer("all-token"))
        writer.write_table(table)
        writer.close()
        self.assertEqual(self.broker.topics()[0]["c"][2], 1)
        # The valid token on a plaintext connection to the TLS port: no answer.
        plain = fl.connect(f"grpc://127.0.0.1:{self.server.port}")
        with self.assertRaises(fl.FlightError):
            list(plain.list_flights(options=fl.FlightCallOptions(
                timeout=10, headers=[(b"authorization", b"Bearer all-token")])))
        plain.close()
        # Our client: the token from ALKAID_FLIGHT_TOKEN, over TLS.
        env = dict(os.environ, ALKAID_FLIGHT_TLS_ROOTS=self.cert,
                   ALKAID_FLIGHT_TLS_SERVER_NAME="localhost", ALKAID_FLIGHT_TOKEN="wrong")
        url = f"grpc+tls://127.0.0.1:{self.server.port}/b"
        r = subprocess.run([ALKAID, "publish", url, path], env=env, capture_output=True,
                           text=True, timeout=HANG)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("UNAUTHENTICATED", r.stderr)
        env["ALKAID_FLIGHT_TOKEN"] = "writer-token"
        r = subprocess.run([ALKAID, "publish", url, path], env=env, capture_output=True,
                           text=True, timeout=HANG)
        self.assertEqual(r.returncode, 0, r.stderr)


class FaultTest(FlightTestCase):
    def feeder(self, topic, path):
        """`alkaid publish TOPIC -` fed the stream's bytes but not its end."""
        proc = subprocess.Popen([ALKAID, "publish", topic, "-", "--socket", self.broker.socket],
                                stdin=subprocess.PIPE)
        with open(path, "rb") as f:
            proc.stdin.write(f.read()[:-8])
        proc.stdin.flush()
        return proc

    def test_client_killed_mid_stream_frees_its_consumer(self):
        path = os.path.join(GOLD, "generated_primitive.stream")
        feeder = self.feeder("k", path)
        wait_for(lambda: "k" in self.broker.topics()[0], "the topic")
        script = ("import sys, pyarrow.flight as fl\n"
                  f"r = fl.connect('{self.server.location}').do_get(fl.Ticket(b'oldest/k'))\n"
                  "r.read_chunk(); print('reading', flush=True); sys.stdin.read()\n")
        client = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.assertEqual(client.stdout.readline().strip(), "reading")
        self.assertEqual(self.broker.topics()[0]["k"][1], 1)
        client.kill()
        client.wait(timeout=HANG)
        wait_for(lambda: self.broker.topics()[0]["k"][1] == 0,
                 "the killed client's consumer to be freed")
        feeder.stdin.close()
        self.assertEqual(feeder.wait(timeout=HANG), 0)

    def test_producer_killed_mid_stream_ends_the_client(self):
        path = os.path.join(GOLD, "generated_primitive.stream")
        feeder = self.feeder("p", path)
        wait_for(lambda: "p" in self.broker.topics()[0], "the topic")
        # The first batch read: the server's consumer reads this producer.
        # (A consumer whose producer dies before it saw it waits for the
        # next producer of the topic: docs/CLIENT.md, Consumer.)
        reader = self.client.do_get(fl.Ticket(b"oldest/p"))
        reader.read_chunk()
        feeder.kill()
        feeder.wait(timeout=HANG)
        feeder.stdin.close()
        # End of stream (or an error), never a hang.
        rest = threading.Thread(target=lambda: [c for c in reader], daemon=True)
        rest.start()
        rest.join(HANG)
        self.assertFalse(rest.is_alive(), "do_get hangs after its producer died")

    def test_broker_restarted(self):
        path = os.path.join(GOLD, "generated_primitive.stream")
        _, expected = read_stream(path)
        self.broker.stop(signal.SIGKILL)
        self.broker.start()
        # The server needs no restart: each call talks to the broker anew.
        get = DoGetThread(self.client, b"live/r")
        get.start()
        self.wait_for_waiting_consumer("r")
        self.publish("r", path)
        _, got = get.result()
        self.assertEqual(len(got), len(expected))

    def test_do_get_across_a_broker_restart(self):
        # A live DoGet streaming while the broker is killed and restarted:
        # the data path does not involve the broker, the producer and the
        # server's consumer re-register, and the stream goes on to its end.
        schema = pa.schema([("n", pa.int64())])
        batches = [pa.record_batch([pa.array([i] * 10, pa.int64())], schema=schema)
                   for i in range(6)]
        sink = io.BytesIO()
        stream = pa.ipc.new_stream(sink, schema)
        pieces, taken = [], 0
        for b in batches:
            stream.write_batch(b)
            pieces.append(sink.getvalue()[taken:])
            taken = len(sink.getvalue())
        stream.close()
        end = sink.getvalue()[taken:]
        feeder = subprocess.Popen([ALKAID, "publish", "br", "-", "--socket", self.broker.socket],
                                  stdin=subprocess.PIPE)
        feeder.stdin.write(pieces[0])
        feeder.stdin.flush()
        wait_for(lambda: self.broker.topics()[0].get("br", (0, 0, 0))[2] == 1, "batch 0")
        reader = self.client.do_get(fl.Ticket(b"oldest/br"))
        got = [reader.read_chunk().data]
        self.broker.stop(signal.SIGKILL)
        # Published while the broker is down: reaches the client all the same.
        for piece in pieces[1:3]:
            feeder.stdin.write(piece)
        feeder.stdin.flush()
        got += [reader.read_chunk().data for _ in range(2)]
        self.broker.start()
        # Both re-registered with the new broker: it lists the topic with
        # its producer and the server's consumer.
        wait_for(lambda: self.broker.topics()[0].get("br", (0, 0, 0))[:2] == (1, 1),
                 "the producer and the consumer to re-register")
        for piece in pieces[3:]:
            feeder.stdin.write(piece)
        feeder.stdin.write(end)
        feeder.stdin.close()
        self.assertEqual(feeder.wait(timeout=HANG), 0)
        rest = DoGetRest(reader)
        got += rest.result()
        self.assertEqual(len(got), len(batches))
        for a, b in zip(got, batches):
            self.assertTrue(a.equals(b))

    def test_a_waiting_do_get_whose_client_goes_away_stops_waiting(self):
        # A DoGet for a topic that does not exist yet waits for it; the
        # client killed, the server's wait is cancelled (ConsumerOptions::
        # stop) and the broker forgets the waiting consumer.
        # (do_get returns once the schema came, i.e. never here.)
        script = ("import pyarrow.flight as fl\n"
                  f"fl.connect('{self.server.location}').do_get(fl.Ticket(b'live/never'))\n")
        client = subprocess.Popen([sys.executable, "-c", script])
        self.wait_for_waiting_consumer("never")
        client.kill()
        client.wait(timeout=HANG)
        wait_for(lambda: "never" not in self.broker.topics()[1],
                 "the server to stop waiting for the topic")
        # The server goes on serving.
        self.assertEqual(list(self.client.list_flights()), [])

    def test_server_killed_mid_stream_ends_the_client_with_an_error(self):
        path = os.path.join(GOLD, "generated_primitive.stream")
        feeder = self.feeder("s", path)
        wait_for(lambda: "s" in self.broker.topics()[0], "the topic")
        get = DoGetThread(self.client, b"oldest/s")
        get.start()
        wait_for(lambda: self.broker.topics()[0]["s"][1] == 1, "the consumer")
        self.server.proc.kill()
        self.server.proc.wait(timeout=HANG)
        get.join(HANG)
        self.assertFalse(get.is_alive())
        self.assertIsInstance(get.error, fl.FlightError)
        # The server's consumer is gone with it (the broker notices the pid).
        wait_for(lambda: self.broker.topics()[0]["s"][1] == 0, "the dead server's consumer")
        feeder.stdin.close()
        feeder.wait(timeout=HANG)


if __name__ == "__main__":
    unittest.main(verbosity=2)
