"""Type stubs of the extension module alkaid._alkaid (python/src). The
docstrings are the module's own, shortened; `help(alkaid.Consumer)` shows
them in full."""

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal

import numpy
import numpy.typing

WaitMode = Literal["spin-then-block", "spin", "block"]
Verification = Literal["structure", "full", "private-copy"]
Policy = Literal["block", "drop-oldest"]

class Schema:
    """The schema of a topic; implements ``__arrow_c_schema__``."""

    def __arrow_c_schema__(self) -> object:
        """Exports the schema as an ``arrow_schema`` PyCapsule."""
    @property
    def names(self) -> list[str]:
        """The field names, in order."""
    def __len__(self) -> int: ...
    def __eq__(self, other: object) -> bool:
        """True if `other` (any object with ``__arrow_c_schema__``) has the same fields."""
    def to_pyarrow(self) -> Any:
        """The schema as a pyarrow.Schema (needs pyarrow)."""

class Batch:
    """A record batch received from a topic, zero-copy over the producer's
    shared memory; implements ``__arrow_c_array__``, ``__arrow_c_schema__``
    and ``__arrow_c_stream__``. The producer's block stays held while this
    object or anything that imported it is alive."""

    @property
    def num_rows(self) -> int:
        """The number of rows."""
    @property
    def num_columns(self) -> int:
        """The number of columns."""
    @property
    def schema(self) -> Schema:
        """The batch's schema."""
    def __len__(self) -> int: ...
    def __arrow_c_array__(self, requested_schema: object | None = None) -> tuple[object, object]:
        """(``arrow_schema``, ``arrow_array``) PyCapsules of the batch as a struct array."""
    def __arrow_c_schema__(self) -> object:
        """The batch's schema as an ``arrow_schema`` PyCapsule."""
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """An ``arrow_array_stream`` PyCapsule of this one batch."""
    def to_pyarrow(self) -> Any:
        """The batch as a pyarrow.RecordBatch over the same buffers (needs pyarrow)."""
    def release(self) -> None:
        """Drops this object's reference to the shared memory now."""
    @property
    def released(self) -> bool:
        """True after release()."""
    @property
    def publish_ns(self) -> int:
        """When the producer published it (``time.time_ns()``'s clock); 0 unless
        the topic stamps publish times."""
    def buffer_addresses(self) -> list[tuple[int, int]]:
        """(address, size) of every non-empty buffer, in column order."""

class Loan:
    """A batch being written in place in a producer's shared memory."""

    def __getitem__(self, column: str | int) -> numpy.ndarray[Any, Any]:
        """A writable numpy array over the column's shared buffer."""
    def __buffer__(self, flags: int) -> memoryview:
        """The loan's region of shared memory (read-only once published)."""
    def publish(self) -> None:
        """Publishes the batch without copying; the arrays become read-only."""
    @property
    def published(self) -> bool:
        """True after publish()."""
    @property
    def num_rows(self) -> int:
        """The batch's row count."""
    def __len__(self) -> int: ...
    def __enter__(self) -> "Loan": ...
    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        """Publishes the loan unless the block raised."""

class Producer:
    """A producer of a topic; a context manager (leaving it closes the producer).

    Its waits (construction, publish, loan, close) release the GIL; on the
    main thread Ctrl-C ends them with KeyboardInterrupt."""

    def __init__(self, topic: str, schema: object, *, socket: str | None = None,
                 slot_count: int = 0, arena_bytes: int = 0, policy: Policy = "block",
                 publish_timeout: float = 5.0, wait_for_consumers: float = 10.0,
                 drain_timeout: float = 5.0, ring_slots: int | None = None,
                 segment_bytes: int | None = None, publish_timestamps: bool = False,
                 fixed_block_bytes: int = 0, fixed_block_count: int = 0) -> None:
        """Creates or joins `topic` with `schema` (any ``__arrow_c_schema__`` object).
        ring_slots and segment_bytes are deprecated names of slot_count and arena_bytes;
        publish_timestamps: if this creates the topic, each batch carries its publish time
        (Batch.publish_ns). fixed_block_bytes, fixed_block_count: fixed blocks for loans
        whose values (each column padded to 64 bytes) fit (0: none; count 0: twice the
        slots)."""
    @property
    def fixed_block_bytes(self) -> int:
        """Bytes of each fixed block (0: none)."""
    @property
    def fixed_block_count(self) -> int:
        """How many fixed blocks the broker granted (0: none)."""
    def publish(self, data: object) -> int:
        """Publishes an ``__arrow_c_array__`` or ``__arrow_c_stream__`` object (one copy);
        returns the number of batches published."""
    def publish_numpy(
        self, columns: Mapping[str, numpy.typing.ArrayLike] | Sequence[numpy.typing.ArrayLike]
    ) -> None:
        """Publishes one batch from numpy columns, copied once into a loan."""
    def loan(self, num_rows: int) -> Loan:
        """A new batch of `num_rows` rows in shared memory, filled through numpy views."""
    def close(self) -> None:
        """Ends the stream (consumers drain it, then see its end). Idempotent."""
    @property
    def closed(self) -> bool:
        """True after close()."""
    @property
    def topic(self) -> str:
        """The topic's name."""
    @property
    def schema(self) -> Schema:
        """The topic's schema."""
    def stats(self) -> dict[str, int]:
        """Counters: published, copied_bytes, blocks_live, arena_bytes_free,
        held_by_consumers, dead_consumers_detached, reregistrations,
        arrow_zero_copy, arrow_copied."""
    def __enter__(self) -> "Producer": ...
    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool: ...

class Consumer:
    """A subscription to a topic: an iterator of Batch (``for``, or ``async for``
    on an asyncio loop), an Arrow C stream, and a context manager (leaving it
    closes the consumer)."""

    def __init__(self, topic: str, *, wait_for_topic: float | None = 0.0,
                 socket: str | None = None, columns: Sequence[str] | None = None,
                 from_oldest: bool = False, wait_mode: WaitMode = "spin-then-block",
                 verification: Verification = "structure") -> None:
        """Subscribes to `topic`; `wait_for_topic` seconds (None: no limit) for it to exist."""
    def next(self, timeout: float | None = None) -> Batch:
        """The next batch; TimedOutError, or StopIteration at the end of the stream."""
    def __iter__(self) -> Iterator[Batch]: ...
    def __next__(self) -> Batch: ...
    def try_next(self) -> Batch | None:
        """The batch already there, or None (never waits); StopIteration at the end."""
    def wait_fd(self) -> int:
        """A level-triggered descriptor that turns readable when try_next may have news."""
    def arm_wait(self) -> bool:
        """Arms the descriptor before a sleep; True if a batch may be there already."""
    def __aiter__(self) -> AsyncIterator[Batch]: ...
    async def __anext__(self) -> Batch: ...
    def close(self) -> None:
        """Detaches from the broker and the channels. Idempotent."""
    @property
    def closed(self) -> bool:
        """True after close()."""
    @property
    def topic(self) -> str:
        """The topic's name."""
    @property
    def schema(self) -> Schema:
        """The schema of the batches it returns."""
    def stats(self) -> dict[str, int]:
        """Counters: lost, reregistrations, producers."""
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The rest of the topic as an ``arrow_array_stream`` PyCapsule."""
    def __enter__(self) -> "Consumer": ...
    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool: ...

def _list_topics(socket: str | None = None) -> list[dict[str, Any]]: ...
def remove_topic(name: str, socket: str | None = None) -> None:
    """Removes topic `name`, which has no producer (`alkaid topics rm`); its
    consumers end their stream. InvalidError while it has producers,
    NotFoundError if there is no such topic."""
def awaited_topics(socket: str | None = None) -> dict[str, int]:
    """Topics not created yet with consumers waiting for them: {name: consumers}."""
def default_socket() -> str:
    """The socket clients use when none is given."""
