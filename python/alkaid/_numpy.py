"""Producer.publish_numpy: numpy columns copied once into a loan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def publish_numpy(producer: Any, columns: Mapping[str, Any] | Sequence[Any]) -> None:
    import numpy as np

    names = producer.schema.names
    if isinstance(columns, Mapping):
        unknown = sorted(set(columns) - set(names))
        missing = [n for n in names if n not in columns]
        if unknown or missing:
            from ._errors import InvalidError
            raise InvalidError(
                f"publish_numpy: the columns must be the topic's ({', '.join(names)}); "
                f"missing {missing}, unknown {unknown}", "Invalid")
        arrays = [np.asarray(columns[n]) for n in names]
    else:
        arrays = [np.asarray(c) for c in columns]
        if len(arrays) != len(names):
            from ._errors import InvalidError
            raise InvalidError(
                f"publish_numpy: {len(arrays)} columns given, the topic has {len(names)}",
                "Invalid")
    rows = {a.shape for a in arrays}
    if any(a.ndim != 1 for a in arrays) or len(rows) > 1:
        from ._errors import InvalidError
        raise InvalidError(
            "publish_numpy: every column must be one-dimensional and of the same length, got "
            f"shapes {[a.shape for a in arrays]}", "Invalid")
    num_rows = arrays[0].shape[0] if arrays else 0
    loan = producer.loan(num_rows)
    for i, array in enumerate(arrays):
        view = loan[i]
        # Same-kind casts only (int64 into int32 would be refused): the copy
        # must not change values silently.
        np.copyto(view, array, casting="same_kind")
    loan.publish()
