"""Loopback Arrow Flight figures for docs/FLIGHT.md, in one run:

1. DoGet throughput, 1 MiB and 64 KiB batches (one int64 column), read by a
   pyarrow.flight client process:
   - alkaid: `alkaid publish` feeds a topic from a stream file (page cache);
     alkaid-flight serves it live (bodies sent from shared memory);
   - arrow: pyarrow's own FlightServerBase (Arrow C++'s Flight server)
     serving the same batches from memory (RecordBatchStream of a table).
   CPU per GB from /proc/<pid>/stat (utime + stime) deltas of each server
   process, of the producer (alkaid publish: it copies each batch into
   shared memory once) and of the client.
2. Latency of one batch published locally to a remote do_get client: a
   feeder writes a one-batch IPC message (its int64 column is the
   CLOCK_MONOTONIC nanoseconds at the write) into `alkaid publish TOPIC -`;
   the pyarrow client subtracts it from CLOCK_MONOTONIC when the batch is
   in its hands. Paced one batch per 2 ms; p50 / p99 / max.

Usage: flight_bench.py BUILD_DIR [--quick] [--rounds N] [--no-latency | --latency-only] [--spin-wait]
(BUILD_DIR: e.g. build/release). --quick (64 MiB per run, 50 latency
samples) is what ctest runs (flight_bench_smoke_test): it fails if any byte
or batch is missing. --rounds N measures each size N times, Alkaid then
Arrow each round, and prints each round's ratio (Alkaid's GB/s over
Arrow's) and the median ratio; the load average is printed before and after.
"""

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import pyarrow as pa
import pyarrow.flight as fl
import pyarrow.ipc

build = sys.argv[1]
quick = "--quick" in sys.argv
ROUNDS = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 1
LATENCY = "--no-latency" not in sys.argv
THROUGHPUT = "--latency-only" not in sys.argv
SERVER_ARGS = ["--spin-wait"] if "--spin-wait" in sys.argv else []  # alkaid-flight's option
BROKER = os.path.join(build, "broker/daemon/alkaid-broker")
ALKAID = os.path.join(build, "tools/alkaid/alkaid")
FLIGHT = os.path.join(build, "flight/alkaid-flight")
TOTAL = (64 << 20) if quick else (1 << 30)  # bytes per throughput run
LAT_SAMPLES = 50 if quick else 2000
CLK_TCK = os.sysconf("SC_CLK_TCK")

CLIENT = r"""
import os, sys, time
import pyarrow.flight as fl
client = fl.connect(sys.argv[1])
print("started", flush=True)
reader = client.do_get(fl.Ticket(sys.argv[2].encode()))  # returns with the schema
nbytes = 0
first = None
for chunk in reader:
    if first is None:
        first = time.monotonic()       # the clock starts at the first batch
        c0 = os.times()
        continue
    nbytes += chunk.data.nbytes
end = time.monotonic()
c1 = os.times()
print(nbytes, end - first, (c1.user + c1.system) - (c0.user + c0.system), flush=True)
"""

ARROW_SERVER = r"""
import sys
import pyarrow as pa, pyarrow.flight as fl
rows, count = int(sys.argv[1]), int(sys.argv[2])
batch = pa.record_batch([pa.array(range(rows), pa.int64())], names=["v"])
table = pa.Table.from_batches([batch] * count)
class Server(fl.FlightServerBase):
    def do_get(self, context, ticket):
        return fl.RecordBatchStream(table)
server = Server("grpc://127.0.0.1:0")
print(server.port, flush=True)
server.serve()
"""


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


class Alkaid:
    def __init__(self):
        self.name = f"flb{os.getpid()}"
        self.socket = f"/tmp/alkaid-bench-{self.name}.sock"
        self.broker = subprocess.Popen([BROKER, "--socket", self.socket, "--name", self.name,
                                        "--log-level", "warn"])
        while subprocess.run([ALKAID, "topics", "--socket", self.socket],
                             capture_output=True).returncode != 0:
            time.sleep(0.01)
        self.server = subprocess.Popen([FLIGHT, "--socket", self.socket, "--listen",
                                        "127.0.0.1:0", *SERVER_ARGS], stdout=subprocess.PIPE,
                                       text=True)
        self.port = int(self.server.stdout.readline().rsplit(" ", 1)[1])

    def waiting(self, topic):
        # A consumer (the flight server's do_get) waits for the topic. Read
        # from the JSON document: the table's rows end with a blank line and
        # the shared-memory line, and it has no awaited row at all until the
        # do_get reaches the broker.
        out = subprocess.run([ALKAID, "topics", "--json", "--socket", self.socket],
                             capture_output=True, text=True, check=True).stdout
        return any(a["name"] == topic for a in json.loads(out)["awaited"])

    def close(self):
        for p in (self.server, self.broker):
            p.send_signal(signal.SIGTERM)
            p.wait()


def start_client(location, ticket):
    proc = subprocess.Popen([sys.executable, "-c", CLIENT, location, ticket],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "started"
    return proc


def finish_client(proc):
    nbytes, seconds, cpu = proc.stdout.readline().split()
    proc.wait()
    return int(nbytes), float(seconds), float(cpu)


def check_received(side, nbytes, expected):
    # Every batch after the first (which starts the clock) arrived.
    if nbytes != expected:
        sys.exit(f"{side}: the client received {nbytes} bytes, not {expected}")


def report(side, size, nbytes, seconds, server_cpu, client_cpu, producer_cpu=None):
    gb = nbytes / 1e9
    line = (f"{side:6} {size:>7}  {nbytes / seconds / 1e9:6.2f} GB/s   "
            f"server {server_cpu / gb:6.3f} CPU-s/GB   client {client_cpu / gb:6.3f} CPU-s/GB")
    if producer_cpu is not None:
        line += f"   producer {producer_cpu / gb:6.3f} CPU-s/GB"
    print(line, flush=True)


def throughput(alkaid, tmp, size_name, rows, round_index=0):
    batch = pa.record_batch([pa.array(range(rows), pa.int64())], names=["v"])
    count = max(4, TOTAL // batch.nbytes) + 1  # +1: the first batch starts the clock
    # Alkaid: a stream file of `count` batches, published as fast as it goes.
    path = os.path.join(tmp, f"{size_name}.arrows")
    with pa.OSFile(path, "wb") as f, pa.ipc.new_stream(f, batch.schema) as w:
        for _ in range(count):
            w.write_batch(batch)
    topic = f"tp{size_name}r{round_index}"  # a new topic each round: the client waits for it
    client = start_client(f"grpc://127.0.0.1:{alkaid.port}", f"live/{topic}")
    while not alkaid.waiting(topic):
        time.sleep(0.01)
    s0 = cpu_seconds(alkaid.server.pid)
    publisher = subprocess.Popen([ALKAID, "publish", topic, path, "--socket", alkaid.socket])
    nbytes, seconds, client_cpu = finish_client(client)
    s1 = cpu_seconds(alkaid.server.pid)
    # The producer's CPU: its whole life (reading the file, one copy per batch).
    _, status, usage = os.wait4(publisher.pid, 0)
    publisher.returncode = os.waitstatus_to_exitcode(status)
    if publisher.returncode != 0:
        sys.exit(f"alkaid publish exited with {publisher.returncode}")
    check_received("alkaid", nbytes, (count - 1) * batch.nbytes)
    report("alkaid", size_name, nbytes, seconds, s1 - s0, client_cpu,
           usage.ru_utime + usage.ru_stime)
    alkaid_rate = nbytes / seconds
    # Arrow C++'s server (pyarrow FlightServerBase), the same batches in memory.
    server = subprocess.Popen([sys.executable, "-c", ARROW_SERVER, str(rows), str(count)],
                              stdout=subprocess.PIPE, text=True)
    port = int(server.stdout.readline())
    s0 = cpu_seconds(server.pid)
    client = start_client(f"grpc://127.0.0.1:{port}", "x")
    nbytes, seconds, client_cpu = finish_client(client)
    s1 = cpu_seconds(server.pid)
    check_received("arrow", nbytes, (count - 1) * batch.nbytes)
    report("arrow", size_name, nbytes, seconds, s1 - s0, client_cpu)
    server.send_signal(signal.SIGTERM)
    server.wait()
    os.unlink(path)
    ratio = alkaid_rate / (nbytes / seconds)
    print(f"ratio  {size_name:>7}  {ratio:.2f}x  (alkaid / arrow)", flush=True)
    return ratio


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def latency(alkaid):
    topic = "lat"
    schema = pa.schema([("t", pa.int64())])
    got = []
    done = threading.Event()
    ready = threading.Event()

    def read():
        client = fl.connect(f"grpc://127.0.0.1:{alkaid.port}")
        ready.set()
        reader = client.do_get(fl.Ticket(b"live/" + topic.encode()))  # returns with the schema
        for chunk in reader:
            got.append(time.monotonic_ns() - chunk.data.column(0)[0].as_py())
        done.set()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    ready.wait()
    while not alkaid.waiting(topic):
        time.sleep(0.01)
    publisher = subprocess.Popen([ALKAID, "publish", topic, "-", "--socket", alkaid.socket],
                                 stdin=subprocess.PIPE)
    publisher.stdin.write(schema.serialize().to_pybytes())  # the schema message
    publisher.stdin.flush()
    # One encapsulated record batch message; its body is the one int64 value
    # (no validity bitmap), i.e. its last 8 bytes.
    message = bytearray(pa.record_batch([pa.array([0], pa.int64())], schema=schema)
                        .serialize().to_pybytes())
    assert message[-8:] == bytes(8)
    for _ in range(LAT_SAMPLES):
        message[-8:] = time.monotonic_ns().to_bytes(8, "little")
        publisher.stdin.write(message)
        publisher.stdin.flush()
        time.sleep(0.002)
    publisher.stdin.close()
    publisher.wait()
    done.wait(60)
    if len(got) != LAT_SAMPLES:
        sys.exit(f"latency: {len(got)} of {LAT_SAMPLES} batches arrived")
    got_us = sorted(g / 1000 for g in got[10:])  # the first ones warm up
    q = statistics.quantiles(got_us, n=100, method="inclusive")
    print(f"latency  1-row batch, local publish -> remote do_get (n={len(got_us)}): "
          f"p50 {q[49]:.1f} us   p99 {q[98]:.1f} us   max {got_us[-1]:.1f} us", flush=True)


def main():
    alkaid = Alkaid()
    print(f"load average {loadavg()} (start); alkaid-flight pid {alkaid.server.pid}", flush=True)
    try:
        with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as tmp:
            ratios = {}
            for round_index in range(ROUNDS if THROUGHPUT else 0):
                for size_name, rows in (("1MiB", 131072), ("64KiB", 8192)):
                    ratios.setdefault(size_name, []).append(
                        throughput(alkaid, tmp, size_name, rows, round_index))
            if ROUNDS > 1:
                for size_name, r in ratios.items():
                    print(f"ratio  {size_name:>7}  median {statistics.median(r):.2f}x of "
                          f"{len(r)} rounds: {' '.join(f'{x:.2f}' for x in r)}", flush=True)
        if LATENCY:
            latency(alkaid)
    finally:
        alkaid.close()
    print(f"load average {loadavg()} (end)", flush=True)


main()
