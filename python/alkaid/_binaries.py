"""Where the bundled command-line programs are."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["binary_path"]


def binary_path(name: str) -> str:
    """The path of the bundled program `name` ("alkaid" or "alkaid-broker"):
    $ALKAID_BIN_DIR/<name> if that variable is set, else the copy installed
    in the package's bin/ folder (a wheel, or the build tree's package).
    Raises FileNotFoundError naming where it looked."""
    looked = []
    env_dir = os.environ.get("ALKAID_BIN_DIR")
    if env_dir:
        looked.append(os.path.join(env_dir, name))
    # Not resolved: in the build tree this file is a link into the sources.
    looked.append(str(Path(os.path.abspath(__file__)).parent / "bin" / name))
    for candidate in looked:
        if os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(f"no executable {name}; looked at {', '.join(looked)}")
