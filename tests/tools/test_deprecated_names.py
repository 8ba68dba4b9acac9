"""The previous release's names in the alkaid tool (docs/BROKER.md): `alkaid
publish --ring-slots/--segment-bytes` still set the topic, with a warning on
stderr; `alkaid topics --json` and `alkaid top --json` still carry the keys
ring_slots and segment_bytes beside slot_count and arena_bytes, and name
them under deprecated_keys."""

from __future__ import annotations

import json

import pyarrow as pa

from ops_support import broker  # noqa: F401 (the fixture)

SCHEMA = pa.schema([("i", pa.int64())])


def stream_of_one_batch() -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, SCHEMA) as writer:
        writer.write_batch(pa.record_batch([pa.array([1, 2, 3], pa.int64())], schema=SCHEMA))
    return sink.getvalue().to_pybytes()


def test_deprecated_publish_options_warn_and_set_the_topic(broker):
    r = broker.tool("publish", "old", "-", "--ring-slots", "16", "--segment-bytes", "262144",
                    input=stream_of_one_batch())
    assert r.returncode == 0, r.stderr
    err = r.stderr.decode()
    assert "--ring-slots is deprecated; use --slot-count" in err
    assert "--segment-bytes is deprecated; use --arena-bytes" in err
    r = broker.tool("publish", "new", "-", "--slot-count", "32", input=stream_of_one_batch())
    assert r.returncode == 0, r.stderr
    assert "deprecated" not in r.stderr.decode()

    doc = broker.topics()
    assert doc["deprecated_keys"] == {"ring_slots": "slot_count", "segment_bytes": "arena_bytes",
                                      "max_segment_bytes": "max_arena_bytes"}
    old = next(t for t in doc["topics"] if t["name"] == "old")
    assert old["slot_count"] == old["ring_slots"] == 16
    assert old["arena_bytes"] == old["segment_bytes"] == 262144
    assert old["max_arena_bytes"] == old["max_segment_bytes"]
    new = next(t for t in doc["topics"] if t["name"] == "new")
    assert new["slot_count"] == new["ring_slots"] == 32

    r = broker.tool("top", "--once", "--json", "--interval", "0.1")
    assert r.returncode == 0, r.stderr
    top = json.loads(r.stdout)
    assert top["deprecated_keys"] == {"ring_slots": "slot_count", "segment_bytes": "arena_bytes"}
    old = next(t for t in top["topics"] if t["name"] == "old")
    assert old["slot_count"] == old["ring_slots"] == 16
    assert old["arena_bytes"] == old["segment_bytes"] == 262144
