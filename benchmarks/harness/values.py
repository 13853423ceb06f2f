"""The data every system stores, made the same way in every process and environment.

A value is described by a JSON-able spec, so that an agent in another virtual
environment makes exactly the same data: ``{"kind": "array", "nbytes": n}`` (a uint8
NumPy array), ``{"kind": "frame", "rows": r, "cols": c}`` (a pandas DataFrame of float64
columns) or ``{"kind": "table", ...}`` (the same as an Arrow Table).
"""

from __future__ import annotations

from typing import Any

Spec = dict[str, Any]


def array(nbytes: int) -> Spec:
    return {"kind": "array", "nbytes": nbytes}


def frame(rows: int, cols: int) -> Spec:
    return {"kind": "frame", "rows": rows, "cols": cols}


def table(rows: int, cols: int) -> Spec:
    return {"kind": "table", "rows": rows, "cols": cols}


def nbytes(spec: Spec) -> int:
    """The payload size of the value: what a copy of it has to move."""
    if spec["kind"] == "array":
        return int(spec["nbytes"])
    return int(spec["rows"]) * int(spec["cols"]) * 8


def make(spec: Spec) -> Any:
    """Builds the value. Its pages are written here, so a put reads warm source memory."""
    import numpy as np

    kind = spec["kind"]
    if kind == "array":
        return np.full(int(spec["nbytes"]), 7, dtype=np.uint8)
    rows, cols = int(spec["rows"]), int(spec["cols"])
    base = np.arange(rows, dtype=np.float64)
    columns = {f"c{i}": base + i for i in range(cols)}
    if kind == "frame":
        import pandas as pd

        return pd.DataFrame(columns)
    if kind == "table":
        import pyarrow as pa

        return pa.table(columns)
    raise ValueError(f"unknown value kind {kind!r}")


def size_of(value: Any) -> int:
    """The payload size of a value got back, to check that a get returned the data."""
    n = getattr(value, "nbytes", None)
    if isinstance(n, int):  # numpy, pyarrow, memoryview
        return n
    if hasattr(value, "memory_usage"):  # pandas
        return int(value.memory_usage(index=False).sum())
    if hasattr(value, "get_total_buffer_size"):  # pyarrow
        return int(value.get_total_buffer_size())
    return len(memoryview(value).cast("B"))
