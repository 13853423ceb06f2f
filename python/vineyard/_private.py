"""Private copy-on-write views of blobs (``v6d_map_private``).

For consumers that cannot be handed read-only memory, such as torch, which has
no read-only tensors: a view is writable, its reads share the store's physical
pages (no copy), and the first write to a 4 KiB page copies that page into this
process; writes never reach the store or another reader. Each view holds a
reference to its blob, so the blob's memory is never reused while the view is
mapped; it is unmapped when garbage collected.
"""

from __future__ import annotations

import contextlib
import ctypes
import weakref
from typing import Any

from . import _ffi
from .client import _call

__all__ = ["PrivateView", "live_views", "map_private"]


def _unmap(conn: Any, address: int) -> None:
    # conn is passed only to keep the connection open until the view is gone.
    if _ffi.usable():
        with contextlib.suppress(Exception):  # never raise from a finalizer
            _call("v6d_unmap_private", address)


class PrivateView:
    """One private copy-on-write mapping of a blob, exposed as a writable
    ``uint8`` ``__array_interface__``; unmapped once garbage collected."""

    def __init__(self, conn: Any, blob_id: int, address: int, size: int) -> None:
        self.blob_id = blob_id
        self.address = address
        self.size = size
        self.__array_interface__ = {
            "shape": (size,),
            "typestr": "|u1",
            "data": (address, False),
            "version": 3,
        }
        self._finalizer = weakref.finalize(self, _unmap, conn, address)

    def __repr__(self) -> str:
        return f"PrivateView <o{self.blob_id:016x}: {self.size} bytes at {self.address:#x}>"


def map_private(client: Any, blob_id: int) -> Any:
    """A writable ``uint8`` NumPy array over a new private copy-on-write view
    of ``blob_id``, which ``client`` must hold (e.g. got with the tree being
    resolved). The array's ``base`` is the :class:`PrivateView`: the view
    lives while the array or anything sharing its memory does."""
    import numpy as np

    conn = client._conn
    ptr = ctypes.POINTER(ctypes.c_uint8)()
    size = ctypes.c_uint64()
    _call("v6d_map_private", client._handle(), blob_id, ctypes.byref(ptr), ctypes.byref(size))
    address = ctypes.cast(ptr, ctypes.c_void_p).value or 0
    return np.asarray(PrivateView(conn, blob_id, address, size.value))


def live_views() -> int:
    """The number of private views mapped in this process."""
    return int(_ffi.lib().v6d_private_views()) if _ffi.usable() else 0
