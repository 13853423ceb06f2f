"""The context builders and resolvers work in: one connection's operations
that putting and getting values need, without the client around them.

A :class:`Session` is what :mod:`vineyard.data` builders get as their first
argument (``fn(session, value, **kw)``) and resolvers too (``fn(session,
tree, pin)``): it creates blobs and objects, finds the blobs a get pinned and
maps private views, and nothing else. ``session.client`` is the public
:class:`~vineyard.Client` for anything more (a user's builder may call
``session.client.put``). ``create_blob`` and ``create_metadata`` have the
client's names, so builders written against upstream's client keep working.
"""

from __future__ import annotations

import ctypes
import json
import threading
import weakref
from collections.abc import Sequence
from typing import Any, overload

import numpy as np

from . import _ffi
from ._bindings import V6DError, V6DGetArgs
from ._handles import ArrayHolder, Conn, Pin, forked_get, map_private
from ._types import ObjectID, ObjectMeta
from .errors import Status, exception_for

__all__ = ["INLINE_BYTES", "BlobBuilder", "Session", "address_of"]

# The one inline threshold: a put whose new blobs hold at most this many bytes
# in all sends them with its tree (v6d_put_inline): one round trip instead of
# two; the socket copy is cheaper than the second round trip up to about here
# (docs/performance.md). Larger data is written in place into shared-memory
# blobs.
INLINE_BYTES = 64 << 10

_byref = ctypes.byref


def address_of(data: Any) -> tuple[int, int, Any]:
    """(address, nbytes, object keeping them alive) of contiguous data."""
    arr = data if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)
    return arr.ctypes.data, arr.nbytes, arr


class _Room:
    """The memory a get (v6d_get_object_args) or a small put (v6d_put_inline)
    writes into, one per thread (:func:`_room`): neither allocates in C, nor
    makes ctypes objects in Python, whose conversions cost more than the
    call (a put through :func:`_ffi.call` took 7.3 µs, the call itself 3.2).
    The get's part grows when a tree or a blob list does not fit. A plain
    object in a thread-local rather than a ``threading.local`` subclass,
    whose every attribute load is a lookup in the thread's dict."""

    __slots__ = ("addr", "args", "args_ref", "blobs", "buf", "cap", "datas", "get", "ids", "put", "put_address",
                 "put_args", "put_err", "put_id", "put_len", "put_size", "sizes", "words")

    def __init__(self) -> None:
        # One argument for the call (13 cost 0.5 µs more), its words read
        # and written by index (cheaper than a field of the struct):
        # _W_ID the object, _W_LEN, _W_NBLOBS and _W_SHAPE what the get wrote.
        self.args = V6DGetArgs()
        self.args_ref = _byref(self.args)
        self.words = memoryview(self.args).cast("B").cast("Q")
        self.get = _ffi.untyped("v6d_get_object_args")
        self.grow(4096, 16)
        # A put of one inline blob: its arguments after (client, json),
        # with the values set per put.
        self.put = _ffi.untyped("v6d_put_inline")
        self.put_len, self.put_address, self.put_size = ctypes.c_size_t(), ctypes.c_void_p(), ctypes.c_uint64()
        self.put_id, self.put_err = ctypes.c_uint64(), V6DError()
        self.put_args = (self.put_len, ctypes.c_size_t(1), _byref(self.put_address), _byref(self.put_size), None,
                         _byref(self.put_id), _byref(self.put_err))

    def grow(self, cap: int, blobs: int) -> None:
        self.cap = cap
        self.buf = ctypes.create_string_buffer(cap)
        self.addr = ctypes.addressof(self.buf)
        self.blobs = blobs
        self.ids = (ctypes.c_uint64 * blobs)()
        self.datas = (ctypes.c_void_p * blobs)()
        self.sizes = (ctypes.c_uint64 * blobs)()
        args = self.args
        args.json, args.cap, args.max_blobs = self.addr, cap, blobs
        args.blob_ids = ctypes.cast(self.ids, ctypes.POINTER(ctypes.c_uint64))
        args.datas = ctypes.cast(self.datas, ctypes.POINTER(ctypes.c_void_p))
        args.sizes = ctypes.cast(self.sizes, ctypes.POINTER(ctypes.c_uint64))


# Words of v6d_get_args (_Room.words).
_W_ID = V6DGetArgs.id.offset // 8
_W_LEN = V6DGetArgs.len.offset // 8
_W_NBLOBS = V6DGetArgs.n_blobs.offset // 8
_W_SHAPE = V6DGetArgs.shape.offset // 8

_rooms = threading.local()


def _room() -> _Room:
    """This thread's room (a get's and a small put's)."""
    try:
        return _rooms.room  # type: ignore[no-any-return]
    except AttributeError:
        room = _rooms.room = _Room()
        return room


_string_at = ctypes.string_at
_usable = _ffi.usable


def _blob_id(value: Any) -> int:
    """The id of a tree's ``"id"`` text, faster than ObjectID for the
    canonical ``o`` + 16 hex digits (every id the daemon writes); anything
    else goes through ObjectID, which explains what it refuses."""
    if type(value) is str and len(value) == 17 and value[0] == "o":
        digits = value[1:]
        if digits.isascii() and digits.isalnum():
            try:
                return int(digits, 16)
            except ValueError:
                pass
    return int(ObjectID(value))


def _inline_total(inline: Sequence[tuple[dict[str, Any], Any]]) -> int:
    total = 0
    for _, d in inline:
        total += d.nbytes if hasattr(d, "nbytes") else memoryview(d).nbytes
    return total


class Session:
    """One connection's put/get operations (see the module docstring)."""

    __slots__ = ("_client", "conn")

    def __init__(self, conn: Conn, client: Any = None) -> None:
        self.conn: Conn | None = conn
        self._client = weakref.ref(client) if client is not None else None

    @property
    def client(self) -> Any:
        """The :class:`~vineyard.Client` this session belongs to (held
        weakly: a session never keeps its client alive)."""
        client = self._client() if self._client is not None else None
        if client is None:
            raise exception_for(Status.INVALID_HANDLE, "vineyard: the client of this session is gone")
        return client

    def handle(self) -> int:
        """The C handle; raises if the client is closed or this process is a
        fork of the one that connected."""
        conn = self.conn
        if conn is None:
            raise exception_for(Status.INVALID_HANDLE, "vineyard: the client is closed")
        _ffi.check_process()
        return conn.handle

    @property
    def connected(self) -> bool:
        """False once the client is closed or the daemon is gone
        (``v6d_connected``); never blocks."""
        conn = self.conn
        if conn is None:
            return False
        if not _ffi.usable():
            return False  # a forked child: nothing here may call into libv6d
        return bool(_ffi.function("v6d_connected")(conn.handle))

    def pin(self, oid: int) -> Pin:
        """A pin of ``oid``, whose blobs this connection holds (from a get)."""
        conn = self.conn
        if conn is None:
            raise exception_for(Status.INVALID_HANDLE, "vineyard: the client is closed")
        return Pin(conn, oid)

    def get(self, oid: int) -> tuple[bytes, Pin]:
        """One get (no round trip when the directory has ``oid``): the tree's
        JSON, and the pin of every blob in it, which knows their views."""
        room, n, nblobs = self._get_into(oid)
        return _string_at(room.addr, n), self._pin(room, oid, nblobs)

    def get_planned(self, oid: int, plans: dict[int, Any]) -> tuple[Any, bytes | None, Pin | None, int]:
        """A get that first asks ``plans`` (tree shape number, see
        v6d_get_object_args → ``plan(conn, oid, address, size)``, the
        value, which holds the get's pin, or None) for a tree of one blob:
        ``(value, None, None, shape)`` when a plan made the value, else
        ``(None, raw, pin, shape)`` as :meth:`get` returns them (shape 0:
        the tree has none). The hot path of every get: written out, each
        call and attribute load here costs a get about 0.1 µs."""
        conn = self.conn
        if conn is None or not _usable():
            if conn is not None and _ffi.forked_child():
                raw, pin = forked_get(conn, oid)  # no Go: the directory, pinned in the parent's page
                return None, raw, pin, 0
            self.handle()  # raises: closed, or a forked child
        room = _room()
        words = room.words
        words[_W_ID] = oid
        status = room.get(conn.c_handle, room.args_ref)  # type: ignore[union-attr]
        n, nblobs, shape = words[_W_LEN], words[_W_NBLOBS], words[_W_SHAPE]
        if status or n > room.cap or nblobs > room.blobs:
            room, n, nblobs = self._get_into(oid, status)
            shape = room.words[_W_SHAPE]
        if nblobs == 1:
            plan = plans.get(shape)
            if plan is not None:
                address, size = room.datas[0] or 0, room.sizes[0]
                value = plan(conn, oid, address, size)
                if value is not None:
                    return value, None, None, shape
                return None, _string_at(room.addr, n), Pin(conn, oid, {room.ids[0]: (address, size)}), shape  # type: ignore[arg-type]
        return None, _string_at(room.addr, n), self._pin(room, oid, nblobs), shape

    def _get_into(self, oid: int, status: int | None = None) -> tuple[_Room, int, int]:
        """v6d_get_object_args into this thread's room, grown until the tree
        and the blob list fit: (room, tree length, blob count). ``status``:
        that of a get just made into the room, which is then not made again
        unless it did not fit."""
        handle = self.handle()
        conn = self.conn
        assert conn is not None
        room = _room()
        while True:
            if status is None:
                room.words[_W_ID] = oid
                status = room.get(conn.c_handle, room.args_ref)
            if status:
                _ffi.raise_status(status, room.args.err)
            n, nblobs = room.words[_W_LEN], room.words[_W_NBLOBS]
            if n <= room.cap and nblobs <= room.blobs:
                return room, n, nblobs
            # Too little room: the get is done; drop it and get again with more.
            _ffi.call("v6d_release", handle, oid)
            room.grow(max(n, room.cap), max(nblobs, room.blobs))
            status = None

    def _pin(self, room: _Room, oid: int, nblobs: int) -> Pin:
        """The pin of the get just made into ``room``."""
        ids, datas, sizes = room.ids, room.datas, room.sizes
        if nblobs == 1:
            views = {ids[0]: (datas[0] or 0, sizes[0])}
        else:
            views = {ids[i]: (datas[i] or 0, sizes[i]) for i in range(nblobs)}
        return Pin(self.conn, oid, views)  # type: ignore[arg-type]

    def pinned_blob(self, pin: Pin | None, blob_id: int | str) -> tuple[int, int]:
        """(address, size) of a blob of the get that made ``pin`` (its id, or
        the id's text as the tree holds it): from the views that get
        returned, else as :meth:`blob_pointer`."""
        if type(blob_id) is not int:
            blob_id = _blob_id(blob_id)
        views = pin.views if pin is not None else None
        if views:
            view = views.get(blob_id)
            if view is not None:
                return view
        return self.blob_pointer(blob_id)

    # -- blobs ------------------------------------------------------------

    @overload
    def create_blob(self, size: int) -> BlobBuilder: ...
    @overload
    def create_blob(self, size: Sequence[int]) -> list[BlobBuilder]: ...

    def create_blob(self, size: int | Sequence[int]) -> BlobBuilder | list[BlobBuilder]:
        """Creates unsealed blob(s): a BlobBuilder, or a list of them (one
        round trip) for a list of sizes."""
        if not isinstance(size, int):
            sizes = list(size)
            n = len(sizes)
            if any(s < 0 for s in sizes):
                raise ValueError("blob size must not be negative")
            c_sizes = (ctypes.c_uint64 * n)(*sizes)
            c_ids = (ctypes.c_uint64 * n)()
            c_ptrs = (ctypes.POINTER(ctypes.c_uint8) * n)()
            _ffi.call("v6d_create_buffers", self.handle(), n, c_sizes, c_ids, c_ptrs)
            return [BlobBuilder(self, c_ids[i], ctypes.cast(c_ptrs[i], ctypes.c_void_p).value or 0, sizes[i])
                    for i in range(n)]
        if size < 0:
            raise ValueError("blob size must not be negative")
        oid, ptr = ctypes.c_uint64(), ctypes.c_void_p()
        _ffi.call("v6d_create_buffer", self.handle(), size, _byref(oid), _byref(ptr))
        return BlobBuilder(self, oid.value, ptr.value or 0, size)

    def blob_pointer(self, blob_id: int) -> tuple[int, int]:
        """(address, size) of a blob this connection holds; no round trip."""
        ptr, size = ctypes.c_void_p(), ctypes.c_uint64()
        _ffi.call_retrying("v6d_blob_pointer", self.handle(), blob_id, _byref(ptr), _byref(size), None)
        return ptr.value or 0, size.value

    def map_private(self, blob_id: int) -> Any:
        """A writable copy-on-write ``uint8`` NumPy array over a blob this
        connection holds (see :func:`vineyard._handles.map_private`)."""
        if self.conn is not None and _ffi.forked_child():
            raise _ffi.forked_refusal("a torch tensor's private copy-on-write view")
        self.handle()  # closed / forked checks
        assert self.conn is not None
        return map_private(self.conn, blob_id)

    # -- objects ----------------------------------------------------------

    def create_metadata(self, meta: ObjectMeta, seal: Sequence[int] = ()) -> ObjectMeta:
        """Creates an object from ``meta``, and every member tree in it that
        has no id yet, in one round trip; the unsealed blobs it references
        (``meta.seal_ids``) and those in ``seal`` are sealed first. Returns the
        stored metadata (with ids)."""
        p, ln = ctypes.c_void_p(), ctypes.c_size_t()
        self.create(meta, seal, p, ln)
        return ObjectMeta(json.loads(_ffi.take_string(p, ln)))

    def create(self, meta: ObjectMeta, seal: Sequence[int] = (), tree: ctypes.c_void_p | None = None,
               tree_len: ctypes.c_size_t | None = None) -> ObjectID:
        """create_metadata's round trip; the stored tree is copied out only
        when ``tree`` is given (a put needs just the id). Blobs the tree
        carries by value go with it (v6d_put_inline) when they are few and
        small, else into shared-memory blobs first."""
        if meta.inline_data:
            inline = meta.inline_data
            if tree is None and not seal and not meta.seal_ids and _inline_total(inline) <= INLINE_BYTES:
                return self.put_inline(meta.to_json().encode(), [d for _, d in inline])[0]
            self._materialize_inline(meta)
        body = meta.to_json().encode()
        builders = meta.sealing_builders
        for builder in builders:
            builder.revoke_views()  # before anything is sealed: may refuse
        to_seal = [*meta.seal_ids, *seal]
        n = len(to_seal)
        c_seal = (ctypes.c_uint64 * n)(*to_seal) if n else None
        oid = ctypes.c_uint64()
        handle = self.handle()
        _ffi.call("v6d_create_metadata", handle, body, len(body), c_seal, n, _byref(oid),
                  None if tree is None else _byref(tree), None if tree_len is None else _byref(tree_len))
        meta.seal_ids.clear()
        for builder in builders:
            builder.issealed = True
        builders.clear()
        if n:
            # Drop the references sealing took (no round trip): a put keeps
            # no view, and holding them would keep the memory after a delete.
            _ffi.call("v6d_release", handle, oid.value)
        return ObjectID(oid.value)

    def put_inline(self, body: bytes | None, datas: Sequence[Any]) -> tuple[ObjectID, list[ObjectID]]:
        """One round trip: new sealed blobs holding copies of ``datas`` and,
        unless ``body`` is None, the object of that tree (v6d_put_inline)."""
        n = len(datas)
        addrs = (ctypes.c_void_p * n)()
        sizes = (ctypes.c_uint64 * n)()
        keep = []
        for i, d in enumerate(datas):
            addrs[i], sizes[i], view = address_of(d)
            keep.append(view)
        bids = (ctypes.c_uint64 * n)()
        oid = ctypes.c_uint64()
        _ffi.call("v6d_put_inline", self.handle(), body, len(body) if body else 0, n, addrs, sizes, bids,
                  _byref(oid))
        del keep
        return ObjectID(oid.value), [ObjectID(b) for b in bids]

    def put_tree_inline(self, body: bytes, address: int, nbytes: int) -> ObjectID:
        """One round trip: the object of tree ``body``, whose one inline
        member (``{"inline": 0}``) is a new sealed blob of the ``nbytes``
        bytes at ``address`` (kept alive by the caller): :meth:`put_inline`
        without its per-call lists, for the small-array put."""
        conn = self.conn
        if conn is None or not _usable():
            self.handle()  # raises: closed, or a forked child
        room = _room()
        room.put_len.value, room.put_address.value, room.put_size.value = len(body), address, nbytes
        status = room.put(conn.c_handle, body, *room.put_args)  # type: ignore[union-attr]
        if status:
            _ffi.raise_status(status, room.put_err)
        return ObjectID(room.put_id.value)

    def _materialize_inline(self, meta: ObjectMeta) -> None:
        """Turns the inline blobs of a tree into shared-memory blobs (one
        round trip), for data too large to send by value."""
        inline = meta.inline_data
        sources = [address_of(d) for _, d in inline]
        builders = self.create_blob([size for _, size, _ in sources])
        for (placeholder, _), (address, size, _view), builder in zip(inline, sources, builders):
            if size:
                ctypes.memmove(builder.address, address, size)
            placeholder.clear()
            placeholder["id"] = repr(builder.id)
            if not builder.issealed:
                meta.seal_ids.append(int(builder.id))
        inline.clear()

    def delete(self, object_ids: Sequence[int], flags: int = 0) -> None:
        """Deletes objects (``flags``: v6d_delete's, see Client.delete)."""
        c_ids = (ctypes.c_uint64 * len(object_ids))(*object_ids)
        _ffi.call("v6d_delete", self.handle(), len(object_ids), c_ids, flags)

    def __repr__(self) -> str:
        return f"Session <{self.conn!r}>"


class BlobBuilder:
    """An unsealed blob this client created: a writable buffer until sealed."""

    def __init__(self, session: Session, oid: int, address: int, size: int) -> None:
        self._session = session
        self.id = ObjectID(oid)
        self.address = address
        self.size = size
        self.issealed = oid == 1 << 63  # the empty blob is sealed by nature
        self._view: Any = None  # made on first use: put's memmove path never needs it
        self._exports: list[memoryview] = []  # views memoryview() handed out, released at seal

    @property
    def _array(self) -> Any:
        if self.issealed and self.size:
            raise ValueError(f"vineyard: blob {self.id!r} is sealed, its bytes are immutable; get the blob "
                             "(client.get_blob) to read them")
        if self._view is None:
            if self.size:
                self._view = np.asarray(ArrayHolder(None, self.address, (self.size,), "|u1", readonly=False))
            else:
                self._view = np.zeros(0, dtype=np.uint8)
        return self._view

    def __len__(self) -> int:
        return self.size

    def memoryview(self) -> memoryview:
        """A writable memoryview of the bytes, until the blob is sealed:
        sealing releases it (a later use raises ValueError), and refuses with
        BufferError while an export of it is held (a ``PickleBuffer``...).
        Arrays made from it before sealing (``np.frombuffer(view)``, slices)
        keep a raw pointer Python cannot revoke: never write through them
        after seal; write with :meth:`copy` or through the view itself."""
        view = memoryview(self._array)
        self._exports.append(view)
        return view

    def revoke_views(self) -> None:
        """Releases every view :meth:`memoryview` handed out and makes the
        builder's own array read-only, before sealing. Raises BufferError,
        and seals nothing, while another object still holds a buffer taken
        from one of those views."""
        held = 0
        for view in self._exports:
            try:
                view.release()
            except BufferError:
                held += 1
        if held:
            raise BufferError(f"vineyard: cannot seal blob {self.id!r}: {held} export(s) of its memoryview() "
                              "are still alive; release them first, a sealed blob must not be writable")
        self._exports.clear()
        if self._view is not None:
            self._view.flags.writeable = False
            self._view = None

    def copy(self, offset: int, data: Any) -> None:
        """Copies bytes-like ``data`` into the blob at ``offset``."""
        src = memoryview(data).cast("B")
        if offset < 0 or offset + src.nbytes > self.size:
            raise ValueError(f"copy of {src.nbytes} bytes at {offset} exceeds blob of {self.size}")
        self._array[offset:offset + src.nbytes] = src

    def seal(self, client: Any = None) -> Any:
        """Seals the blob; it becomes immutable and readable by others.
        Returns it as upstream's seal does: a read-only :class:`Blob` of the
        sealed bytes (``blob.id`` its id; a Blob is taken wherever an id is),
        which keeps the blob pinned while it lives, as a got Blob does. The
        builder's memory must not be written afterwards. ``client`` is
        accepted for upstream's signature and ignored: a builder seals
        through the connection that created it."""
        from ._objects import Blob

        handle = self._session.handle()
        self.revoke_views()
        _ffi.call("v6d_seal", handle, int(self.id))
        self.issealed = True
        if not self.size:
            return Blob(int(self.id), 0, 0, None)
        # The reference sealing gave this connection is the Blob's pin.
        return Blob(int(self.id), self.address, self.size, self._session.pin(int(self.id)))

    def _seal_id(self) -> ObjectID:
        """Seals the blob and returns its id, keeping no reference (holding
        one would keep the blob's memory after a delete): puts use this."""
        handle = self._session.handle()
        self.revoke_views()
        _ffi.call("v6d_seal", handle, int(self.id))
        self.issealed = True
        _ffi.call("v6d_release", handle, int(self.id))
        return self.id

    def abort(self, client: Any = None) -> None:
        """Drops the unsealed blob and frees its memory (``client`` is
        ignored, as in :meth:`seal`); its views are released first, as by
        :meth:`seal`, so none is left over freed memory."""
        self.revoke_views()
        _ffi.call("v6d_abort", self._session.handle(), int(self.id))

    def shrink(self, client: Any, size: int) -> None:
        """Shrinks the unsealed blob to ``size`` bytes (``client`` is
        ignored, as in :meth:`seal`)."""
        _ffi.call("v6d_shrink", self._session.handle(), int(self.id), int(size))
        self.size = size

    def __repr__(self) -> str:
        return f"BlobBuilder <{self.id!r}: {self.size} bytes>"
