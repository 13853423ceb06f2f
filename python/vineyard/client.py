"""The client: one connection to a vineyardd, with upstream Vineyard's API."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import threading
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Union, cast

if TYPE_CHECKING:
    from typing_extensions import Self

from . import _ffi
from ._bindings import V6DError
from ._types import ObjectID, ObjectMeta
from .errors import Status, TimeoutException, exception_for

__all__ = ["Blob", "BlobBuilder", "Client", "InstanceStatus", "connect"]

IdLike = Union[ObjectID, int, str, ObjectMeta]


def _id(value: IdLike) -> int:
    if isinstance(value, ObjectMeta):
        return int(value.id)
    return int(ObjectID(value))


_fns: dict[str, Any] = {}  # name -> bound library function, filled on first use
_byref = ctypes.byref


def _fn(name: str) -> Any:
    fn = _fns.get(name)
    if fn is None:
        fn = _fns[name] = getattr(_ffi.lib(), name)
    return fn


def _call(name: str, *args: Any) -> None:
    """Calls a v6d function and raises its status as an exception. The fork
    guard is the caller's: every client call takes its handle from
    ``Client._handle()``, which checks the process first."""
    err = V6DError()
    status = (_fns.get(name) or _fn(name))(*args, _byref(err))
    if status != 0:
        message = ctypes.string_at(err.message).decode("utf-8", "replace") if err.message else ""
        _fn("v6d_error_release")(_byref(err))
        raise exception_for(status, message)


def _take_string(p: ctypes.c_void_p, n: ctypes.c_size_t) -> bytes:
    """Copies and frees a library-allocated string."""
    if not p.value:
        return b""
    try:
        return ctypes.string_at(p.value, n.value)
    finally:
        _fn("v6d_free")(p)


def _disconnect(handle: int) -> None:
    if _ffi.usable():
        with contextlib.suppress(Exception):  # best effort at teardown
            _call("v6d_disconnect", handle)


# Inline puts (v6d_put_inline) send the bytes through the socket: one round
# trip instead of two, which pays up to a few hundred KiB.
INLINE_LIMIT = 256 << 10


def _address_of(data: Any) -> tuple[int, int, Any]:
    """(address, nbytes, object keeping them alive) of contiguous data."""
    import numpy as np

    arr = data if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)
    return arr.ctypes.data, arr.nbytes, arr


def _inline_total(inline: Sequence[tuple[dict[str, Any], Any]]) -> int:
    total = 0
    for _, d in inline:
        total += d.nbytes if hasattr(d, "nbytes") else memoryview(d).nbytes
    return total


class _Conn:
    """Owns a C handle. It disconnects once nothing references it: the client
    and every live view hold it, so closing a client never dangles a view."""

    def __init__(self, handle: int) -> None:
        self.handle = handle
        self._finalizer = weakref.finalize(self, _disconnect, handle)


def _release(conn: _Conn, oid: int) -> None:
    if _ffi.usable():
        with contextlib.suppress(Exception):  # the connection may be gone
            _call("v6d_release", conn.handle, oid)


class _Pin:
    """Keeps what one get pinned alive; releases it when garbage collected.
    (``__del__`` rather than ``weakref.finalize``: a pin is made on every get,
    and a finalizer costs several times more to create.)"""

    __slots__ = ("__weakref__", "conn", "oid", "root")  # pandas tracks a got frame's references by weakref

    def __init__(self, conn: _Conn, oid: int) -> None:
        self.conn = conn
        self.oid = oid
        # (root tree, its JSON) while a get resolves: a resolver that hands
        # the tree back to libv6d reuses the JSON instead of re-encoding it.
        self.root: tuple[dict[str, Any], bytes] | None = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # also at interpreter shutdown
            _release(self.conn, self.oid)


class _ArrayHolder:
    """Exposes a read-only region through ``__array_interface__``; it is the
    ``.base`` of every array built over shared memory and keeps its pin."""

    def __init__(self, pin: _Pin | None, address: int, shape: tuple[int, ...], typestr: str,
                 strides: tuple[int, ...] | None = None, readonly: bool = True) -> None:
        self.pin = pin
        self.__array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "data": (address, readonly),
            "strides": strides,
            "version": 3,
        }


def _blob_base() -> type:
    import numpy as np

    return np.ndarray


class Blob(_blob_base()):  # type: ignore[misc]
    """A sealed blob: a read-only uint8 buffer over shared memory (supports the
    buffer protocol: ``memoryview(blob)``, ``bytes(blob)``); ``id``, ``size``,
    ``address`` as upstream. It keeps its blob pinned while it lives."""

    def __new__(cls, oid: int, address: int, size: int, pin: _Pin | None) -> Self:
        import numpy as np

        if size:
            base = np.asarray(_ArrayHolder(pin, address, (size,), "|u1"))
        else:
            base = np.zeros(0, dtype=np.uint8)
            base.flags.writeable = False
        self: Any = base.view(cls)
        self.id = ObjectID(oid)
        self.address = address
        return self

    def __array_finalize__(self, obj: Any) -> None:
        self.id = getattr(obj, "id", ObjectID())
        self.address = getattr(obj, "address", 0)

    def memoryview(self) -> memoryview:
        """A read-only memoryview of the bytes."""
        return memoryview(self)

    def __repr__(self) -> str:
        return f"Blob <{self.id!r}: {self.size} bytes>"


class Object:
    """An object got from the store: its metadata, with ``id``, ``typename``,
    ``nbytes`` and ``member(name)``. One from :meth:`Client.get_object` keeps
    the blobs of its tree pinned while it lives."""

    def __init__(self, meta: ObjectMeta, pin: _Pin | None = None) -> None:
        self.meta = meta
        self._pin = pin

    @property
    def id(self) -> ObjectID:
        return self.meta.id

    @property
    def typename(self) -> str:
        return self.meta.typename

    @property
    def nbytes(self) -> int:
        return self.meta.nbytes

    @property
    def signature(self) -> int:
        return self.meta.signature

    def member(self, name: str) -> Object:
        from . import data

        meta = self.meta.member(name)
        return data.object_type(meta.typename)(meta, self._pin)

    def __getitem__(self, name: str) -> Object:
        return self.member(name)

    def __repr__(self) -> str:
        return f'Object <"{self.id!r}": {self.typename}>'


class BlobBuilder:
    """An unsealed blob this client created: a writable buffer until sealed."""

    def __init__(self, client: Client, oid: int, address: int, size: int) -> None:
        self._client = client
        self.id = ObjectID(oid)
        self.address = address
        self.size = size
        self.issealed = oid == 1 << 63  # the empty blob is sealed by nature
        self._view: Any = None  # made on first use: put's memmove path never needs it

    @property
    def _array(self) -> Any:
        if self._view is None:
            import numpy as np

            if self.size:
                self._view = np.asarray(_ArrayHolder(None, self.address, (self.size,), "|u1", readonly=False))
            else:
                self._view = np.zeros(0, dtype=np.uint8)
        return self._view

    def __len__(self) -> int:
        return self.size

    def memoryview(self) -> memoryview:
        """A writable memoryview of the bytes (do not use after seal)."""
        return memoryview(self._array)

    def copy(self, offset: int, data: Any) -> None:
        """Copies bytes-like ``data`` into the blob at ``offset``."""
        src = memoryview(data).cast("B")
        if offset < 0 or offset + src.nbytes > self.size:
            raise ValueError(f"copy of {src.nbytes} bytes at {offset} exceeds blob of {self.size}")
        self._array[offset:offset + src.nbytes] = src

    def seal(self, client: Client | None = None) -> ObjectID:
        """Seals the blob; it becomes immutable and readable by others. The
        builder's memory must not be used afterwards: get the blob to read it."""
        handle = self._client._handle()
        _call("v6d_seal", handle, int(self.id))
        self.issealed = True
        # Sealing gave this connection a reference; nothing here reads through
        # it, and holding it would keep the blob's memory after a delete.
        _call("v6d_release", handle, int(self.id))
        return self.id

    def abort(self, client: Client | None = None) -> None:
        """Drops the unsealed blob and frees its memory."""
        _call("v6d_abort", self._client._handle(), int(self.id))

    def shrink(self, client: Client | None, size: int) -> None:
        """Shrinks the unsealed blob to ``size`` bytes."""
        _call("v6d_shrink", self._client._handle(), int(self.id), int(size))
        self.size = size

    def __repr__(self) -> str:
        return f"BlobBuilder <{self.id!r}: {self.size} bytes>"


class InstanceStatus:
    """The daemon's status (memory usage and limit, connections)."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.instance_id = int(fields.get("instance_id", 0))
        self.deployment = str(fields.get("deployment", ""))
        self.memory_usage = int(fields.get("memory_usage", 0))
        self.memory_limit = int(fields.get("memory_limit", 0))
        self.deferred_requests = int(fields.get("deferred_requests", 0))
        self.ipc_connections = int(fields.get("ipc_connections", 0))
        self.rpc_connections = int(fields.get("rpc_connections", 0))

    def __repr__(self) -> str:
        return "InstanceStatus " + json.dumps(vars(self))


class Client:
    """A connection to one vineyardd. Safe to share between threads.

    Use :func:`vineyard.connect` to make one.
    """

    def __init__(self, socket: str | None = None) -> None:
        path = socket or os.environ.get("VINEYARD_IPC_SOCKET", "")
        if not path:
            raise ConnectionError("vineyard: no socket given and VINEYARD_IPC_SOCKET is not set")
        out = ctypes.c_uint64()
        try:
            _call("v6d_connect", path.encode(), ctypes.byref(out))
        except Exception as e:
            if isinstance(e, ConnectionError):
                raise
            raise ConnectionError(f"vineyard: cannot connect to {path}: {e}") from e
        self._conn: _Conn | None = _Conn(out.value)
        self.ipc_socket = path
        iid = ctypes.c_uint64()
        _call("v6d_instance_id", out.value, ctypes.byref(iid))
        self.instance_id = iid.value
        self._lock = threading.Lock()

    # -- plumbing ---------------------------------------------------------

    def _handle(self) -> int:
        conn = self._conn
        if conn is None:
            raise exception_for(Status.INVALID_HANDLE, "vineyard: the client is closed")
        _ffi.check_process()
        return conn.handle

    @property
    def connected(self) -> bool:
        return self._conn is not None

    def close(self) -> None:
        """Closes the client. Views got from it stay valid: the connection is
        released when the last of them is gone. Idempotent."""
        self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "connected" if self.connected else "closed"
        return f"Client <{self.ipc_socket}, instance {self.instance_id}, {state}>"

    def _json_out(self, name: str, *args: Any) -> Any:
        p, n = ctypes.c_void_p(), ctypes.c_size_t()
        _call(name, self._handle(), *args, ctypes.byref(p), ctypes.byref(n))
        return json.loads(_take_string(p, n) or b"null")

    # -- blobs ------------------------------------------------------------

    def create_blob(self, size: int | Sequence[int]) -> Any:
        """Creates unsealed blob(s): a BlobBuilder, or a list for a list of sizes."""
        if not isinstance(size, int):
            sizes = list(size)
            n = len(sizes)
            c_sizes = (ctypes.c_uint64 * n)(*sizes)
            c_ids = (ctypes.c_uint64 * n)()
            c_ptrs = (ctypes.POINTER(ctypes.c_uint8) * n)()
            _call("v6d_create_buffers", self._handle(), n, c_sizes, c_ids, c_ptrs)
            return [BlobBuilder(self, c_ids[i], ctypes.cast(c_ptrs[i], ctypes.c_void_p).value or 0, sizes[i])
                    for i in range(n)]
        if size < 0:
            raise ValueError("blob size must not be negative")
        oid, ptr = ctypes.c_uint64(), ctypes.c_void_p()
        _call("v6d_create_buffer", self._handle(), size, _byref(oid), _byref(ptr))
        return BlobBuilder(self, oid.value, ptr.value or 0, size)

    def create_empty_blob(self) -> Blob:
        return Blob(1 << 63, 0, 0, None)

    def get_blob(self, object_id: IdLike, unsafe: bool = False) -> Blob:
        return self.get_blobs([object_id], unsafe)[0]

    def get_blobs(self, object_ids: Sequence[IdLike], unsafe: bool = False) -> list[Blob]:
        idl = [_id(i) for i in object_ids]
        n = len(idl)
        c_ids = (ctypes.c_uint64 * n)(*idl)
        c_ptrs = (ctypes.POINTER(ctypes.c_uint8) * n)()
        c_sizes = (ctypes.c_uint64 * n)()
        conn = self._conn
        _call("v6d_get_buffers", self._handle(), n, c_ids, 1 if unsafe else 0, c_ptrs, c_sizes)
        assert conn is not None
        return [Blob(idl[i], ctypes.cast(c_ptrs[i], ctypes.c_void_p).value or 0, c_sizes[i], _Pin(conn, idl[i]))
                for i in range(n)]

    def _blob_pointer(self, blob_id: int) -> tuple[int, int]:
        """(address, size) of a blob this client holds; no round trip."""
        ptr, size = ctypes.c_void_p(), ctypes.c_uint64()
        _call("v6d_blob_pointer", self._handle(), blob_id, _byref(ptr), _byref(size), None)
        return ptr.value or 0, size.value

    # -- metadata ---------------------------------------------------------

    def create_metadata(self, meta: ObjectMeta, seal: Sequence[int] = ()) -> ObjectMeta:
        """Creates an object from ``meta``, and every member tree in it that
        has no id yet, in one round trip; the unsealed blobs it references
        (``meta.seal_ids``) and those in ``seal`` are sealed first. Returns the
        stored metadata (with ids)."""
        p, ln = ctypes.c_void_p(), ctypes.c_size_t()
        self._create(meta, seal, p, ln)
        return ObjectMeta(json.loads(_take_string(p, ln)))

    def _create(self, meta: ObjectMeta, seal: Sequence[int] = (), tree: ctypes.c_void_p | None = None,
                tree_len: ctypes.c_size_t | None = None) -> ObjectID:
        """create_metadata's round trip; the stored tree is copied out only
        when ``tree`` is given (a put needs just the id). Blobs the tree
        carries by value go with it (v6d_put_inline) when they are few and
        small, else into shared-memory blobs first."""
        if meta.inline_data:
            inline = meta.inline_data
            if tree is None and not seal and not meta.seal_ids and _inline_total(inline) <= INLINE_LIMIT:
                return self._put_inline(meta.to_json().encode(), [d for _, d in inline])[0]
            self._materialize_inline(meta)
        body = meta.to_json().encode()
        to_seal = [*meta.seal_ids, *seal]
        n = len(to_seal)
        c_seal = (ctypes.c_uint64 * n)(*to_seal) if n else None
        oid = ctypes.c_uint64()
        handle = self._handle()
        _call("v6d_create_metadata", handle, body, len(body), c_seal, n, _byref(oid),
              None if tree is None else _byref(tree), None if tree_len is None else _byref(tree_len))
        meta.seal_ids.clear()
        if n:
            # Drop the references sealing took (no round trip): a put keeps
            # no view, and holding them would keep the memory after a delete.
            _call("v6d_release", handle, oid.value)
        return ObjectID(oid.value)

    def _put_inline(self, body: bytes | None, datas: Sequence[Any]) -> tuple[ObjectID, list[ObjectID]]:
        """One round trip: new sealed blobs holding copies of ``datas`` and,
        unless ``body`` is None, the object of that tree (v6d_put_inline)."""
        n = len(datas)
        addrs = (ctypes.c_void_p * n)()
        sizes = (ctypes.c_uint64 * n)()
        keep = []
        for i, d in enumerate(datas):
            addrs[i], sizes[i], view = _address_of(d)
            keep.append(view)
        bids = (ctypes.c_uint64 * n)()
        oid = ctypes.c_uint64()
        _call("v6d_put_inline", self._handle(), body, len(body) if body else 0, n, addrs, sizes, bids, _byref(oid))
        del keep
        return ObjectID(oid.value), [ObjectID(b) for b in bids]

    def _materialize_inline(self, meta: ObjectMeta) -> None:
        """Turns the inline blobs of a tree into shared-memory blobs (one
        round trip), for data too large to send by value."""
        inline = meta.inline_data
        sources = [_address_of(d) for _, d in inline]
        builders = self.create_blob([size for _, size, _ in sources])
        for (placeholder, _), (address, size, _view), builder in zip(inline, sources, builders):
            if size:
                ctypes.memmove(builder.address, address, size)
            placeholder.clear()
            placeholder["id"] = repr(builder.id)
            if not builder.issealed:
                meta.seal_ids.append(int(builder.id))
        inline.clear()

    def get_meta(self, object_id: IdLike, sync_remote: bool = True) -> ObjectMeta:
        """Returns the metadata tree of an object."""
        tree = self._json_out("v6d_get_metadata", _id(object_id))
        return ObjectMeta(tree)

    def get_metas(self, object_ids: Sequence[IdLike], sync_remote: bool = True) -> list[ObjectMeta]:
        return [self.get_meta(i) for i in object_ids]

    def list_metadatas(self, pattern: str = "*", regex: bool = False, limit: int = 5,
                       nobuffer: bool = False) -> list[ObjectMeta]:
        content = self._json_out("v6d_list", pattern.encode(), 1 if regex else 0, limit)
        return [ObjectMeta(t) for t in (content or {}).values()]

    def list_objects(self, pattern: str = "*", regex: bool = False, limit: int = 5) -> list[ObjectID]:
        return [m.id for m in self.list_metadatas(pattern, regex, limit)]

    def delete(self, object_id: IdLike | Sequence[IdLike], force: bool = False, deep: bool = True,
               memory_trim: bool = False) -> None:
        """Deletes objects. Views other processes hold stay intact until released."""
        if isinstance(object_id, (list, tuple)):
            idl = [_id(i) for i in object_id]
        else:
            idl = [_id(cast(IdLike, object_id))]
        flags = (1 if force else 0) | (0 if deep else 2) | (4 if memory_trim else 0)
        c_ids = (ctypes.c_uint64 * len(idl))(*idl)
        _call("v6d_delete", self._handle(), len(idl), c_ids, flags)

    def exists(self, object_id: IdLike) -> bool:
        out = ctypes.c_int32()
        _call("v6d_exists", self._handle(), _id(object_id), ctypes.byref(out))
        return bool(out.value)

    def persist(self, object_id: IdLike) -> None:
        _call("v6d_persist", self._handle(), _id(object_id))

    def if_persist(self, object_id: IdLike) -> bool:
        out = ctypes.c_int32()
        _call("v6d_if_persist", self._handle(), _id(object_id), ctypes.byref(out))
        return bool(out.value)

    def shallow_copy(self, object_id: IdLike, extra_metadata: dict[str, Any] | None = None) -> ObjectID:
        out = ctypes.c_uint64()
        extra = json.dumps(extra_metadata).encode() if extra_metadata else None
        _call("v6d_shallow_copy", self._handle(), _id(object_id), extra, ctypes.byref(out))
        return ObjectID(out.value)

    def label(self, object_id: IdLike, key: str | dict[str, str], value: str | None = None) -> None:
        labels = key if isinstance(key, dict) else {key: value}
        for k, v in labels.items():
            _call("v6d_label", self._handle(), _id(object_id), str(k).encode(), str(v).encode())

    # -- names ------------------------------------------------------------

    def put_name(self, object_id: IdLike, name: str) -> None:
        _call("v6d_put_name", self._handle(), _id(object_id), str(name).encode())

    def get_name(self, name: str, wait: bool = False) -> ObjectID:
        """Resolves a name; with ``wait`` blocks until it exists (Ctrl-C works)."""
        out = ctypes.c_uint64()
        if not wait:
            _call("v6d_get_name", self._handle(), name.encode(), 0, 0, ctypes.byref(out))
            return ObjectID(out.value)
        while True:
            try:
                _call("v6d_get_name", self._handle(), name.encode(), 1, 200, ctypes.byref(out))
                return ObjectID(out.value)
            except TimeoutException:
                continue

    def drop_name(self, name: str) -> None:
        _call("v6d_drop_name", self._handle(), name.encode())

    def list_names(self, pattern: str = "*", regex: bool = False, limit: int = 5) -> dict[str, ObjectID]:
        names = self._json_out("v6d_list_names", pattern.encode(), 1 if regex else 0, limit) or {}
        return {k: ObjectID(v) for k, v in names.items()}

    # -- housekeeping -----------------------------------------------------

    @property
    def status(self) -> InstanceStatus:
        return InstanceStatus(self._json_out("v6d_instance_status"))

    @property
    def meta(self) -> dict[str, Any]:
        return self._json_out("v6d_cluster_meta")

    def clear(self) -> None:
        _call("v6d_clear", self._handle())

    reset = clear

    def memory_trim(self) -> bool:
        out = ctypes.c_int32()
        _call("v6d_memory_trim", self._handle(), ctypes.byref(out))
        return bool(out.value)

    # -- objects ----------------------------------------------------------

    def _get_tree(self, object_id: int) -> tuple[dict[str, Any], _Pin]:
        """One round trip: the tree, with every blob in it pinned."""
        conn = self._conn
        p, n = ctypes.c_void_p(), ctypes.c_size_t()
        _call("v6d_get_object", self._handle(), object_id, 0, _byref(p), _byref(n))
        raw = _take_string(p, n)
        tree = json.loads(raw)
        assert conn is not None
        pin = _Pin(conn, object_id)
        pin.root = (tree, raw)
        return tree, pin

    def put(self, value: Any, persist: bool = False, name: str | None = None, **kwargs: Any) -> ObjectID:
        """Stores ``value`` and returns its id (see vineyard.data for types)."""
        from . import data

        oid = data.build(self, value, **kwargs)
        if persist:
            self.persist(oid)
            if name is not None:
                self.put_name(oid, name)
        elif name is not None:
            import warnings

            warnings.warn("The object is not persisted, the name won't be associated.", UserWarning, stacklevel=2)
        return oid

    def get(self, object_id: IdLike | None = None, name: str | None = None, **kwargs: Any) -> Any:
        """Returns the value stored as ``object_id`` (or ``name``), as a
        zero-copy read-only view where the type allows."""
        from . import data

        if object_id is None:
            if name is None:
                raise ValueError("get needs an object_id or a name")
            object_id = self.get_name(name)
        tree, pin = self._get_tree(_id(object_id))
        try:
            return data.resolve(self, tree, pin)
        finally:
            pin.root = None

    def get_object(self, object_id: IdLike) -> Object:
        """Returns the object (its metadata) without resolving it to a value,
        with its blobs pinned while it lives (one round trip). An Arrow object
        is an ``ArrowObject``, which exposes the Arrow PyCapsule interface."""
        from . import data

        tree, pin = self._get_tree(_id(object_id))
        return data.object_type(str(tree.get("typename", "")))(ObjectMeta(tree), pin)

    def is_shared_memory(self, target: Any) -> bool:
        """Reports whether ``target`` (an address, or an object with an
        ``address``, ``__array_interface__`` or the buffer protocol: a pyarrow
        Buffer, a NumPy array, a memoryview...) points into the shared memory
        of the store, i.e. is a view rather than a copy. No round trip."""
        out = ctypes.c_int32()
        _call("v6d_is_shared_memory", self._handle(), _target_address(target), ctypes.byref(out))
        return bool(out.value)


def _target_address(target: Any) -> int:
    """The address of the first byte of target (see is_shared_memory)."""
    if isinstance(target, int):
        return target
    address = getattr(target, "address", None)
    if isinstance(address, int):
        return address
    interface = getattr(target, "__array_interface__", None)
    if interface is not None:
        return int(interface["data"][0])
    return _address_of(memoryview(target).cast("B"))[0]


def connect(socket: str | None = None) -> Client:
    """Connects to the daemon at ``socket`` (default: env VINEYARD_IPC_SOCKET).

    Raises ConnectionError naming the path tried.
    """
    return Client(socket)
