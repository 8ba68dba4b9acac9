"""Shared by the operating tests (record/replay, top/hz, metrics): a real
alkaid-broker per test on a private socket, the alkaid tool, publishers fed
batch by batch through a pipe, and waits decided by conditions.

The programs come from the environment ctest sets (tests/tools/CMakeLists.txt):
ALKAID_TOOL (the alkaid tool), ALKAID_BROKER_BIN (alkaid-broker)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pytest

TOOL = os.environ.get("ALKAID_TOOL", "alkaid")
BROKER_BIN = os.environ.get("ALKAID_BROKER_BIN", "alkaid-broker")


def wait_until(condition: Callable[[], bool], what: str, limit: float = 30.0) -> None:
    """Polls `condition` until it holds. `limit` only turns a broken mechanism
    into a failure instead of a hang; it never decides a passing test."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"still not true after {limit} s: {what}")
        time.sleep(0.005)


def shm_names(prefix: str) -> set[str]:
    return {n for n in os.listdir("/dev/shm") if n.startswith(prefix)}


class Broker:
    """A private alkaid-broker: its own socket and segment-name prefix."""

    def __init__(self, workdir: Path, extra: list[str] | None = None):
        self.name = "ops" + uuid.uuid4().hex[:8]
        self.socket = str(workdir / "broker.sock")
        self.env = dict(os.environ, ALKAID_BROKER_SOCKET=self.socket)
        self.spawned: list[subprocess.Popen] = []
        self.stderr_path = workdir / "broker.err"
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [BROKER_BIN, "--socket", self.socket, "--name", self.name, "--log-level", "warn"]
            + (extra or []),
            stdout=subprocess.DEVNULL, stderr=self._stderr)
        wait_until(lambda: os.path.exists(self.socket) or self.proc.poll() is not None,
                   "the broker's socket appears")
        if self.proc.poll() is not None:
            pytest.fail("the broker exited: " + self.stderr_path.read_text())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        self._stderr.close()
        # A clean stop exits 0 (a sanitizer's report would not).
        assert self.proc.returncode == 0, self.stderr_path.read_text()

    def tool(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        """Runs `alkaid args...` against this broker to its end."""
        return subprocess.run([TOOL, *args], env=self.env, capture_output=True, **kwargs)

    def spawn(self, *args: str, **kwargs) -> subprocess.Popen:
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        proc = subprocess.Popen([TOOL, *args], env=self.env, **kwargs)
        self.spawned.append(proc)
        return proc

    def kill_spawned(self) -> None:
        """What a failed test left running (a recorder it stopped, say):
        SIGKILLed and reaped, so that no process outlives its test."""
        for proc in self.spawned:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)

    def topics(self) -> dict:
        r = self.tool("topics", "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def topic(self, name: str) -> dict | None:
        for t in self.topics()["topics"]:
            if t["name"] == name:
                return t
        return None

    def awaited_consumers(self, name: str) -> int:
        for a in self.topics()["awaited"]:
            if a["name"] == name:
                return a["consumers"]
        return 0


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    try:
        yield b
    finally:
        b.kill_spawned()
        b.stop()
    assert shm_names(b.name) == set(), f"leaked shared memory of broker {b.name}"


class PipePublisher:
    """`alkaid publish TOPIC -` fed one batch at a time through its stdin:
    the test decides when each batch exists, and when the stream ends."""

    def __init__(self, broker: Broker, topic: str, schema: pa.Schema,
                 first: pa.RecordBatch, extra: tuple[str, ...] = ()):
        """`extra`: more `alkaid publish` options (`--timestamps`, say)."""
        self.proc = broker.spawn("publish", topic, "-", *extra, stdin=subprocess.PIPE)
        # Encapsulated messages written by hand: pyarrow's stream writer
        # holds the schema back until the first batch. The stream reader
        # reads the message after the schema before it returns it (and the
        # producer attaches), so the first batch goes with the schema.
        self.proc.stdin.write(schema.serialize().to_pybytes())
        self.write(first)

    def write(self, batch: pa.RecordBatch) -> None:
        self.proc.stdin.write(batch.serialize().to_pybytes())
        self.proc.stdin.flush()

    def close(self) -> None:
        self.proc.stdin.write(b"\xff\xff\xff\xff\x00\x00\x00\x00")  # end of stream
        self.proc.stdin.close()
        self.proc.stdin = None
        out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err


def read_stream_batches(path) -> list[tuple[pa.RecordBatch, dict]]:
    """Every whole batch of an IPC stream with its custom metadata; a stream
    cut inside a message (a recorder killed mid-write) ends at the last whole
    one."""
    out = []
    with pa.OSFile(str(path), "rb") as f:
        reader = pa.ipc.open_stream(f)
        while True:
            try:
                batch, md = reader.read_next_batch_with_custom_metadata()
            except StopIteration:
                break
            except (pa.ArrowInvalid, OSError):
                break  # the torn tail
            out.append((batch, {k.decode(): v.decode() for k, v in (md or {}).items()}))
    return out


def read_file_batches(path) -> list[tuple[pa.RecordBatch, dict]]:
    """Every batch of an ARROW1 file (its footer read) with its metadata."""
    with pa.OSFile(str(path), "rb") as f:
        reader = pa.ipc.open_file(f)
        out = []
        for i in range(reader.num_record_batches):
            batch, md = reader.get_batch_with_custom_metadata(i)
            out.append((batch, {k.decode(): v.decode() for k, v in (md or {}).items()}))
        return out
