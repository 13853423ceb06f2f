"""torch ``Dataset`` classes over stored objects, for ``DataLoader`` workers
started any way: ``fork`` (Linux's default), ``spawn`` or ``forkserver``.

- :class:`Dataset`: the rows of one stored value, a tensor (rows along the
  first axis), a pandas DataFrame or an Arrow table (each row a dict of
  column to value).
- :class:`ObjectDataset`: one stored object per item, got in the worker that
  asks for it.

Both are made in the process that connected; what a worker does depends on
how it was started. A worker made by ``fork`` inherits the dataset as it is:
a :class:`Dataset`'s views of the store (no call at all), and for an
:class:`ObjectDataset` the parent's client, whose ``get`` works in a forked
child for objects the daemon published, zero-copy and without the Go runtime
(docs/integrations.md, "Reading in forked children"). A worker made by
``spawn`` or ``forkserver`` unpickles the dataset by id: it connects to the
same socket (one client per process and socket) and gets the object there.

Items are zero-copy: a tensor's row is a torch tensor over the store's
memory (DLPack, read-only; torch does not enforce it, and a write faults);
the ``DataLoader``'s collation then copies a batch into a new tensor, as it
does for any dataset.

This module imports torch; ``import vineyard`` does not import it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.utils.data

from ._types import ObjectID

__all__ = ["Dataset", "ObjectDataset"]

_clients: dict[tuple[int, str], Any] = {}  # (pid, socket) -> this process's client
_clients_lock = threading.Lock()


def _client_for(socket: str) -> Any:
    """This process's client of ``socket``, connected on first use."""
    import os

    import vineyard

    key = (os.getpid(), socket)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = vineyard.connect(socket)
        return client


def _socket_of(client: Any) -> str:
    socket = getattr(client, "ipc_socket", None) or getattr(client, "socket", None)
    if not socket:
        raise ValueError("vineyard.torch: the client must be connected over its UNIX socket "
                         "(workers started by spawn connect to it by path)")
    return str(socket)


def _row_tensor(arr: np.ndarray, i: int) -> Any:
    """Row ``i`` of ``arr`` as a torch tensor over the same memory."""
    row = arr[i : i + 1].reshape(arr.shape[1:])
    if row.dtype.hasobject:
        return row
    return torch.from_dlpack(row)


def _columns(value: Any, columns: Sequence[str] | None) -> tuple[int, dict[str, np.ndarray]]:
    """(rows, column arrays) of a tensor, DataFrame or Arrow table: views of
    the store where the values allow (numbers without nulls), else copies."""
    import pandas as pd

    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            raise TypeError("vineyard.torch.Dataset: a 0-d tensor has no rows")
        return len(value), {}
    if isinstance(value, pd.DataFrame):
        names = list(value.columns) if columns is None else list(columns)
        return len(value), {str(n): value[n].to_numpy() for n in names}
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - pyarrow is a dependency of the Arrow types only
        pa = None
    if pa is not None and isinstance(value, (pa.Table, pa.RecordBatch)):
        names = value.column_names if columns is None else list(columns)
        out = {}
        for n in names:
            col = value.column(n)
            try:
                out[str(n)] = col.to_numpy(zero_copy_only=True) if isinstance(col, pa.Array) else \
                    (col.chunk(0).to_numpy(zero_copy_only=True) if col.num_chunks == 1 else col.to_numpy())
            except pa.ArrowInvalid:  # nulls or strings: a copy
                out[str(n)] = col.to_numpy(zero_copy_only=False)
        return value.num_rows, out
    raise TypeError(f"vineyard.torch.Dataset: object holds a {type(value).__qualname__}; want a tensor "
                    "(NumPy array), a pandas DataFrame or an Arrow table (use ObjectDataset for other values)")


class Dataset(torch.utils.data.Dataset):
    """The rows of the stored object ``object_id``: a tensor (item ``i``
    is row ``i``, a torch tensor over the store), a pandas DataFrame or
    an Arrow table (item ``i`` is a dict of column name to value;
    ``columns`` selects and orders them). ``client`` is a connected
    client (or its socket path). ``transform``, if given, maps each
    item. Pickles by socket and id (spawn, forkserver)."""

    def __init__(self, client: Any, object_id: Any, *, columns: Sequence[str] | None = None,
                 transform: Callable[[Any], Any] | None = None) -> None:
        if isinstance(client, str):
            client = _client_for(client)
        self.socket = _socket_of(client)
        self.object_id = ObjectID(object_id)
        self.columns = None if columns is None else list(columns)
        self.transform = transform
        self._load(client)

    def _load(self, client: Any) -> None:
        self._value = client.get(self.object_id)
        self._rows, self._cols = _columns(self._value, self.columns)

    def __len__(self) -> int:
        return self._rows

    def __getitem__(self, i: int) -> Any:
        if not -self._rows <= i < self._rows:
            raise IndexError(f"index {i} out of range for {self._rows} rows")
        i %= self._rows
        if self._cols:
            item: Any = {n: _row_tensor(a, i) for n, a in self._cols.items()}
        else:
            item = _row_tensor(self._value, i)
        return item if self.transform is None else self.transform(item)

    def __getstate__(self) -> dict[str, Any]:
        return {"socket": self.socket, "object_id": int(self.object_id), "columns": self.columns,
                "transform": self.transform}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.socket = state["socket"]
        self.object_id = ObjectID(state["object_id"])
        self.columns = state["columns"]
        self.transform = state["transform"]
        self._load(_client_for(self.socket))

    def __repr__(self) -> str:
        return f"vineyard.torch.Dataset <{self.object_id!r}: {self._rows} rows>"


class ObjectDataset(torch.utils.data.Dataset):
    """One stored object per item: item ``i`` is ``client.get(ids[i])``
    (``transform`` applied), got in the worker that asks for it; in a
    worker made by ``fork`` through the parent's client (published
    objects, without Go), in one made by ``spawn`` or ``forkserver``
    through a client of its own. Pickles by socket and ids."""

    def __init__(self, client: Any, object_ids: Sequence[Any], *,
                 transform: Callable[[Any], Any] | None = None) -> None:
        if isinstance(client, str):
            client = _client_for(client)
        self.socket = _socket_of(client)
        self.object_ids = [ObjectID(o) for o in object_ids]
        self.transform = transform
        self._client = client

    def __len__(self) -> int:
        return len(self.object_ids)

    def __getitem__(self, i: int) -> Any:
        value = self._client.get(self.object_ids[i])
        return value if self.transform is None else self.transform(value)

    def __getstate__(self) -> dict[str, Any]:
        return {"socket": self.socket, "object_ids": [int(o) for o in self.object_ids],
                "transform": self.transform}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.socket = state["socket"]
        self.object_ids = [ObjectID(o) for o in state["object_ids"]]
        self.transform = state["transform"]
        self._client = _client_for(self.socket)

    def __repr__(self) -> str:
        return f"vineyard.torch.ObjectDataset <{len(self.object_ids)} objects>"
