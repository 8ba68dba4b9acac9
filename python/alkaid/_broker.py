"""A private alkaid-broker process, for tests and notebooks."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
import uuid
import warnings
from types import TracebackType

from . import _alkaid
from ._binaries import binary_path
from ._errors import IOFailedError

__all__ = ["Broker", "topics", "TopicInfo"]


class TopicInfo(dict):
    """One topic as the broker reports it (what ``alkaid topics`` prints): a
    dict with the keys name, schema (an :class:`alkaid.Schema`), kind
    ("record-batch" or "unsafe-row"; also under the key payload_kind),
    slot_count, arena_bytes, policy, producers, consumers, published, depth,
    drops, held (bodies the consumers still hold), publish_timestamps (whether
    its producers stamp publish times) and published_bytes (body bytes
    published, as the producers last reported), also readable as
    attributes. The previous release's keys ring_slots and segment_bytes
    still read slot_count and arena_bytes, with a DeprecationWarning."""

    _DEPRECATED = {"ring_slots": "slot_count", "segment_bytes": "arena_bytes"}

    def __getitem__(self, key: str) -> object:
        new = TopicInfo._DEPRECATED.get(key)
        if new is not None and not dict.__contains__(self, key):
            warnings.warn(f"TopicInfo key {key!r} is deprecated; use {new!r}",
                          DeprecationWarning, stacklevel=2)
            key = new
        return dict.__getitem__(self, key)

    def get(self, key: str, default: object = None) -> object:
        try:
            return self[key]
        except KeyError:
            return default

    def __getattr__(self, key: str) -> object:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


def topics(socket: str | None = None) -> list[TopicInfo]:
    """Every topic of the broker at `socket` (None: the default socket).

    Raises IOFailedError if no broker answers there."""
    return [TopicInfo(t) for t in _alkaid._list_topics(socket)]


def _die_with_parent() -> None:
    """In the forked child, before exec: SIGKILL when the parent dies, so a
    crashed test or notebook leaves no broker behind (Linux prctl)."""
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class Broker:
    """Starts ``alkaid-broker`` on a private socket and stops it on exit.

    ``with alkaid.Broker() as broker:`` then pass ``socket=broker.socket`` to
    Producer, Consumer and topics(). The broker names its shared memory
    ``/dev/shm/<name>.*``; stopping it (SIGTERM) removes what it created.

    binary: the alkaid-broker to run (default: the one installed with this
    package, or $ALKAID_BIN_DIR/alkaid-broker). args: more command-line
    options. ready_timeout: how long start() waits for the broker to answer.
    die_with_parent: the broker gets SIGKILL when the thread that started it
    ends (prctl PR_SET_PDEATHSIG; start it from the main thread), so a crashed
    process leaves no broker running.
    """

    def __init__(
        self,
        name: str | None = None,
        socket: str | None = None,
        *,
        binary: str | None = None,
        args: list[str] | tuple[str, ...] = (),
        ready_timeout: float = 10.0,
        die_with_parent: bool = True,
    ) -> None:
        self.name = name or f"alkaid-py-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.socket = socket or os.path.join(tempfile.gettempdir(), f"{self.name}.sock")
        self.binary = binary or binary_path("alkaid-broker")
        self.args = list(args)
        self.ready_timeout = ready_timeout
        self.die_with_parent = die_with_parent
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The broker's process id while it runs, else None."""
        return self._process.pid if self._process is not None else None

    def start(self) -> "Broker":
        """Starts the broker and returns once it answers a request.

        Raises IOFailedError if it exits or does not answer within
        ready_timeout seconds."""
        if self._process is not None:
            return self
        command = [self.binary, "--socket", self.socket, "--name", self.name,
                   "--log-level", "warn", *self.args]
        self._process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent if self.die_with_parent else None)
        deadline = time.monotonic() + self.ready_timeout
        while True:
            try:
                topics(self.socket)
                return self
            except IOFailedError:
                pass
            code = self._process.poll()
            if code is not None:
                self._process = None
                raise IOFailedError(f"alkaid-broker ({self.binary}) exited with {code} at start")
            if time.monotonic() >= deadline:
                self.kill()
                raise IOFailedError(
                    f"alkaid-broker did not answer on {self.socket} within {self.ready_timeout} s")
            time.sleep(0.005)

    def stop(self) -> int | None:
        """SIGTERM, then waits for it to exit (SIGKILL after 10 s); returns the exit code."""
        process, self._process = self._process, None
        if process is None:
            return None
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()

    def kill(self) -> None:
        """SIGKILL: the broker dies without cleaning up (as in a crash)."""
        process, self._process = self._process, None
        if process is None:
            return
        process.kill()
        process.wait()
        try:
            os.unlink(self.socket)
        except FileNotFoundError:
            pass

    def topics(self) -> list[TopicInfo]:
        """topics() of this broker."""
        return topics(self.socket)

    def __enter__(self) -> "Broker":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"alkaid.Broker(name={self.name!r}, socket={self.socket!r}, pid={self.pid})"
