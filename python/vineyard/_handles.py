"""Owned handles: a connection, the pins of a get, and the views over shared
memory that keep them alive.

Nothing here knows the client: a :class:`Conn` owns one C handle and
disconnects when nothing references it any more; every view (a NumPy array's
:class:`ArrayHolder` base, a :class:`PrivateView`) holds what it reads through,
so closing a client never dangles a view.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import weakref
from typing import Any

import numpy as np

from . import _ffi

__all__ = ["ArrayHolder", "ArrayPin", "Conn", "ForkedPin", "Pin", "PrivateView", "live_views", "map_private"]


def _disconnect(handle: int, queue: Any = None) -> None:
    # queue: the release queue's memory, kept until libv6d forgot it
    if _ffi.usable():
        with contextlib.suppress(Exception):  # best effort at teardown
            _ffi.call("v6d_disconnect", handle)


# The release queue (v6d_release_queue): a pin's release is written to memory
# libv6d reads, not a call, which costs a get about 0.5 µs. Its words are the
# header (written, taken, armed, reserved) and a ring of _QUEUE_RING ids.
_QUEUE_SLOTS = 4
_QUEUE_RING = 4096


def _gil_serialises() -> bool:
    """Whether the GIL serialises the writes of a release: Pin.__del__ writes
    the queue in a few bytecodes with no call in between, where no other
    thread runs; a build without the GIL (3.13t) calls v6d_release."""
    enabled = getattr(sys, "_is_gil_enabled", None)
    return enabled is None or bool(enabled())


class Conn:
    """Owns a C client handle. It disconnects once nothing references it: the
    client and every live view hold it."""

    __slots__ = ("__weakref__", "_finalizer", "c_handle", "handle", "queue", "remote")

    def __init__(self, handle: int, remote: bool = False) -> None:
        self.handle = handle
        self.c_handle = ctypes.c_uint64(handle)  # for _ffi.untyped calls
        # Connected over TCP: the blobs a get returns are private copies
        # (memory libv6d owns), so the views over them are writable.
        self.remote = remote
        # The release queue's words as a memoryview of uint64, or None (a
        # remote client, no GIL, or a library that refused it).
        self.queue: memoryview | None = None
        words = None
        if not remote and _gil_serialises():
            words = (ctypes.c_uint64 * (_QUEUE_SLOTS + _QUEUE_RING))()
            try:
                _ffi.call("v6d_release_queue", handle, words, len(words))
                self.queue = memoryview(words).cast("B").cast("Q")
            except Exception:  # noqa: BLE001 - releases then take a call each
                words = None
        self._finalizer = weakref.finalize(self, _disconnect, handle, words)

    def __repr__(self) -> str:
        return f"Conn <handle {self.handle}>"


_usable = _ffi.usable
_c_uint64 = ctypes.c_uint64
_release_fn: Any = None  # v6d_release, untyped (_ffi.untyped), once loaded
_flush_fn: Any = None  # v6d_release_queue_flush, untyped, once loaded


def _release_function() -> Any:
    global _release_fn
    _release_fn = _ffi.untyped("v6d_release")
    return _release_fn


def _flush_function() -> Any:
    global _flush_fn
    _flush_fn = _ffi.untyped("v6d_release_queue_flush")
    return _flush_fn


class Pin:
    """Keeps what one get pinned alive; releases it when garbage collected.
    (``__del__`` rather than ``weakref.finalize``: a pin is made on every get,
    and a finalizer costs several times more to create.)"""

    __slots__ = ("__weakref__", "conn", "oid", "root", "views")  # pandas tracks a got frame's references by weakref

    def __init__(self, conn: Conn, oid: int, views: dict[int, tuple[int, int]] | None = None) -> None:
        self.conn = conn
        self.oid = oid
        # blob id -> (address, size) of the blobs the get pinned, as the get
        # returned them (v6d_get_object_into): Session.pinned_blob answers
        # from it without a v6d_blob_pointer call.
        self.views = views
        # (root tree, its JSON) while a get resolves: a resolver that hands
        # the tree back to libv6d reuses the JSON instead of re-encoding it.
        self.root: tuple[dict[str, Any], bytes] | None = None

    def __del__(self) -> None:
        # A pin dies on every get: written out, with no contextlib.suppress
        # (a call and a context manager cost). Errors are of no use here (the
        # connection may be gone): no v6d_error.
        try:
            conn = self.conn
            queue = conn.queue
            oid = self.oid
            if queue is not None and oid:
                # The release queue's protocol (v6d.h). From the first read to
                # the last write no call: no other thread runs in between.
                written = queue[0]
                if written - queue[1] < _QUEUE_RING:
                    queue[_QUEUE_SLOTS + written % _QUEUE_RING] = oid
                    queue[0] = written + 1
                    if queue[2] or not _usable():
                        return  # libv6d looks on its own (or this is a forked child)
                    (_flush_fn or _flush_function())(conn.c_handle, None)
                    return
            if _usable():
                (_release_fn or _release_function())(conn.c_handle, _c_uint64(oid), None)
        except Exception:  # noqa: BLE001,S110 - also at interpreter shutdown
            pass

    def __repr__(self) -> str:
        return f"Pin <o{self.oid:016x}>"


class ArrayPin(Pin):
    """The pin of a get that made one NumPy array over one blob, which is
    also that array's base: its ``__array_interface__`` describes the
    view, so a planned get (``vineyard.data.tensor.numpy_plan``) makes one
    object where a pin and an :class:`ArrayHolder` would be two. Read-only
    unless the connection is remote, as :class:`ArrayHolder`."""

    __slots__ = ("__array_interface__",)

    def __init__(self, conn: Conn, oid: int, address: int, shape: tuple[int, ...], typestr: str) -> None:
        self.conn = conn
        self.oid = oid
        self.views = None
        self.root = None
        self.__array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "data": (address, not conn.remote),
            "strides": None,
            "version": 3,
        }


class ForkedPin(Pin):
    """The pin of a get in a forked child (``v6d_forked_get``): a slot of
    the parent's pin page, released with ``v6d_forked_release`` (no Go) when
    garbage collected. In a process forked from this one again the release
    is refused (the slot is this process's) and ignored."""

    __slots__ = ("token",)

    def __init__(self, conn: Conn, oid: int, views: dict[int, tuple[int, int]], token: int) -> None:
        super().__init__(conn, oid, views)
        self.token = token

    def __del__(self) -> None:
        try:
            if self.token:
                token, self.token = self.token, 0
                _ffi.forked_call("v6d_forked_release", self.conn.handle, self.oid, token)
        except Exception:  # noqa: BLE001,S110 - also at interpreter shutdown
            pass

    def __repr__(self) -> str:
        return f"ForkedPin <o{self.oid:016x}, slot {self.token}>"


def forked_get(conn: Conn, oid: int) -> tuple[bytes, ForkedPin]:
    """A get in a forked child: the tree's JSON and the pin of its blobs."""
    from ._bindings import V6DForkedBlob

    tree, tree_len = ctypes.c_void_p(), ctypes.c_size_t()
    blobs, n = ctypes.POINTER(V6DForkedBlob)(), ctypes.c_size_t()
    token = ctypes.c_uint64()
    _ffi.forked_call("v6d_forked_get", conn.handle, oid, ctypes.byref(tree), ctypes.byref(tree_len),
                     ctypes.byref(blobs), ctypes.byref(n), ctypes.byref(token))
    try:
        raw = ctypes.string_at(tree.value or 0, tree_len.value) if tree_len.value else b""
        views = {blobs[i].id: (blobs[i].data or 0, blobs[i].size) for i in range(n.value)}
    finally:
        _ffi.forked_free(tree.value or 0)
        _ffi.forked_free(ctypes.cast(blobs, ctypes.c_void_p).value or 0)
    return raw, ForkedPin(conn, oid, views, token.value)


class ArrayHolder:
    """Exposes a region through ``__array_interface__`` (read-only unless
    asked); it is the ``.base`` of every array built over shared memory and
    keeps its pin (None for a builder's own, unsealed blob). Over a remote
    (TCP) connection the pinned memory is a private copy: writable."""

    def __init__(self, pin: Pin | None, address: int, shape: tuple[int, ...], typestr: str,
                 strides: tuple[int, ...] | None = None, readonly: bool = True) -> None:
        if pin is not None and pin.conn.remote:
            readonly = False
        self.pin = pin
        self.__array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "data": (address, readonly),
            "strides": strides,
            "version": 3,
        }

    def __repr__(self) -> str:
        iface: dict[str, Any] = self.__array_interface__
        return f"ArrayHolder <{iface['typestr']}{list(iface['shape'])} at {iface['data'][0]:#x}>"


# -- private copy-on-write views (v6d_map_private) ---------------------------

def _unmap(conn: Conn, address: int) -> None:
    # conn is passed only to keep the connection open until the view is gone.
    if _ffi.usable():
        with contextlib.suppress(Exception):  # never raise from a finalizer
            _ffi.call("v6d_unmap_private", address)


class PrivateView:
    """One private copy-on-write mapping of a blob, exposed as a writable
    ``uint8`` ``__array_interface__``; unmapped once garbage collected.

    For consumers that cannot be handed read-only memory, such as torch: its
    reads share the store's physical pages (no copy), and the first write to
    a 4 KiB page copies that page into this process; writes never reach the
    store or another reader. The view holds a reference to its blob, so the
    blob's memory is never reused while it is mapped."""

    def __init__(self, conn: Conn, blob_id: int, address: int, size: int) -> None:
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


def map_private(conn: Conn, blob_id: int) -> Any:
    """A writable ``uint8`` NumPy array over a new private copy-on-write view
    of ``blob_id``, which the connection must hold (e.g. got with the tree
    being resolved). The array's ``base`` is the :class:`PrivateView`: the
    view lives while the array or anything sharing its memory does."""
    ptr = ctypes.POINTER(ctypes.c_uint8)()
    size = ctypes.c_uint64()
    if _ffi.forked_child():
        raise _ffi.forked_refusal("a torch tensor's private copy-on-write view")
    _ffi.check_process()
    _ffi.call("v6d_map_private", conn.handle, blob_id, ctypes.byref(ptr), ctypes.byref(size))
    address = ctypes.cast(ptr, ctypes.c_void_p).value or 0
    return np.asarray(PrivateView(conn, blob_id, address, size.value))


def live_views() -> int:
    """The number of private views mapped in this process."""
    return int(_ffi.lib().v6d_private_views()) if _ffi.usable() else 0
