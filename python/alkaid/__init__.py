"""Alkaid from Python: publish and subscribe to Arrow record batches through
shared memory, zero-copy into pyarrow, polars and DuckDB.

Alkaid depends on none of them: batches cross over the Arrow PyCapsule
protocol (``__arrow_c_array__``, ``__arrow_c_schema__``,
``__arrow_c_stream__``).

    import alkaid, pyarrow as pa
    with alkaid.Broker() as broker:
        with alkaid.Consumer("prices", wait_for_topic=None, socket=broker.socket) as c:
            ...

See docs/INTEROP.md, "Python".
"""

from __future__ import annotations

from ._errors import (
    Error,
    InvalidError,
    IOFailedError,
    NotFoundError,
    PermissionDeniedError,
    TimedOutError,
)
from ._alkaid import (
    Batch,
    Consumer,
    Loan,
    Producer,
    Schema,
    awaited_topics,
    default_socket,
    remove_topic,
)
from ._broker import Broker, TopicInfo, topics
from ._binaries import binary_path

__version__ = "0.1.0"

__all__ = [
    "Batch",
    "Broker",
    "Consumer",
    "Error",
    "InvalidError",
    "IOFailedError",
    "Loan",
    "NotFoundError",
    "PermissionDeniedError",
    "Producer",
    "Schema",
    "TimedOutError",
    "TopicInfo",
    "awaited_topics",
    "binary_path",
    "default_socket",
    "remove_topic",
    "topics",
]
