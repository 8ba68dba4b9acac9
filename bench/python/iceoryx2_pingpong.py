"""The iceoryx2 Python package's own publish-subscribe, as a ping-pong peer
of bench/python/alkaid_bench.py pingpong: a payload of the same size (a
ctypes struct of rows * 16 bytes, the bytes of Alkaid's 64-row batch of an
int64 and a float64 column), loaned, written and sent by one process,
received by the other and answered the same way; one-way = round trip / 2.

    python iceoryx2_pingpong.py [--count N] [--warmup N] [--rows 64]

Busy polling only: iceoryx2's receive() does not block, and a blocking wait
needs its event service and a WaitSet, which this does not measure. Needs
only the iceoryx2 package (bench/python/requirements.txt; run.sh installs it
into a venv of its own)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def iceoryx2_pingpong(args: argparse.Namespace) -> dict:
    """The iceoryx2 Python package's publish-subscribe, ping-pong of a
    payload of the same size (a ctypes struct of rows * 16 bytes), busy
    polling (its receive() does not block; a blocking wait needs its event
    service and a WaitSet, not measured here)."""
    child = subprocess.Popen([sys.executable, __file__, "echo", "--count", str(args.count),
                              "--warmup", str(args.warmup), "--rows", str(args.rows),
                              "--tag", args.tag])
    try:
        import iceoryx2 as iox2
        data = payload_type(args.rows)
        node = iox2.NodeBuilder.new().create(iox2.ServiceType.Ipc)
        ping = node.service_builder(iox2.ServiceName.new(f"alkaid-bench/{args.tag}/ping")) \
            .publish_subscribe(data).open_or_create()
        pong = node.service_builder(iox2.ServiceName.new(f"alkaid-bench/{args.tag}/pong")) \
            .publish_subscribe(data).open_or_create()
        publisher = ping.publisher_builder().create()
        subscriber = pong.subscriber_builder().create()
        # The echo side is ready once it subscribed to ping.
        while ping.dynamic_config.number_of_subscribers < 1:
            time.sleep(0.001)
        while pong.dynamic_config.number_of_publishers < 1:
            time.sleep(0.001)
        samples = []
        for i in range(args.count + args.warmup):
            start = time.perf_counter_ns()
            sample = publisher.loan_uninit()
            sample = sample.write_payload(data(seq=i))
            sample.send()
            reply = None
            while reply is None:
                reply = subscriber.receive()
            end = time.perf_counter_ns()
            del reply
            if i >= args.warmup:
                samples.append((end - start) / 2 / 1000.0)
        if child.wait(timeout=60) != 0:
            raise RuntimeError("iceoryx2 echo failed")
    finally:
        if child.poll() is None:
            child.kill()
    return {"what": "iceoryx2 python pingpong spin", "rows": args.rows, "bytes": args.rows * 16,
            "samples": len(samples), "one_way_us_p50": statistics.median(samples),
            "one_way_us_p99": percentile(samples, 0.99)}


def payload_type(rows: int):
    import ctypes

    class Payload(ctypes.Structure):
        _fields_ = [("seq", ctypes.c_int64), ("rest", ctypes.c_uint8 * (rows * 16 - 8))]

        @staticmethod
        def type_name() -> str:
            return f"AlkaidBenchPayload{rows}"

    return Payload


def iox_echo(args: argparse.Namespace) -> None:
    import iceoryx2 as iox2
    data = payload_type(args.rows)
    node = iox2.NodeBuilder.new().create(iox2.ServiceType.Ipc)
    ping = node.service_builder(iox2.ServiceName.new(f"alkaid-bench/{args.tag}/ping")) \
        .publish_subscribe(data).open_or_create()
    pong = node.service_builder(iox2.ServiceName.new(f"alkaid-bench/{args.tag}/pong")) \
        .publish_subscribe(data).open_or_create()
    subscriber = ping.subscriber_builder().create()
    publisher = pong.publisher_builder().create()
    for _ in range(args.count + args.warmup):
        received = None
        while received is None:
            received = subscriber.receive()
        seq = received.payload().contents.seq
        del received
        sample = publisher.loan_uninit()
        sample = sample.write_payload(data(seq=seq))
        sample.send()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", default="pingpong", choices=["pingpong", "echo"])
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--tag", default=f"p{os.getpid()}")
    args = parser.parse_args()
    if args.command == "echo":
        iox_echo(args)
    else:
        print(json.dumps(iceoryx2_pingpong(args)))


if __name__ == "__main__":
    main()
