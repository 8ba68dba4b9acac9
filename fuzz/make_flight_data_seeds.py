#!/usr/bin/env python3
"""Writes the seeds of flight_data_fuzz (fuzz/corpus/flight_data_fuzz/).

Each seed is what a DoPut client sends for one of Arrow's gold streams:
FlightData messages (the first with a PATH descriptor, the topic), each
IPC message's flatbuffer as data_header and its body as data_body, framed
as gRPC frames them (flag byte 0, 4-byte big-endian length). The protobuf
encoding is written out by hand here (field numbers: flight/proto/flight.proto).

    .venv/bin/python fuzz/make_flight_data_seeds.py
"""
import pathlib
import struct

import pyarrow as pa

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLD = ROOT / "tests/data/arrow-gold/cpp-21.0.0"
OUT = ROOT / "fuzz/corpus/flight_data_fuzz"
CASES = ["primitive", "dictionary", "nested", "nested_dictionary", "decimal32", "union",
         "run_end_encoded", "map", "interval_mdn", "null_trivial", "primitive_no_batches"]


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number, payload):
    """A length-delimited field (wire type 2)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def flight_data(header, body, topic=None):
    out = b""
    if topic is not None:
        descriptor = varint(1 << 3 | 0) + varint(1) + field(3, topic.encode())  # PATH, [topic]
        out += field(1, descriptor)
    out += field(2, header)
    if body:
        out += field(1000, body)
    return out


def framed(message):
    return b"\0" + struct.pack(">I", len(message)) + message


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for case in CASES:
        reader = pa.ipc.MessageReader.open_stream(str(GOLD / f"generated_{case}.stream"))
        frames = []
        for message in reader:
            body = message.body.to_pybytes() if message.body is not None else b""
            topic = "seed" if not frames else None
            frames.append(framed(flight_data(message.metadata.to_pybytes(), body, topic)))
        (OUT / f"gold-{case}").write_bytes(b"".join(frames))


if __name__ == "__main__":
    main()
