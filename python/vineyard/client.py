"""The client: one connection to a vineyardd, with upstream Vineyard's API."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import warnings
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Union, cast

import numpy as np

if TYPE_CHECKING:
    from typing_extensions import Self

from . import _ffi, _trees, data
from ._bindings import DELETE_FORCE, DELETE_MEMORY_TRIM, DELETE_SHALLOW, GET_UNSAFE
from ._config import DEFAULT_DIR, config_path, parse_configuration
from ._handles import Conn, Pin
from ._objects import Blob, Object, object_type
from ._remote import RemoteBlob
from ._session import BlobBuilder, Session, address_of
from ._types import ObjectID, ObjectMeta
from .data.arrow import arrow_plan
from .data.dataframe import dataframe_plan
from .data.global_objects import make_global_object
from .data.tensor import numpy_plan
from .errors import (
    AssertionFailedException,
    ForkError,
    NotEnoughMemoryException,
    ObjectNotExistsException,
    TimeoutException,
    VineyardException,
)

__all__ = ["Blob", "BlobBuilder", "Client", "InstanceStatus", "Object", "connect"]

IdLike = Union[ObjectID, int, str, ObjectMeta]

_build_numpy = data.tensor.build_numpy

# (dtype, shape, C order) → the tree text of a small array's put (Client._put_small_array).
_array_trees: dict[tuple[Any, tuple[int, ...], bool], bytes] = {}
# C-contiguous arrays up to this size are put in that one call too: a client
# sharing the daemon's memory has libv6d copy them into memory the daemon
# leased to it, mapping the pages as it goes, and send the tree without
# waiting for a reply (a pipelined put); over TCP the bytes go with the
# request straight from the array, one copy fewer than through a local buffer
# ("Medium puts" in docs/performance.md). Larger ones go through BlobBatch,
# whose copy threads pay there. At most V6D_INLINE_MAX.
_ONE_CALL_BYTES = 64 << 20
# Gets of trees of a shape already got (shape numbers, v6d_get_object_shaped):
# the plan of the shape (numpy_plan) or None. A plan makes a tensor's array
# from the one blob the get pinned, without reading its tree
# (docs/performance.md, "December 3, evening").
_plans: dict[int, Any] = {}
# The same for trees of any number of blobs, from the text the get returned:
# the shape's plan (arrow_plan for Arrow trees, whose text libv6d reads itself;
# dataframe_plan for frames of NumPy columns, which finds each column's blob
# among the text's ids) or None; a plan skips parsing the tree here.
_text_plans: dict[int, Any] = {}


def _address(arr: np.ndarray) -> int:
    """The address of a C-contiguous array's first byte. ctypes over the
    array's buffer costs a third of NumPy's ``arr.ctypes.data`` (0.3 vs
    0.9-1.2 µs of a small put); it needs a writable array whose dtype the
    buffer protocol takes (not datetime64/timedelta64)."""
    if arr.flags.writeable:
        try:
            return ctypes.addressof(ctypes.c_char.from_buffer(cast(Any, arr)))
        except (BufferError, TypeError, ValueError):
            pass
    return int(arr.ctypes.data)


_ID_END = 1 << 64
# An object id no daemon mints (ids carry a timestamp in their high bits):
# the probe of Client.sync_meta.
_SYNC_PROBE = 1


def _id(value: IdLike) -> int:
    if type(value) is int and 0 <= value < _ID_END:
        return value
    if type(value) is ObjectID:
        return int(value)  # checked when made
    if isinstance(value, ObjectMeta):
        return int(value.id)
    return int(ObjectID(value))


class InstanceStatus:
    """The daemon's status (memory usage and limit, connections)."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.instance_id = int(fields.get("instance_id", 0))
        self.deployment = str(fields.get("deployment", ""))
        self.memory_usage = int(fields.get("memory_usage", 0))
        self.memory_leased = int(fields.get("memory_leased", 0))
        self.memory_limit = int(fields.get("memory_limit", 0))
        self.deferred_requests = int(fields.get("deferred_requests", 0))
        self.ipc_connections = int(fields.get("ipc_connections", 0))
        self.rpc_connections = int(fields.get("rpc_connections", 0))
        # changes of persisted objects queued until etcd answers again (ours)
        self.meta_pending = int(fields.get("meta_pending", 0))
        # blobs in the spill directory now, and their bytes (ours)
        self.spilled_objects = int(fields.get("spilled_objects", 0))
        self.spilled_bytes = int(fields.get("spilled_bytes", 0))

    def __repr__(self) -> str:
        return "InstanceStatus " + json.dumps(vars(self))


class Client:
    """A connection to one vineyardd. Safe to share between threads.

    Use :func:`vineyard.connect` to make one.
    """

    def __init__(self, socket: str | None = None, timeout: float | None = None, *, port: int | str | None = None,
                 host: str | None = None, endpoint: str | tuple[str, int | str] | None = None,
                 username: str | None = None, password: str | None = None, config: str | None = None) -> None:
        rpc = _rpc_endpoint(socket, host, port, endpoint)
        path = "" if rpc else (socket or os.environ.get("VINEYARD_IPC_SOCKET", ""))
        conf_socket = conf_rpc = None
        if not rpc and not path:
            # Upstream's configuration file (_config.py): its socket before
            # any TCP endpoint (zero-copy first), its endpoint after the env's.
            conf_socket, conf_rpc = parse_configuration(config)
            path = conf_socket or ""
        if not rpc and not path:
            rpc = os.environ.get("VINEYARD_RPC_ENDPOINT", "") or conf_rpc or ""
        if not rpc and not path:
            raise ConnectionError("vineyard: no socket given, neither VINEYARD_IPC_SOCKET nor VINEYARD_RPC_ENDPOINT "
                                  f"is set, and no configuration names a daemon ({config_path(config) or 'none found'})")
        # In a child forked after libv6d was loaded, raise ForkError before
        # anything calls into the library (whose connect would fail the same
        # way, V6D_FORKED, and must not be read as a connection failure).
        _ffi.check_process()
        out = ctypes.c_uint64()
        try:
            if rpc:
                # username is accepted for upstream's signature: the daemon
                # checks only the secret (the password).
                _ffi.call("v6d_connect_rpc", rpc.encode(), None if password is None else password.encode(),
                          ctypes.byref(out))
            else:
                _ffi.call("v6d_connect", path.encode(), ctypes.byref(out))
        except Exception as e:
            if isinstance(e, (ConnectionError, ForkError)):
                raise
            raise ConnectionError(f"vineyard: cannot connect to {rpc or path}: {e}") from e
        self._session = Session(Conn(out.value, remote=bool(rpc)), self)
        self._spread = False
        self._compression = True
        self.ipc_socket = path
        self.rpc_endpoint = rpc
        self._password = password
        iid = ctypes.c_uint64()
        _ffi.call("v6d_instance_id", out.value, ctypes.byref(iid))
        self.instance_id = iid.value
        if timeout is not None:
            self.timeout = timeout

    # -- plumbing ---------------------------------------------------------

    def _handle(self) -> int:
        return self._session.handle()

    @property
    def connected(self) -> bool:
        """True while the client is open and its daemon alive. Once the
        daemon is gone it is False and every call raises ConnectionError,
        also one the client could answer from its cache."""
        return self._session.connected

    @property
    def timeout(self) -> float:
        """Seconds each call to the daemon may take (default 300, as
        upstream's). A call that takes longer raises
        :class:`~vineyard.errors.TimeoutException` (a TimeoutError), and the
        connection then counts as lost: later calls raise ConnectionError.
        Settable from 0.001 to (2**31-1)/1000 seconds; anything else raises
        :class:`~vineyard.errors.InvalidException` and changes nothing."""
        ms = ctypes.c_int64()
        _ffi.call("v6d_get_timeout", self._session.handle(), ctypes.byref(ms))
        return ms.value / 1000

    @timeout.setter
    def timeout(self, seconds: float) -> None:
        _ffi.call("v6d_set_timeout", self._session.handle(), round(seconds * 1000))

    def close(self) -> None:
        """Closes the client. Views got from it stay valid: the connection is
        released when the last of them is gone. Idempotent."""
        self._session.conn = None

    def fork(self) -> Client:
        """A new connection to the same daemon (socket or endpoint, secret,
        timeout), as upstream's: for another thread that wants a connection
        of its own. The client itself is safe to share between threads. In a
        child process forked after the library was loaded it raises
        :class:`~vineyard.ForkError`, as :func:`connect` does: the Go runtime
        does not survive ``fork()``; start children with ``spawn``."""
        return Client(self.ipc_socket or None, self.timeout, endpoint=self.rpc_endpoint or None,
                      password=self._password)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def is_ipc(self) -> bool:
        """True when connected through the UNIX socket: gets are zero-copy
        views of shared memory."""
        return not self.rpc_endpoint

    @property
    def is_rpc(self) -> bool:
        """True when connected over TCP (``connect(host, port)``): puts and
        gets copy the bytes over the connection, and what a get returns is a
        writable private copy. Shared-memory-only calls (``is_shared_memory``
        is always False, torch's copy-on-write views) do not apply."""
        return bool(self.rpc_endpoint)

    def __repr__(self) -> str:
        state = "connected" if self.connected else "closed"
        return f"Client <{self.rpc_endpoint or self.ipc_socket}, instance {self.instance_id}, {state}>"

    def _json_out(self, name: str, *args: Any) -> Any:
        p, n = ctypes.c_void_p(), ctypes.c_size_t()
        _ffi.call(name, self._session.handle(), *args, ctypes.byref(p), ctypes.byref(n))
        return json.loads(_ffi.take_string(p, n) or b"null")

    # -- blobs ------------------------------------------------------------

    def create_blob(self, size: int | Sequence[int]) -> Any:
        """Creates unsealed blob(s): a BlobBuilder, or a list for a list of sizes."""
        return self._session.create_blob(size)

    def create_empty_blob(self) -> Blob:
        """The empty blob (size 0, id ``o8000000000000000``), sealed by nature."""
        self._session.handle()  # closed / forked checks, as every method
        return Blob(1 << 63, 0, 0, None)

    def get_blob(self, object_id: IdLike, unsafe: bool = False) -> Blob:
        """Returns a sealed blob as a read-only :class:`Blob` view (no copy),
        pinned while the Blob lives. With ``unsafe``, a blob not sealed yet
        is returned too (its bytes may still change)."""
        return self.get_blobs([object_id], unsafe)[0]

    def get_blobs(self, object_ids: Sequence[IdLike], unsafe: bool = False) -> list[Blob]:
        """:meth:`get_blob` of several blobs in one round trip (none when the
        directory has them all; one per 65,536 ids, the most a request
        carries, which libv6d sends in turn)."""
        idl = [_id(i) for i in object_ids]
        n = len(idl)
        c_ids = (ctypes.c_uint64 * n)(*idl)
        c_ptrs = (ctypes.POINTER(ctypes.c_uint8) * n)()
        c_sizes = (ctypes.c_uint64 * n)()
        session = self._session
        _ffi.call("v6d_get_buffers", session.handle(), n, c_ids, GET_UNSAFE if unsafe else 0, c_ptrs, c_sizes)
        return [Blob(idl[i], ctypes.cast(c_ptrs[i], ctypes.c_void_p).value or 0, c_sizes[i], session.pin(idl[i]))
                for i in range(n)]

    def create_remote_blob(self, blob_builder: Any) -> Any:
        """Upstream's: makes a sealed blob of the daemon from each
        :class:`~vineyard.RemoteBlobBuilder` (bytes in this process; one
        builder, or a list) and returns its :class:`ObjectMeta` (a list for
        a list). The bytes are copied once into a new blob (over a TCP
        connection they cross it at seal); the builders stay usable. Works
        on either kind of connection."""
        many = isinstance(blob_builder, (list, tuple))
        sources = list(blob_builder) if many else [blob_builder]
        ids: list[int] = []
        if sources:
            created = self._session.create_blob([int(b.size) for b in sources])
            for src, dst in zip(sources, created):
                if src.size:
                    ctypes.memmove(dst.address, src.address, src.size)
                ids.append(int(dst._seal_id()))
        metas = [self.get_meta(i) for i in ids]
        return metas if many else metas[0]

    def get_remote_blob(self, object_id: IdLike, unsafe: bool = False) -> RemoteBlob:
        """Upstream's: a sealed blob as a :class:`~vineyard.RemoteBlob` (a
        :class:`Blob` that names its ``instance_id``); over a TCP connection
        its bytes are a private copy, else a view, as :meth:`get_blob`."""
        return self.get_remote_blobs([object_id], unsafe)[0]

    def get_remote_blobs(self, object_ids: Sequence[IdLike], unsafe: bool = False) -> list[RemoteBlob]:
        """:meth:`get_remote_blob` of several blobs in one round trip."""
        out = []
        for blob in self.get_blobs(object_ids, unsafe):
            remote = blob.view(RemoteBlob)
            remote.instance_id = self.instance_id
            out.append(remote)
        return out

    @property
    def remote_instance_id(self) -> int:
        """The instance id of the daemon this client is connected to
        (upstream's name on its RPC client)."""
        return self.instance_id

    # -- metadata ---------------------------------------------------------

    def create_metadata(self, meta: ObjectMeta, seal: Sequence[int] = ()) -> ObjectMeta:
        """Creates an object from ``meta``, and every member tree in it that
        has no id yet, in one round trip; the unsealed blobs it references
        (``meta.seal_ids``) and those in ``seal`` are sealed first. Returns the
        stored metadata (with ids)."""
        return self._session.create_metadata(meta, seal)

    def get_meta(self, object_id: IdLike, sync_remote: bool = True) -> ObjectMeta:
        """Returns the metadata tree of an object. ``sync_remote`` is accepted
        for upstream's signature: a daemon with ``--meta etcd`` that does not
        know the id first catches up with etcd (bounded by its
        ``--etcd-timeout``), so an object persisted on another instance a
        moment ago is found, and a known object never waits on etcd."""
        p, n = ctypes.c_void_p(), ctypes.c_size_t()
        _ffi.call("v6d_get_metadata", self._session.handle(), _id(object_id), ctypes.byref(p), ctypes.byref(n))
        meta = ObjectMeta(json.loads(_ffi.take_string(p, n)))
        meta._here = self.instance_id
        return meta

    def sync_meta(self) -> None:
        """Upstream's: this client's daemon catches up with the cluster's
        metadata (etcd) before the call returns, so that what another
        instance persisted or deleted a moment ago is seen by the next list
        or get. Through a get of an id no daemon mints (``_SYNC_PROBE``): a
        daemon with ``--meta etcd`` that does not know an id catches up first
        (bounded by its ``--etcd-timeout``); with ``--meta local`` it is one
        round trip that changes nothing."""
        with contextlib.suppress(ObjectNotExistsException):
            self.get_meta(_SYNC_PROBE)

    def get_metas(self, object_ids: Sequence[IdLike], sync_remote: bool = True) -> list[ObjectMeta]:
        """:meth:`get_meta` of each id (``sync_remote`` is ignored as there)."""
        return [self.get_meta(i) for i in object_ids]

    def list_metadatas(self, pattern: str = "*", regex: bool = False, limit: int = 5,
                       nobuffer: bool = False) -> list[ObjectMeta]:
        """The metadata of up to ``limit`` objects (0: all) whose typename
        matches ``pattern`` (a glob, or with ``regex`` a regular expression).
        ``nobuffer`` is accepted for upstream's signature; the trees never
        carry blob bytes here, so it changes nothing."""
        content = self._json_out("v6d_list", pattern.encode(), 1 if regex else 0, limit)
        metas = [ObjectMeta(t) for t in (content or {}).values()]
        for m in metas:
            m._here = self.instance_id
        return metas

    def list_objects(self, pattern: str = "*", regex: bool = False, limit: int = 5) -> list[ObjectID]:
        """The ids of :meth:`list_metadatas`."""
        return [m.id for m in self.list_metadatas(pattern, regex, limit)]

    def delete(self, object_id: IdLike | Sequence[IdLike], force: bool = False, deep: bool = True,
               memory_trim: bool = False) -> None:
        """Deletes objects: with ``deep`` (the default) their members too,
        unless other objects still use them; ``force`` deletes those anyway;
        ``memory_trim`` returns the freed memory to the system. Views other
        processes hold stay intact until released."""
        if isinstance(object_id, (list, tuple)):
            idl = [_id(i) for i in object_id]
        else:
            idl = [_id(cast(IdLike, object_id))]
        flags = ((DELETE_FORCE if force else 0) | (0 if deep else DELETE_SHALLOW)
                 | (DELETE_MEMORY_TRIM if memory_trim else 0))
        self._session.delete(idl, flags)

    def exists(self, object_id: IdLike) -> bool:
        """Reports whether the object exists (and is not deleted)."""
        out = ctypes.c_int32()
        _ffi.call("v6d_exists", self._session.handle(), _id(object_id), ctypes.byref(out))
        return bool(out.value)

    def persist(self, object_id: IdLike) -> None:
        """Makes the object (and its members) visible to every daemon of the
        cluster; needed before it can be named."""
        _ffi.call("v6d_persist", self._session.handle(), _id(object_id))

    def if_persist(self, object_id: IdLike) -> bool:
        """Reports whether the object is persisted."""
        out = ctypes.c_int32()
        _ffi.call("v6d_if_persist", self._session.handle(), _id(object_id), ctypes.byref(out))
        return bool(out.value)

    def shallow_copy(self, object_id: IdLike, extra_metadata: dict[str, Any] | None = None) -> ObjectID:
        """A new object with the same metadata and members (no bytes
        copied), plus the fields of ``extra_metadata`` (scalars); returns its
        id."""
        out = ctypes.c_uint64()
        extra = json.dumps(extra_metadata).encode() if extra_metadata else None
        _ffi.call("v6d_shallow_copy", self._session.handle(), _id(object_id), extra, ctypes.byref(out))
        return ObjectID(out.value)

    def migrate(self, object_id: IdLike) -> ObjectID:
        """Returns the id of a local copy of the object: its own id when it is
        local, else the daemon fetches the blobs of the remote persisted
        object from their owners and stores a copy (new ids, same signature),
        or returns the copy it made before. Raises
        ``ObjectNotExistsException`` when the object or a blob is gone,
        ``ConnectionError`` when an owner cannot be reached; nothing of a
        failed copy remains."""
        out = ctypes.c_uint64()
        _ffi.call("v6d_migrate", self._session.handle(), _id(object_id), ctypes.byref(out))
        return ObjectID(out.value)

    def label(self, object_id: IdLike, key: str | dict[str, str], value: str | None = None) -> None:
        """Sets the label ``key`` to ``value``, or every label of a dict
        ``key``, on the object (keys and values are stored as strings)."""
        labels = key if isinstance(key, dict) else {key: value}
        for k, v in labels.items():
            _ffi.call("v6d_label", self._session.handle(), _id(object_id), str(k).encode(), str(v).encode())

    # -- names ------------------------------------------------------------

    def put_name(self, object_id: IdLike, name: str) -> None:
        """Names a persisted object (see :meth:`get_name`)."""
        _ffi.call("v6d_put_name", self._session.handle(), _id(object_id), str(name).encode())

    def get_name(self, name: str, wait: bool = False) -> ObjectID:
        """Resolves a name; with ``wait`` blocks until it exists (Ctrl-C works)."""
        out = ctypes.c_uint64()
        if not wait:
            _ffi.call("v6d_get_name", self._session.handle(), name.encode(), 0, 0, ctypes.byref(out))
            return ObjectID(out.value)
        while True:
            try:
                _ffi.call("v6d_get_name", self._session.handle(), name.encode(), 1, 200, ctypes.byref(out))
                return ObjectID(out.value)
            except TimeoutException:
                continue

    def drop_name(self, name: str) -> None:
        """Removes a name (the object stays)."""
        _ffi.call("v6d_drop_name", self._session.handle(), name.encode())

    def list_names(self, pattern: str = "*", regex: bool = False, limit: int = 5) -> dict[str, ObjectID]:
        """Up to ``limit`` names (0: all) matching ``pattern`` (a glob, or
        with ``regex`` a regular expression), with their ids."""
        names = self._json_out("v6d_list_names", pattern.encode(), 1 if regex else 0, limit) or {}
        return {k: ObjectID(v) for k, v in names.items()}

    # -- streams ----------------------------------------------------------
    # Upstream's stream calls (vineyard.io has the stream classes over them;
    # docs/protocol.md, "Streams"). Each is one round trip; a pull waits for
    # the writer, holding this connection meanwhile.

    def create_stream(self, stream: IdLike, readers: int = 1, capacity: int = 0) -> None:
        """Makes the object ``stream`` (its metadata created first) a stream.
        ``readers`` readers each see every chunk (upstream: one);
        ``capacity`` is how many chunks it buffers before its writer waits
        (0: the daemon's default, 16). Both are our extension."""
        _ffi.call("v6d_create_stream", self._session.handle(), _id(stream), int(readers), int(capacity))

    def open_stream(self, stream: IdLike, mode: str) -> None:
        """Opens ``stream`` on this connection for reading (``'r'``) or
        writing (``'w'``); ``StreamOpenedException`` when taken."""
        if mode not in ("r", "w"):
            raise AssertionFailedException("Mode can only be 'r' or 'w'")
        _ffi.call("v6d_open_stream", self._session.handle(), _id(stream), 1 if mode == "r" else 2)

    def push_chunk(self, stream: IdLike, chunk: IdLike, timeout: float | None = None) -> None:
        """Appends the sealed object or blob ``chunk`` to ``stream``. A full
        stream makes it wait for the readers, at most ``timeout`` seconds
        (None: the daemon's bound, 60 s), then raise
        ``NotEnoughMemoryException`` having pushed nothing."""
        ms = -1 if timeout is None else max(0, int(timeout * 1000))
        _ffi.call("v6d_push_chunk", self._session.handle(), _id(stream), _id(chunk), ms)

    def next_chunk_id(self, stream: IdLike) -> ObjectID:
        """The id of the stream's next chunk, waiting for it; at the end
        ``StreamDrainedException`` (finished) or ``StreamFailedException``
        (failed, its writer gone, or dropped). The chunk pulled before is
        given back: the daemon deletes it once every reader has (views of
        it this process holds stay valid)."""
        out = ctypes.c_uint64()
        _ffi.call("v6d_pull_chunk", self._session.handle(), _id(stream), ctypes.byref(out))
        return ObjectID(out.value)

    def next_chunk_meta(self, stream: IdLike) -> ObjectMeta:
        """The metadata of the stream's next chunk (see :meth:`next_chunk_id`)."""
        return self.get_meta(self.next_chunk_id(stream))

    def next_chunk(self, stream: IdLike) -> Object:
        """The stream's next chunk as an :class:`Object`, its blobs pinned
        while it lives (see :meth:`next_chunk_id`)."""
        return self.get_object(self.next_chunk_id(stream))

    def new_buffer_chunk(self, stream: IdLike, size: int) -> memoryview:
        """A writable buffer of ``size`` bytes that becomes the stream's next
        chunk, a blob: the next ``new_buffer_chunk`` or ``stop_stream`` of
        this stream on this client seals and pushes it; write it before."""
        oid, ptr = ctypes.c_uint64(), ctypes.c_void_p()
        _ffi.call("v6d_new_buffer_chunk", self._session.handle(), _id(stream), int(size), ctypes.byref(oid),
                  ctypes.byref(ptr))
        if not size or not ptr.value:
            return memoryview(bytearray())
        return memoryview((ctypes.c_ubyte * int(size)).from_address(ptr.value)).cast("B")

    def next_buffer_chunk(self, stream: IdLike) -> memoryview:
        """The stream's next chunk, a blob, as a read-only memoryview over the
        shared memory (pinned while the view lives); see :meth:`next_chunk_id`."""
        blob = self.get_blob(self.next_chunk_id(stream))
        return memoryview(blob).cast("B")

    def stop_stream(self, stream: IdLike, failed: bool) -> None:
        """Ends the stream: its readers get ``StreamDrainedException`` after
        the last chunk, or ``StreamFailedException`` when ``failed``."""
        _ffi.call("v6d_stop_stream", self._session.handle(), _id(stream), 1 if failed else 0)

    def drop_stream(self, stream: IdLike, drop_metadata: bool = True) -> None:
        """Removes the stream (waiters get ``StreamFailedException``, chunks
        not yet read are deleted) and, with ``drop_metadata``, its object."""
        _ffi.call("v6d_drop_stream", self._session.handle(), _id(stream))
        if drop_metadata:
            try:
                self.delete(stream)
            except VineyardException:
                pass

    # -- housekeeping -----------------------------------------------------

    @property
    def status(self) -> InstanceStatus:
        """The daemon's status: memory usage and limit, connections."""
        return InstanceStatus(self._json_out("v6d_instance_status"))

    @property
    def version(self) -> str:
        """The daemon's version, from its register_reply (the upstream
        release whose protocol it speaks, ``"0.24.2"`` for ours), as
        upstream's ``client.version`` gives it."""
        return str(self._json_out("v6d_instance_status").get("version", ""))

    @property
    def meta(self) -> dict[int, Any]:
        """The cluster's metadata as the daemon knows it, as upstream's client
        gives it: ``{instance_id: {"hostid": int, "hostname", "nodename",
        "ipc_socket", "rpc_endpoint": "host:port", "timestamp", ...}}`` (the
        daemon's keys ``"i<N>"`` become the integers N). With ``--meta etcd``
        these are the live instances of the cluster, read from etcd (an
        :class:`EtcdErrorException` when etcd does not answer); otherwise the
        daemon is the only instance."""
        raw = self._json_out("v6d_cluster_meta")
        out: dict[int, Any] = {}
        for key, value in raw.items():
            out[int(key[1:]) if isinstance(key, str) and key[:1] == "i" and key[1:].isdigit() else key] = value
        return out

    def clear(self) -> None:
        """Deletes every object of the daemon (views held stay intact until
        released)."""
        _ffi.call("v6d_clear", self._session.handle())

    reset = clear

    def memory_trim(self) -> bool:
        """Asks the daemon to return unused arena pages to the kernel;
        reports whether anything was released."""
        out = ctypes.c_int32()
        _ffi.call("v6d_memory_trim", self._session.handle(), ctypes.byref(out))
        return bool(out.value)

    # -- spilling (a daemon started with spill_path) ------------------------

    def _spill_call(self, fn: str, object_ids: IdLike | Sequence[IdLike], *extra: Any) -> None:
        if isinstance(object_ids, (list, tuple)):
            idl = [_id(i) for i in object_ids]
        else:
            idl = [_id(cast(IdLike, object_ids))]
        c_ids = (ctypes.c_uint64 * len(idl))(*idl)
        _ffi.call(fn, self._session.handle(), len(idl), c_ids, *extra)

    def evict(self, object_ids: IdLike | Sequence[IdLike]) -> None:
        """Spills now, to the daemon's spill directory, the blobs of the
        objects that no client holds; the others stay in memory. A later get
        loads them back. Fails when the daemon does not spill."""
        self._spill_call("v6d_evict", object_ids)

    def load(self, object_ids: IdLike | Sequence[IdLike], pin: bool = False) -> None:
        """Loads the spilled blobs of the objects back into memory; with
        ``pin`` this client also holds them, so none spills, until
        :meth:`unpin` (or the client closes)."""
        self._spill_call("v6d_load", object_ids, 1 if pin else 0)

    def unpin(self, object_ids: IdLike | Sequence[IdLike]) -> None:
        """Drops what :meth:`load` with ``pin`` held of the objects."""
        self._spill_call("v6d_unpin", object_ids)

    # -- objects ----------------------------------------------------------

    def _get_tree(self, object_id: int) -> tuple[dict[str, Any], Pin]:
        """One round trip: the tree, with every blob in it pinned."""
        raw, pin = self._session.get(object_id)
        tree = _trees.loads(raw)
        pin.root = (tree, raw)
        return tree, pin

    def put(self, value: Any, builder: Any = None, persist: bool = False, name: str | None = None,
            **kwargs: Any) -> ObjectID:
        """Stores ``value`` in the daemon and returns its :class:`ObjectID`.

        Accepted values, and what :meth:`get` returns for them:

        - ``numpy.ndarray`` of any non-object dtype, any shape, C or Fortran
          order (a strided array is stored contiguous): a ``vineyard::Tensor``;
          got back as a read-only ``numpy.ndarray`` over shared memory.
        - ``pandas.DataFrame``, ``Series``, ``Index`` (every dtype: NumPy,
          nullable, categorical, datetime with zone, string, Arrow-backed;
          ``attrs`` and ``flags`` kept): got back as the same pandas type,
          its NumPy-backed columns over shared memory; writable, a write
          copies the block first (Copy-on-Write), never reaching the store.
        - ``pyarrow`` Array, ChunkedArray, RecordBatch, Table,
          RecordBatchReader, and anything with ``__arrow_c_stream__`` or
          ``__arrow_c_array__`` (polars, duckdb, nanoarrow...): got back as
          pyarrow (polars for a polars value, when polars is installed)
          whose buffers are the shared memory.
        - ``torch.Tensor`` (strided, sparse, quantized, nested): got back as
          a tensor over a private copy-on-write view (writes stay in the
          getting process).
        - ``bytes``, ``bytearray``, ``memoryview``: one blob; got back as a
          read-only ``memoryview``.
        - ``bool``, ``int``, ``float``, ``str``: a scalar, got back as itself;
          ``list`` and ``tuple``: each item stored by these rules.
        - anything else: pickle protocol 5, each out-of-band buffer (a NumPy
          array inside a dict or a class) in a blob of its own, so it comes
          back without a copy too.

        Builders registered with :func:`vineyard.register_builder` take
        precedence for their types.

        With ``global_=True``, ``value`` is a list of the ids of persisted
        objects on any instances, and the result a persisted global object
        of them (``vineyard::GlobalTensor`` of tensors, ...; see
        :mod:`vineyard.data.global_objects`).

        The arguments have upstream's positions (``put(value, builder,
        persist, name)``): ``builder``, a context of
        :func:`vineyard.core.builder_context`, is looked up first for this
        put. ``persist`` makes the object visible to every
        daemon of the cluster (and required for ``name``); ``name`` then
        names it (:meth:`get_name`); other keywords go to the value's
        builder (the built-in ones accept and ignore them, as upstream's
        signature allows).

        The bytes are copied once into shared memory (small values, 64 KiB
        in all, go with the request). The stored object is immutable: later
        changes to ``value`` do not reach it. Raises
        ``NotEnoughMemoryException`` when the daemon's memory is full
        (nothing is left half stored), ``ConnectionError`` when the daemon
        is gone."""
        table = None if builder is None else _scope_of(builder, "put(value, builder)")
        if table is not None:
            data.registry._builder_scopes.append(table)
            try:
                return self.put(value, None, persist, name, **kwargs)
            finally:
                data.registry._builder_scopes.remove(table)
        oid: ObjectID | None
        if kwargs.pop("global_", False):
            if not isinstance(value, (list, tuple)):
                raise TypeError("put(..., global_=True) takes a list of the ids of its partitions, "
                                f"not {type(value).__name__}")
            oid = make_global_object(self, value).id
        else:
            try:
                oid = None
                if (type(value) is np.ndarray and not kwargs and not data.registry._builder_scopes
                        and data.registry._by_type.get(np.ndarray) is _build_numpy):
                    oid = self._put_small_array(value)
                if oid is None:
                    oid = data.build(self._session, value, **kwargs)
            except NotEnoughMemoryException:
                # upstream's fallback: the instance of the cluster with the
                # most free memory takes the put, and this client moves there
                if not self._move_to_roomiest_instance():
                    raise
                oid = data.build(self._session, value, **kwargs)
        if persist:
            self.persist(oid)
            if name is not None:
                self.put_name(oid, name)
        elif name is not None:
            warnings.warn("The object is not persisted, the name won't be associated.", UserWarning, stacklevel=2)
        return oid

    def _move_to_roomiest_instance(self) -> bool:
        """Upstream's answer to a put its daemon has no memory for: asks every
        other instance of the cluster (:attr:`meta`, their TCP listeners) for
        its free memory and connects this client to the one with the most
        (through its UNIX socket when that is here, else over TCP), with a
        warning, as upstream's ``Client.put`` does; the caller then puts
        there. Views got before keep their connection. False, with upstream's
        warning, when no other instance answers."""
        best: tuple[int, dict[str, Any]] | None = None
        room = -1
        for iid, inst in self.meta.items():
            endpoint = inst.get("rpc_endpoint") if isinstance(inst, dict) else None
            if iid == self.instance_id or not endpoint:
                continue
            try:
                with Client(endpoint=endpoint, password=self._password) as other:
                    status = other.status
            except (ConnectionError, VineyardException):
                continue
            free = status.memory_limit - status.memory_usage
            if free > room:
                best, room = (iid, inst), free
        if best is None:
            warnings.warn("No other vineyard instance available", stacklevel=3)
            return False
        iid, inst = best
        warnings.warn(f"Put object to the vineyard instance {iid} with the most available memory.", stacklevel=3)
        target = None
        sock = inst.get("ipc_socket")
        if sock and os.path.exists(sock):
            with contextlib.suppress(ConnectionError, VineyardException):
                target = Client(sock, self.timeout)
                if target.instance_id != iid:  # a daemon restarted on that socket
                    target.close()
                    target = None
        if target is None:
            target = Client(endpoint=inst["rpc_endpoint"], timeout=self.timeout, password=self._password)
        session = target._session
        session._client = weakref.ref(self)
        self._session = session
        self.ipc_socket, self.rpc_endpoint, self.instance_id = target.ipc_socket, target.rpc_endpoint, target.instance_id
        return True

    @property
    def spread(self) -> bool:
        """Upstream's flag (no effect there on put either): a put the daemon
        has no memory for always goes to the instance with the most free
        memory (see :meth:`put`)."""
        return self._spread

    @spread.setter
    def spread(self, value: bool = False) -> None:
        self._spread = bool(value)

    @contextlib.contextmanager
    def with_spread(self, enabled: bool = True) -> Iterator[None]:
        """Sets :attr:`spread` for the block, as upstream's."""
        before, self.spread = self.spread, enabled
        try:
            yield
        finally:
            self.spread = before

    @property
    def compression(self) -> bool:
        """Upstream's flag of its RPC transfers (compressed there); accepted
        and kept here, where TCP transfers are never compressed."""
        return self._compression

    @compression.setter
    def compression(self, value: bool = True) -> None:
        self._compression = bool(value)

    @contextlib.contextmanager
    def with_compression(self, enabled: bool = True) -> Iterator[None]:
        """Sets :attr:`compression` for the block, as upstream's."""
        before, self.compression = self.compression, enabled
        try:
            yield
        finally:
            self.compression = before

    def _put_small_array(self, arr: np.ndarray) -> ObjectID | None:
        """The put of a small or medium C-contiguous array, when the built-in builder
        takes NumPy arrays (the caller checks; after a registration it is
        known again once the builders took one array): the tree its builder makes depends only on the
        dtype, shape and order, so its text (with the blob inline) is made
        once per such key and cached; then one ``v6d_put_inline``. About
        half the Python time of a small put was building that tree, its
        JSON and the call's lists (docs/performance.md). None when the
        array does not qualify: the builders then take it."""
        nbytes = arr.nbytes
        if not 0 < nbytes <= _ONE_CALL_BYTES:
            return None
        if not arr.flags.c_contiguous:
            return None  # F and strided arrays: the builder stores them in C order (upstream's layout)
        key = (arr.dtype, arr.shape, True)
        body = _array_trees.get(key)
        if body is None:
            if arr.dtype.hasobject:
                return None
            meta = data.tensor.tensor_meta(arr)
            meta.add_inline_member("buffer_", arr)  # as the builder's BlobBatch does
            body = meta.to_json().encode()
            if len(_array_trees) >= 1024:
                _array_trees.clear()
            _array_trees[key] = body
        return self._session.put_tree_inline(body, _address(arr), nbytes)

    def get(self, object_id: IdLike | None = None, name: str | None = None, resolver: Any = None, fetch: bool = False,
            **kwargs: Any) -> Any:
        """Returns the value stored as ``object_id`` (an :class:`ObjectID`,
        its int, its text ``"o…"``, or an :class:`ObjectMeta`), or under
        ``name`` when ``object_id`` is None.

        What comes back for each stored type is listed in :meth:`put`; an
        object with no resolver (a typename nobody registered) comes back as
        its :class:`ObjectMeta`. Resolvers registered with
        :func:`vineyard.register_resolver` take precedence for their
        typenames. With ``fetch=True`` an object of another instance is
        migrated here first (:meth:`migrate`); without it too when its blobs
        are not here (upstream's plain get serves such an object). The arguments have upstream's
        positions (``get(object_id, name, resolver, fetch)``): ``resolver``,
        a context of :func:`vineyard.core.resolver_context`, is looked up
        first for this get. Other keyword arguments go to resolvers
        registered with upstream's signature (:mod:`vineyard.core`, e.g.
        ``dask_scheduler`` of :mod:`vineyard.contrib.dask`), and are
        ignored by the built-in ones.

        Zero-copy and read-only: one round trip, whatever the size; the
        result's buffers are the store's shared memory, not a copy. NumPy
        arrays, memoryviews and pyarrow buffers are read-only (a write
        raises ``ValueError`` or ``TypeError``); pandas objects copy a block before a write
        and torch tensors copy a 4 KiB page on its first write, so no write
        ever reaches the store or another reader. The result keeps the
        object's blobs pinned while it (or anything sharing its memory)
        lives: a ``delete`` meanwhile hides the object but frees its memory
        only when the last view is gone, and closing the client leaves the
        views valid.

        Raises ``ObjectNotExistsException`` for an unknown id,
        ``ValueError`` without either argument, ``ConnectionError`` when the
        daemon is gone."""
        if type(object_id) is not int or not 0 <= object_id < _ID_END:  # an int in range: the hot path
            if object_id is None:
                if name is None:
                    raise ValueError("get needs an object_id or a name")
                object_id = self.get_name(name)
            object_id = _id(object_id)
        if fetch:
            object_id = _id(self.migrate(object_id))
        if kwargs:
            token = data.registry.get_kwargs.set(kwargs)
            try:
                return self.get(object_id, name, resolver, fetch)
            finally:
                data.registry.get_kwargs.reset(token)
        if resolver is not None or data.registry._resolver_scopes:
            return self._get_scoped(object_id, resolver)
        try:
            return self._get_here(object_id)
        except ObjectNotExistsException:
            # An object of another instance whose blobs are not here: as
            # upstream, a plain get serves it (migrated here, as fetch=True).
            if fetch or _ffi.forked_child() or not self._remote(object_id):
                raise
            return self.get(object_id, name, resolver, True, **kwargs)

    def _get_here(self, object_id: int) -> Any:
        value, raw, pin, shape = self._session.get_planned(object_id, _plans)
        if raw is None:
            return value
        assert pin is not None
        plan = _text_plans.get(shape)  # shape 0 (none) is never a key
        if plan is not None:
            value = plan(self._session, raw, pin)
            if value is not None:
                return value
        tree = _trees.loads(raw)
        pin.root = (tree, raw)
        try:
            value = data.resolve(self._session, tree, pin)
        finally:
            pin.root = None
        if shape and shape not in _plans:
            if len(_plans) >= 512:
                _plans.clear()
                _text_plans.clear()
            _plans[shape] = numpy_plan(tree, pin)
            _text_plans[shape] = arrow_plan(tree) or dataframe_plan(tree, raw)
        return value

    def _remote(self, object_id: int) -> bool:
        """True when the daemon knows the object as one of another instance."""
        try:
            return self.get_meta(object_id).instance_id != self.instance_id
        except ObjectNotExistsException:
            return False

    def _get_scoped(self, object_id: int, resolver: Any) -> Any:
        """A get while resolvers are scoped (vineyard.core): every tree goes
        through the registry, never a plan made without them."""
        table = None if resolver is None else _scope_of(resolver, "get(object_id, name, resolver)")
        if table is not None:
            data.registry._resolver_scopes.append(table)
        try:
            _, raw, pin, _ = self._session.get_planned(object_id, {})
            assert raw is not None and pin is not None
            tree = _trees.loads(raw)
            pin.root = (tree, raw)
            try:
                return data.resolve(self._session, tree, pin)
            finally:
                pin.root = None
        finally:
            if table is not None:
                data.registry._resolver_scopes.remove(table)

    def get_object(self, object_id: IdLike, fetch: bool = False) -> Object:
        """Returns the object (its metadata) without resolving it to a value,
        with its blobs pinned while it lives (one round trip). An Arrow object
        is an ``ArrowObject``, which exposes the Arrow PyCapsule interface.
        With ``fetch=True`` an object of another instance is migrated here
        first (:meth:`migrate`)."""
        if fetch:
            object_id = self.migrate(object_id)
        tree, pin = self._get_tree(_id(object_id))
        return object_type(str(tree.get("typename", "")))(ObjectMeta(tree), pin)

    def is_shared_memory(self, target: Any) -> bool:
        """Reports whether ``target`` (an address, or an object with an
        ``address``, ``__array_interface__`` or the buffer protocol: a pyarrow
        Buffer, a NumPy array, a memoryview...) points into the shared memory
        of the store, i.e. is a view rather than a copy. No round trip."""
        out = ctypes.c_int32()
        _ffi.call("v6d_is_shared_memory", self._session.handle(), _target_address(target), ctypes.byref(out))
        return bool(out.value)


def _scope_of(context: Any, call: str) -> Any:
    """The table of a vineyard.core context given to put/get (None for a
    default context: the registry itself); TypeError for anything else."""
    from .core import BuilderContext, ResolverContext

    if not isinstance(context, (BuilderContext, ResolverContext)):
        raise TypeError(f"vineyard: {call} takes a context of vineyard.core, not {type(context).__name__}")
    return context._table


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
    return address_of(memoryview(target).cast("B"))[0]


def connect(socket: str | None = None, port: int | str | None = None, *, timeout: float | None = None,
            host: str | None = None, endpoint: str | tuple[str, int | str] | None = None,
            username: str | None = None, password: str | None = None, config: str | None = None) -> Client:
    """Connects to a daemon, as upstream's ``vineyard.connect``:

    - ``connect(socket)``: its UNIX socket (default: env
      VINEYARD_IPC_SOCKET); gets are zero-copy views of shared memory.
    - ``connect(host, port)``, ``connect(host=..., port=...)``,
      ``connect(endpoint="host:port")`` (or ``(host, port)``, or a list
      ``"h1:p1,h2:p2"`` tried in order), or no argument and only env
      VINEYARD_RPC_ENDPOINT set: its TCP listener (:attr:`Client.is_rpc`);
      bytes are copied over the connection. ``password`` is the daemon's
      shared secret (default: env VINEYARD_RPC_SECRET).

    - ``connect(config=path)``, or env VINEYARD_CONFIG, or a
      ``/var/run/vineyard-config.yaml``: upstream's configuration file
      (``Vineyard: {IPCSocket: ..., RPCEndpoint: ...}``; a directory holding
      ``vineyard-config.yaml`` works too), used when no socket is given nor
      VINEYARD_IPC_SOCKET set; its socket comes before VINEYARD_RPC_ENDPOINT,
      its endpoint after.

    With no argument, none of VINEYARD_IPC_SOCKET, VINEYARD_RPC_ENDPOINT and
    VINEYARD_CONFIG set and no configuration file in ``/var/run``, it
    starts a local daemon for this process first, as upstream's
    (:func:`vineyard.deploy.local.try_init`: stopped by
    ``vineyard.deploy.local.shutdown()`` or at exit; VINEYARD_IPC_SOCKET
    then names it).

    ``timeout`` (seconds) bounds every later call (:attr:`Client.timeout`).
    Raises ConnectionError naming the socket or endpoint tried.
    """
    if (socket is None and port is None and host is None and endpoint is None and config is None
            and not os.environ.get("VINEYARD_IPC_SOCKET") and not os.environ.get("VINEYARD_RPC_ENDPOINT")
            and not os.environ.get("VINEYARD_CONFIG") and config_path(DEFAULT_DIR) is None):
        from .deploy.local import try_init

        os.environ.pop("VINEYARD_IPC_SOCKET", None)  # set but empty
        try_init()
    return Client(socket, timeout, port=port, host=host, endpoint=endpoint, username=username, password=password,
                  config=config)


def _rpc_endpoint(socket: str | None, host: str | None, port: int | str | None,
                  endpoint: str | tuple[str, int | str] | None) -> str:
    """The "host:port" of an RPC connect, or "" for IPC."""
    if endpoint is not None:
        if isinstance(endpoint, tuple):
            return f"{endpoint[0]}:{endpoint[1]}"
        return str(endpoint)
    if port is not None:
        h = host if host is not None else socket  # connect("host", 9600)
        if not h:
            raise ValueError("vineyard: connect with a port needs a host")
        return f"{h}:{port}"
    if host is not None:
        raise ValueError("vineyard: connect with a host needs a port")
    return ""
