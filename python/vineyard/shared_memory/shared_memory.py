"""SharedMemory and ShareableList over blobs (see the package docstring)."""

from __future__ import annotations

import os
import re
import struct
import sys
import threading
from collections.abc import Iterable
from multiprocessing import shared_memory as _cpython
from typing import Any

import numpy as np

from .._types import ObjectID, ObjectMeta
from ..errors import (
    ObjectExistsException,
    ObjectNotExistsException,
    ObjectNotSealedException,
    Status,
)

__all__ = ["ShareableList", "SharedMemory", "SharedMemoryExistsError", "SharedMemoryNotFoundError"]

_ID_TEXT = re.compile(r"o[0-9a-f]{16}\Z")


class SharedMemoryNotFoundError(ObjectNotExistsException, FileNotFoundError):
    """No block of that name (or it was unlinked): upstream's
    ``ObjectNotExistsException`` and CPython's ``FileNotFoundError``."""

    code = Status.OBJECT_NOT_EXISTS


class SharedMemoryExistsError(ObjectExistsException, FileExistsError):
    """A block was created with a name the store already has: upstream's
    ``ObjectExistsException`` and CPython's ``FileExistsError``."""

    code = Status.OBJECT_EXISTS


def _is_id(name: Any) -> bool:
    return isinstance(name, int) or (isinstance(name, str) and _ID_TEXT.match(name) is not None)


def _lookup(client: Any, name: Any) -> ObjectID:
    """The id a block's name stands for: an id (ObjectID, int, or its ``o…``
    text) as it is, any other text through the store's names (where it names
    the block's ``vineyard::SharedMemory`` object: blobs cannot be named)."""
    if _is_id(name):
        return ObjectID(name)
    if not isinstance(name, str) or not name:
        raise TypeError(f"vineyard: a shared memory name is an object id or a non-empty str, not {name!r}")
    try:
        return client.get_name(name)
    except ObjectNotExistsException as e:
        raise SharedMemoryNotFoundError(f"vineyard: no shared memory block named {name!r}") from e


# The typename of the object a named block's name points at (blobs cannot
# be named): its one member ``buffer_`` is the block's blob.
NAMED_TYPENAME = "vineyard::SharedMemory"


# Clients that unpickled blocks attach through, one per daemon address and
# process (a forked child must connect anew, never reuse its parent's).
_clients: dict[tuple[int, str, str], Any] = {}
_clients_lock = threading.Lock()


def _client_for(socket: str, endpoint: str) -> Any:
    from ..client import connect

    key = (os.getpid(), socket, endpoint)
    with _clients_lock:
        client = _clients.get(key)
        if client is None or not client.connected:
            client = connect(socket) if socket else connect(endpoint=endpoint)
            _clients[key] = client
        return client


def _address(client: Any) -> tuple[str, str]:
    return getattr(client, "ipc_socket", "") or "", getattr(client, "rpc_endpoint", "") or ""


def _attach_pickled(cls: type, socket: str, endpoint: str, name: str) -> Any:
    return cls(_client_for(socket, endpoint), name)


class SharedMemory:
    """A shared memory block in the store, as CPython's
    ``multiprocessing.shared_memory.SharedMemory`` with the client first.

    ``SharedMemory(client, create=True, size=n)`` (optionally ``name="x"``)
    creates a writable block of ``n`` bytes; :meth:`freeze` or :meth:`close`
    seals it, after which ``SharedMemory(client, name)`` attaches it read-only
    from any process of the daemon. See the package docstring for the rules.
    """

    def __init__(self, client: Any, name: str | int | None = None, create: bool = False, size: int = 0) -> None:
        if not size >= 0:
            raise ValueError("'size' must be a positive integer")
        if create and size == 0:
            raise ValueError("'size' must be a positive number different from zero")
        if name is None and not create:
            raise ValueError("'name' can only be None if create=True")
        self._client = client
        self._builder: Any = None
        self._buf: memoryview | None = None
        self._exporter: Any = None
        self._given_name: str | None = None
        self._named: ObjectID | None = None  # the vineyard::SharedMemory object the name points at
        self._copy: ObjectID | None = None  # its copy on this daemon, when the block is another daemon's
        if create:
            if name is not None:
                if _is_id(name):
                    raise ValueError(f"vineyard: {name!r} is an object id: the name of a new block must not be "
                                     "an id (leave it None to name the block by its id)")
                self._given_name = str(name)
                self._named = self._reserve(self._given_name)
            self._builder = client.create_blob(int(size))
            self._id = ObjectID(self._builder.id)
            self._size = int(size)
            # buf's exporter, referenced only by this object and by buffers
            # taken from buf: how close() and freeze() know that something
            # still uses the memory (CPython: "exported pointers exist").
            self._exporter = np.frombuffer(self._builder.memoryview(), dtype=np.uint8)
            self._buf = memoryview(self._exporter)
        else:
            self._id = _lookup(client, name)
            if isinstance(name, str) and not _is_id(name):
                self._given_name = name
            if not self._id.is_blob:
                self._named = self._id
                self._id = self._blob_of(self._id, name)
            self._attach()

    def _reserve(self, name: str) -> ObjectID:
        """Takes ``name`` for a new block, as CPython's create does, by naming
        a placeholder (a ``vineyard::SharedMemory`` without a buffer, which
        attaching reports as not frozen yet) until :meth:`freeze` names the
        real one. Raises SharedMemoryExistsError if the name is taken."""
        client = self._client
        try:
            client.get_name(name)
        except ObjectNotExistsException:
            pass
        else:
            raise SharedMemoryExistsError(f"vineyard: a shared memory block named {name!r} exists")
        meta = ObjectMeta()
        meta.typename = NAMED_TYPENAME
        meta["frozen_"] = False
        placeholder = client.create_metadata(meta).id
        client.persist(placeholder)
        client.put_name(placeholder, name)
        return placeholder

    def _blob_of(self, oid: ObjectID, name: Any) -> ObjectID:
        try:
            meta = self._client.get_meta(oid)
        except ObjectNotExistsException as e:
            raise SharedMemoryNotFoundError(f"vineyard: no shared memory block {name!r}") from e
        if meta.typename != NAMED_TYPENAME:
            raise ValueError(f"vineyard: {name!r} names a {meta.typename}, not a shared memory block")
        if "buffer_" not in meta:
            raise ObjectNotSealedException(f"vineyard: shared memory block {name!r} is not frozen yet: its creator "
                                           "must call freeze() or close() before others attach it")
        if meta.instance_id != self._client.instance_id:
            # A block of another daemon of the cluster: its bytes are copied
            # here once (the daemon keeps the copy for later attaches).
            self._copy = self._client.migrate(oid)
            meta = self._client.get_meta(self._copy)
        return meta.member("buffer_").id

    def _attach(self) -> None:
        try:
            blob = self._client.get_blob(self._id)
        except ObjectNotExistsException as e:
            raise SharedMemoryNotFoundError(f"vineyard: no shared memory block {self.name!r}") from e
        except ObjectNotSealedException as e:
            raise ObjectNotSealedException(f"vineyard: shared memory block {self.name!r} is not frozen yet: its "
                                           "creator must call freeze() or close() before others attach it") from e
        self._size = int(blob.size)
        self._exporter = blob  # it pins the blob
        self._buf = memoryview(blob)

    # -- CPython's interface ----------------------------------------------

    @property
    def buf(self) -> memoryview | None:
        """A memoryview of the block's bytes: writable until frozen, then
        read-only; None once closed."""
        return self._buf

    @property
    def name(self) -> str:
        """The name to attach the block by: the one it was created with, else
        its blob id's text (``"o8000…"``)."""
        return self._given_name if self._given_name is not None else repr(self._id)

    @property
    def id(self) -> ObjectID:
        """The block's blob id."""
        return self._id

    @property
    def size(self) -> int:
        """Size in bytes."""
        return self._size

    def freeze(self) -> SharedMemory:
        """Seals the block: its bytes become immutable and other processes
        can attach it; ``buf`` becomes a read-only view of the same memory.
        Raises BufferError, and seals nothing, while an export of ``buf``
        (a NumPy array over it...) is still alive. Does nothing if frozen."""
        builder = self._builder
        if builder is None:
            return self
        if self._exported():
            self._buf = memoryview(self._exporter)
            raise BufferError("vineyard: cannot freeze a block while buffers taken from its buf are alive "
                              "(they could write after the seal); release them first")
        self._exporter = None
        if self._given_name is None:
            builder.seal()
        else:
            # Blobs cannot be named, and names are for persisted objects:
            # the name moves from the placeholder to a persisted object
            # holding the blob, made in the round trip that seals it.
            client = self._client
            meta = ObjectMeta()
            meta.typename = NAMED_TYPENAME
            meta.nbytes = self._size
            meta["frozen_"] = True
            meta.add_member("buffer_", builder)
            named = client.create_metadata(meta).id
            client.persist(named)
            client.put_name(named, self._given_name)
            placeholder, self._named = self._named, named
            client.delete(placeholder)
        self._builder = None
        self._attach()
        return self

    def close(self) -> None:
        """Freezes the block if this process created it and has not yet
        (upstream's rule: a block becomes visible when its creator closes it),
        then releases ``buf``, which is None afterwards; the block stays in
        the store until unlinked. Raises BufferError while an export of
        ``buf`` is alive, as CPython does."""
        if self._builder is not None:
            self.freeze()
        if self._exported():
            raise BufferError("cannot close exported pointers exist")
        self._exporter = None

    def _exported(self) -> bool:
        """Releases buf (None afterwards), then reports whether a buffer
        taken from it is still alive (it keeps the exporter referenced)."""
        if self._buf is not None:
            self._buf.release()
            self._buf = None
        return self._exporter is not None and sys.getrefcount(self._exporter) > 2

    def unlink(self) -> None:
        """Deletes the block (and its name): attaching it fails from now on,
        while processes that attached it keep their views until they close
        them. An unfrozen block of this process is dropped (its ``buf`` is
        released). Raises FileNotFoundError if it is already gone."""
        client = self._client
        if self._builder is not None:
            if self._exported():
                self._buf = memoryview(self._exporter)
                raise BufferError("vineyard: cannot unlink an unfrozen block while buffers taken from its buf "
                                  "are alive (its memory is freed); release them first")
            self._exporter = None
            self._builder.abort()
            self._builder = None
            if self._named is not None:
                self._drop_name()
                client.delete(self._named)
            return
        if not client.exists(self._id):
            raise SharedMemoryNotFoundError(f"vineyard: no shared memory block {self.name!r}")
        if self._named is not None:
            self._drop_name()
        try:
            if self._copy is not None:
                client.delete(self._copy)
            client.delete(self._id if self._named is None else self._named)
        except ObjectNotExistsException as e:
            raise SharedMemoryNotFoundError(f"vineyard: no shared memory block {self.name!r}") from e

    def _drop_name(self) -> None:
        """Drops the block's name if it still points at this block."""
        client, name = self._client, self._given_name
        if name is None:
            return
        try:
            if client.get_name(name) == self._named:
                client.drop_name(name)
        except ObjectNotExistsException:
            pass

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - at collection: nothing to report to
            pass

    def __reduce__(self) -> tuple:
        socket, endpoint = _address(self._client)
        return (_attach_pickled, (type(self), socket, endpoint, self.name))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, size={self.size})"


_ENCODING = "utf8"


def _stdlib_list() -> Any:
    return _cpython.ShareableList  # a base mypy sees as Any: its stubs hide the layout helpers used here


class ShareableList(_stdlib_list()):  # type: ignore[misc]
    """A fixed-length list of int, float, bool, str, bytes and None in one
    :class:`SharedMemory` block, with CPython's byte layout (the same values
    make the same bytes) and methods, the client first.

    ``ShareableList(client, sequence)`` creates it (writable until
    :meth:`freeze`); ``ShareableList(client, name=...)`` attaches a frozen
    one. A name given with a sequence names the new block, as CPython's.
    """

    shm: SharedMemory  # type: ignore[assignment]

    def __init__(self, client: Any, sequence: Iterable[Any] | None = None, *, name: str | None = None) -> None:
        if name is not None and sequence is None:
            self.shm = SharedMemory(client, name)
            self._list_len = len(self)  # the count at offset 0
            self._allocated_offsets = list(struct.unpack_from(self._format_size_metainfo, self._buf(), 8))
            return
        items = list(sequence or ())
        formats = [self._format_of(item) for item in items]
        self._list_len = len(items)
        offsets = [0]
        for fmt in formats:
            offsets.append(offsets[-1] + (int(fmt[:-1]) if fmt.endswith("s") else self._alignment))
        self._allocated_offsets = offsets
        layout = ("q" + self._format_size_metainfo + "".join(formats) + self._format_packing_metainfo
                  + self._format_back_transform_codes)
        self.shm = SharedMemory(client, name, create=True, size=struct.calcsize(layout))
        buf = self._buf()
        struct.pack_into("q" + self._format_size_metainfo, buf, 0, self._list_len, *offsets)
        struct.pack_into("".join(formats), buf, self._offset_data_start,
                         *(v.encode(_ENCODING) if isinstance(v, str) else v for v in items))
        struct.pack_into(self._format_packing_metainfo, buf, self._offset_packing_formats,
                         *(f.encode(_ENCODING) for f in formats))
        struct.pack_into(self._format_back_transform_codes, buf, self._offset_back_transform_codes,
                         *(self._extract_recreation_code(v) for v in items))

    def _buf(self) -> memoryview:
        buf = self.shm.buf
        if buf is None:
            raise ValueError("vineyard: the ShareableList's block is closed")
        return buf

    def _format_of(self, item: Any) -> str:
        """The struct format of one item, as CPython packs it (str and bytes
        get room for their encoded length, rounded up past a multiple of 8)."""
        try:
            fmt = self._types_mapping[type(item)]
        except KeyError:
            raise TypeError(f"vineyard: a ShareableList holds int, float, bool, str, bytes and None, "
                            f"not {type(item).__name__}") from None
        if isinstance(item, (str, bytes)):
            fmt = fmt % (self._alignment * (len(item) // self._alignment + 1),)
        return fmt

    def freeze(self) -> ShareableList:
        """Seals the list's block: immutable from now on (assignments raise
        TypeError) and attachable by name from other processes."""
        self.shm.freeze()
        return self

    def __reduce__(self) -> tuple:
        socket, endpoint = _address(self.shm._client)
        return (_attach_list, (type(self), socket, endpoint, self.shm.name))


def _attach_list(cls: type, socket: str, endpoint: str, name: str) -> Any:
    return cls(_client_for(socket, endpoint), name=name)
