"""Python figures of Alkaid, beside the C++ ones of the same run.

    bench/python/run.sh                      # everything below, with the build tree's module
    python alkaid_bench.py pingpong --mode spin|block|asyncio [--count N] [--rows 64]
    python alkaid_bench.py rate [--count N] [--rows 64]
    python alkaid_bench.py handoff [--rows 1000,1000000]
    python alkaid_bench.py loop --scenario loan|publish [--count N] [--rows 64]

pingpong: two processes, Python to Python: A publishes a batch of `rows` rows
(int64 + float64: 16 bytes a row) on topic ping, B receives it and answers
with a batch of the same shape on pong; one-way latency = round trip / 2.
Both sides write their batch into a loan (numpy views over shared memory:
no copy) and receive zero-copy. Waits as --mode says (consumer wait_mode), or
with --mode asyncio both sides await each batch on an asyncio loop (`async
for`'s step: the loop sleeps on the consumer's descriptor, which the
producer's publish sounds, where block mode sleeps on the futex).

rate: A publishes `count` batches as fast as it can, B receives them;
batches per second at A and at B, for Producer.publish(pyarrow batch) (one
copy) and for loans; and per second of the publishing (receiving) thread's
CPU time (time.thread_time_ns), which the machine's other load changes
less than the wall-clock rate. The receiver waits in spin-then-block
mode: a receiver that spins shows in its CPU time. Each side's context
switches over its run (getrusage of the thread): voluntary ones are
waits (the publisher's for room, the receiver's sleeps), involuntary ones
preemptions by whatever else runs: where the wall-clock rate falls short
of the CPU-time rate, they say which.

handoff: the cost of handing a received batch to pyarrow
(pa.record_batch(batch)) and to polars (pl.DataFrame(batch)) by row count:
neither copies, so it must not grow with the rows.

loop: one process, a producer and a consumer of one topic: `count` times
send a batch (a loan filled as pingpong does, or publish(pyarrow batch))
and receive it. Untimed: percall.sh runs it under callgrind to count the
instructions each call costs.

Everything runs against a private broker (alkaid.Broker) unless --socket is
given. Figures are medians and 99th percentiles of per-sample times
(time.perf_counter_ns)."""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa

import alkaid

SCHEMA = pa.schema([("seq", pa.int64()), ("value", pa.float64())])


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def send_loan(producer: alkaid.Producer, rows: int, seq: int) -> None:
    with producer.loan(rows) as loan:
        loan["seq"][0] = seq
        loan["value"][:rows] = 0.5


# --- pingpong ---------------------------------------------------------------

def consumer_wait_mode(mode: str) -> str:
    """The Consumer's wait_mode for --mode (asyncio: the loop sleeps on the
    consumer's descriptor; its own waits are not used)."""
    return "block" if mode == "asyncio" else mode


def echo(args: argparse.Namespace) -> None:
    """Side B: receives on ping, answers on pong, `count + warmup` times."""
    with alkaid.Consumer("ping", socket=args.socket, wait_for_topic=60,
                         wait_mode=consumer_wait_mode(args.mode)) as ping, \
            alkaid.Producer("pong", SCHEMA, socket=args.socket) as pong:
        def answer(batch) -> None:
            seq = int(batch.to_pyarrow().column(0)[0].as_py()) if args.check else 0
            del batch
            send_loan(pong, args.rows, seq)

        if args.mode == "asyncio":
            async def run() -> None:
                for _ in range(args.count + args.warmup):
                    answer(await ping.__anext__())
            asyncio.run(run())
        else:
            for _ in range(args.count + args.warmup):
                answer(ping.next(timeout=60))


def pingpong(args: argparse.Namespace) -> dict:
    child = subprocess.Popen([sys.executable, __file__, "echo", "--socket", args.socket,
                              "--mode", args.mode, "--count", str(args.count),
                              "--warmup", str(args.warmup), "--rows", str(args.rows)])
    try:
        with alkaid.Producer("ping", SCHEMA, socket=args.socket) as ping, \
                alkaid.Consumer("pong", socket=args.socket, wait_for_topic=60,
                                wait_mode=consumer_wait_mode(args.mode)) as pong:
            samples = []
            if args.mode == "asyncio":
                async def run() -> None:
                    for i in range(args.count + args.warmup):
                        start = time.perf_counter_ns()
                        send_loan(ping, args.rows, i)
                        reply = await pong.__anext__()
                        end = time.perf_counter_ns()
                        del reply
                        if i >= args.warmup:
                            samples.append((end - start) / 2 / 1000.0)
                asyncio.run(asyncio.wait_for(run(), 600))
            else:
                for i in range(args.count + args.warmup):
                    start = time.perf_counter_ns()
                    send_loan(ping, args.rows, i)
                    reply = pong.next(timeout=60)
                    end = time.perf_counter_ns()
                    del reply
                    if i >= args.warmup:
                        samples.append((end - start) / 2 / 1000.0)
        if child.wait(timeout=60) != 0:
            raise RuntimeError("echo process failed")
    finally:
        if child.poll() is None:
            child.kill()
    return {"what": f"alkaid python pingpong {args.mode}", "rows": args.rows,
            "bytes": args.rows * 16, "samples": len(samples),
            "one_way_us_p50": statistics.median(samples),
            "one_way_us_p99": percentile(samples, 0.99)}


# --- rate -------------------------------------------------------------------

def sink(args: argparse.Namespace) -> None:
    """Side B of rate: receives count batches, then reports on topic done."""
    with alkaid.Consumer("bulk", socket=args.socket, wait_for_topic=60) as bulk:
        first = bulk.next(timeout=60)
        usage_start = resource.getrusage(resource.RUSAGE_THREAD)
        start = time.perf_counter_ns()
        cpu_start = time.thread_time_ns()
        del first
        for _ in range(args.count - 1):
            bulk.next(timeout=60)
        elapsed = time.perf_counter_ns() - start
        cpu = time.thread_time_ns() - cpu_start
        usage = resource.getrusage(resource.RUSAGE_THREAD)
    print(json.dumps({"batches_per_s": (args.count - 1) / (elapsed / 1e9),
                      "batches_per_cpu_s": (args.count - 1) / (cpu / 1e9),
                      "waits": usage.ru_nvcsw - usage_start.ru_nvcsw,
                      "preempted": usage.ru_nivcsw - usage_start.ru_nivcsw}), flush=True)


def rate(args: argparse.Namespace, how: str) -> dict:
    child = subprocess.Popen([sys.executable, __file__, "sink", "--socket", args.socket,
                              "--count", str(args.count)], stdout=subprocess.PIPE, text=True)
    try:
        # Waits (wait_for_consumers) for the sink, which waits for the topic.
        deadline = time.monotonic() + 60
        while "bulk" not in alkaid.awaited_topics(args.socket):
            if time.monotonic() > deadline:
                raise RuntimeError("the sink never subscribed")
            time.sleep(0.001)
        ids = np.arange(args.rows, dtype=np.int64)
        batch = pa.record_batch([pa.array(ids), pa.array(ids * 0.5)], schema=SCHEMA)
        with alkaid.Producer("bulk", SCHEMA, socket=args.socket) as producer:
            usage_start = resource.getrusage(resource.RUSAGE_THREAD)
            start = time.perf_counter_ns()
            cpu_start = time.thread_time_ns()
            for i in range(args.count):
                if how == "publish":
                    producer.publish(batch)
                else:
                    send_loan(producer, args.rows, i)
            publish_s = (time.perf_counter_ns() - start) / 1e9
            publish_cpu_s = (time.thread_time_ns() - cpu_start) / 1e9
            usage = resource.getrusage(resource.RUSAGE_THREAD)
        out, _ = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    received = json.loads(out.strip().splitlines()[-1])
    return {"what": f"alkaid python rate ({how})", "rows": args.rows, "batches": args.count,
            "published_per_s": args.count / publish_s,
            "received_per_s": received["batches_per_s"],
            "published_per_cpu_s": args.count / publish_cpu_s,
            "received_per_cpu_s": received["batches_per_cpu_s"],
            "published_waits": usage.ru_nvcsw - usage_start.ru_nvcsw,
            "published_preempted": usage.ru_nivcsw - usage_start.ru_nivcsw,
            "received_waits": received["waits"], "received_preempted": received["preempted"]}


# --- loop -------------------------------------------------------------------

def loop(args: argparse.Namespace) -> None:
    with alkaid.Producer("loop", SCHEMA, socket=args.socket) as producer, \
            alkaid.Consumer("loop", socket=args.socket, wait_mode="spin") as consumer:
        ids = np.arange(args.rows, dtype=np.int64)
        batch = pa.record_batch([pa.array(ids), pa.array(ids * 0.5)], schema=SCHEMA)
        for i in range(200):  # every lazy first-time cost paid before counting
            send_loan(producer, args.rows, i)
            producer.publish(batch)
            consumer.next(timeout=60)
            consumer.next(timeout=60)
        if args.scenario == "loan":
            for i in range(args.count):
                send_loan(producer, args.rows, i)
                received = consumer.next(timeout=60)
                del received
        else:
            for _ in range(args.count):
                producer.publish(batch)
                received = consumer.next(timeout=60)
                del received


# --- handoff ----------------------------------------------------------------

def handoff(args: argparse.Namespace) -> list[dict]:
    import polars as pl

    results = []
    for rows in (int(r) for r in args.rows_list.split(",")):
        with alkaid.Producer(f"h{rows}", SCHEMA, socket=args.socket,
                             arena_bytes=max(64 << 20, rows * 64)) as producer, \
                alkaid.Consumer(f"h{rows}", socket=args.socket) as consumer:
            ids = np.arange(rows, dtype=np.int64)
            producer.publish(pa.record_batch([pa.array(ids), pa.array(ids * 0.5)], schema=SCHEMA))
            batch = consumer.next(timeout=60)
            for name, convert in (("pyarrow", pa.record_batch), ("polars", pl.DataFrame)):
                samples = []
                for _ in range(args.count):
                    start = time.perf_counter_ns()
                    converted = convert(batch)
                    end = time.perf_counter_ns()
                    del converted
                    samples.append((end - start) / 1000.0)
                results.append({"what": f"handoff to {name}", "rows": rows,
                                "us_p50": statistics.median(samples),
                                "us_p99": percentile(samples, 0.99)})
            del batch
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["pingpong", "rate", "handoff", "loop", "echo", "sink"])
    parser.add_argument("--socket", default=None)
    parser.add_argument("--mode", default="spin",
                        choices=["spin", "block", "spin-then-block", "asyncio"])
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--rows-list", default="1000,1000000")
    parser.add_argument("--how", default="publish", choices=["publish", "loan"])
    parser.add_argument("--scenario", default="loan", choices=["loan", "publish"])
    parser.add_argument("--check", action="store_true", help="echo: read the sequence number")
    args = parser.parse_args()
    if args.command == "echo":
        return echo(args)
    if args.command == "sink":
        return sink(args)
    broker = None
    if args.socket is None:
        broker = alkaid.Broker().start()
        args.socket = broker.socket
    try:
        if args.command == "pingpong":
            print(json.dumps(pingpong(args)))
        elif args.command == "rate":
            print(json.dumps(rate(args, args.how)))
        elif args.command == "loop":
            loop(args)
        elif args.command == "handoff":
            for r in handoff(args):
                print(json.dumps(r))
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
