"""Upstream's remote blobs: :class:`RemoteBlobBuilder`, bytes prepared in
this process and sent by ``Client.create_remote_blob``, and
:class:`RemoteBlob`, what ``Client.get_remote_blob`` returns. A thin layer:
the transfer is an ordinary blob create, copy and seal (over a TCP
connection libv6d sends the bytes at seal) and an ordinary blob get (over
TCP a private copy), so both work on either kind of connection."""

from __future__ import annotations

import ctypes
from typing import Any, cast

import numpy as np

from ._objects import Blob

__all__ = ["RemoteBlob", "RemoteBlobBuilder"]


class RemoteBlob(Blob):
    """A blob got with ``get_remote_blob``: a :class:`Blob` (read-only bytes,
    ``id``, ``size``, ``address``, ``buffer``, ``is_empty``) that also names
    the instance that holds it (``instance_id``)."""

    instance_id: int

    def __array_finalize__(self, obj: Any) -> None:
        super().__array_finalize__(obj)
        self.instance_id = getattr(obj, "instance_id", 0)

    def __repr__(self) -> str:
        return f"RemoteBlob <{self.id!r}: {self.size} bytes of instance {self.instance_id}>"


class RemoteBlobBuilder:
    """Bytes in this process's memory to become a blob of a daemon
    (``client.create_remote_blob(builder)``), as upstream's: ``size`` bytes,
    zeroed, written with :meth:`copy`, item assignment or :attr:`buffer`; or
    :meth:`wrap` of existing bytes (no copy until sent)."""

    def __init__(self, size: int) -> None:
        size = int(size)
        if size < 0:
            raise ValueError("blob size must not be negative")
        self._array = np.zeros(size, dtype=np.uint8)
        self._aborted = False

    @staticmethod
    def wrap(data: Any, size: int | None = None) -> RemoteBlobBuilder:
        """A builder over ``data`` (bytes-like, or an address with ``size``)
        without copying it: the bytes are read when the blob is created, so
        they must stay alive and unchanged until then."""
        builder = RemoteBlobBuilder.__new__(RemoteBlobBuilder)
        if isinstance(data, int):
            if size is None:
                raise TypeError("RemoteBlobBuilder.wrap(address, size) needs the size")
            buf: Any = (ctypes.c_uint8 * int(size)).from_address(data) if size else b""
            builder._array = np.frombuffer(buf, dtype=np.uint8)
        else:
            builder._array = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
        builder._aborted = False
        return builder

    def _live(self) -> np.ndarray:
        if self._aborted:
            raise ValueError("vineyard: the remote blob builder was aborted")
        return self._array

    @property
    def size(self) -> int:
        return int(self._array.size)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key: Any) -> Any:
        item = self._live()[key]
        return int(item) if isinstance(item, np.integer) else bytes(item)

    def __setitem__(self, key: Any, value: Any) -> None:
        arr = self._live()
        arr[key] = value if isinstance(value, int) else np.frombuffer(memoryview(value).cast("B"), dtype=np.uint8)

    def __iter__(self) -> Any:
        return iter(self._live().tolist())

    @property
    def address(self) -> int:
        return int(self._live().ctypes.data)

    @property
    def buffer(self) -> memoryview:
        """A memoryview of the bytes (writable unless :meth:`wrap` of read-only data)."""
        return memoryview(cast(Any, self._live()))

    def copy(self, offset: int, data: Any, size: int | None = None) -> None:
        """Copies bytes-like ``data`` (or ``size`` bytes at the address
        ``data``) into the builder at ``offset``."""
        arr = self._live()
        if isinstance(data, int):
            if size is None:
                raise TypeError("copy(offset, address, size) needs the size")
            raw: Any = (ctypes.c_uint8 * int(size)).from_address(data)
            src = np.frombuffer(raw, dtype=np.uint8) if size else arr[:0]
        else:
            src = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
        if offset < 0 or offset + src.size > arr.size:
            raise ValueError(f"copy of {src.size} bytes at {offset} exceeds blob of {arr.size}")
        arr[offset:offset + src.size] = src

    def abort(self) -> None:
        """Drops the bytes; the builder cannot be used afterwards."""
        self._array = np.zeros(0, dtype=np.uint8)
        self._aborted = True

    def __repr__(self) -> str:
        return f"RemoteBlobBuilder <{self.size} bytes>"
