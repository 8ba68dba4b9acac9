"""The ``alkaid`` and ``alkaid-broker`` commands a pip install provides: they
run the C++ programs bundled with the package."""

from __future__ import annotations

import os
import sys

from ._binaries import binary_path


def _run(name: str) -> None:
    path = binary_path(name)
    os.execv(path, [path, *sys.argv[1:]])


def alkaid_main() -> None:
    """Entry point of ``alkaid``: runs the bundled alkaid tool."""
    _run("alkaid")


def broker_main() -> None:
    """Entry point of ``alkaid-broker``: runs the bundled broker daemon."""
    _run("alkaid-broker")
