"""Fixtures of the Python tests: a real alkaid-broker per test, shared-memory
bookkeeping, and waits decided by conditions.

The module under test is the build tree's (PYTHONPATH=<build>/python, set by
ctest; tests/python/CMakeLists.txt)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

import pytest

import alkaid

REPO = Path(__file__).resolve().parents[2]
GOLD_DIR = REPO / "tests" / "data" / "arrow-gold" / "cpp-21.0.0"


def shm_names(prefix: str) -> set[str]:
    """Names in /dev/shm starting with `prefix`."""
    return {n for n in os.listdir("/dev/shm") if n.startswith(prefix)}


def wait_until(condition: Callable[[], bool], what: str, limit: float = 10.0) -> None:
    """Polls `condition` until it holds. `limit` only turns a broken mechanism
    into a failure instead of a hang; it never decides a passing test."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"still not true after {limit} s: {what}")
        time.sleep(0.002)


def shm_mappings(prefix: str) -> list[tuple[int, int]]:
    """[start, end) of this process's mappings of /dev/shm/<prefix>*."""
    out = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/dev/shm/" + prefix):
                start, end = (int(x, 16) for x in parts[0].split("-"))
                out.append((start, end))
    return out


def shm_location(address: int) -> tuple[str, int]:
    """(file, offset in the file) of `address` in a /dev/shm mapping of this
    process: two mappings of one segment (a producer's and a consumer's in
    the same process) give the same location for the same byte."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/dev/shm/"):
                start, end = (int(x, 16) for x in parts[0].split("-"))
                if start <= address < end:
                    return parts[5], address - start + int(parts[2], 16)
    raise AssertionError(f"{address:#x} is in no /dev/shm mapping")


def in_mappings(address: int, size: int, mappings: list[tuple[int, int]]) -> bool:
    return any(start <= address and address + size <= end for start, end in mappings)


@pytest.fixture
def broker():
    """A private broker; after the test, nothing of it is left in /dev/shm."""
    b = alkaid.Broker()
    b.start()
    try:
        yield b
    finally:
        b.stop()
    assert shm_names(b.name) == set(), f"leaked shared memory of broker {b.name}"
