"""Streams: objects whose chunks, ordinary sealed objects or blobs, one
writer pushes and readers pull in order, across processes (upstream's
``vineyard.io.stream``; the protocol is docs/protocol.md, "Streams").

A stream is made by a class's ``new(client, params=None)``
(:class:`~vineyard.io.byte.ByteStream`,
:class:`~vineyard.io.recordbatch.RecordBatchStream`,
:class:`~vineyard.io.dataframe.DataframeStream`); another process gets it
with ``client.get(stream_id)``. ``stream.open_writer(client)`` and
``stream.open_reader(client)`` open it on a connection (one writer; one
reader, or ``readers=N`` at ``new`` for N readers that each see every
chunk). A reader is an iterator and ends at the end of the stream; a stream
that failed (its writer called ``fail()`` or went away) raises
``StreamFailedException``.

>>> stream = RecordBatchStream.new(client)                   # doctest: +SKIP
>>> with stream.open_writer(client) as writer:               # doctest: +SKIP
...     writer.write(batch)
>>> for batch in client.get(stream.id).open_reader(other):   # doctest: +SKIP
...     ...
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Callable

from .._types import ObjectID, ObjectMeta
from ..errors import StreamDrainedException

__all__ = ["BaseStream", "StreamCollection", "register_stream_collection_types"]


class BaseStream:
    """A stream object: its metadata, params and the client it came with."""

    #: the stream's typename (set by each kind)
    typename = ""

    class Reader:
        """Reads a stream's chunks in order, each resolved to its value
        (``client.get``), or by ``resolver(obj)`` when given. ``next()``
        raises ``StopIteration`` at the end, as upstream's; iterating stops
        there."""

        def __init__(self, client: Any, stream: Any, resolver: Callable[[Any], Any] | None = None) -> None:
            self._client = client
            self._stream = ObjectID(stream)
            self._resolver = resolver
            client.open_stream(self._stream, "r")

        def _next_id(self) -> ObjectID:
            try:
                return self._client.next_chunk_id(self._stream)
            except StreamDrainedException as e:
                raise StopIteration("No more chunks") from e

        def next(self) -> Any:
            chunk = self._next_id()
            if self._resolver is not None:
                return self._resolver(self._client.get_object(chunk))
            return self._client.get(chunk)

        def next_metadata(self) -> ObjectMeta:
            return self._client.get_meta(self._next_id())

        def __iter__(self) -> Iterator[Any]:
            return self

        def __next__(self) -> Any:
            return self.next()

        def __repr__(self) -> str:
            return f"{type(self).__qualname__} of Stream <{self._stream!r}>"

        __str__ = __repr__

    class Writer:
        """Writes a stream: ``append(chunk_id)`` pushes a sealed object or
        blob (waiting while the stream is full), ``next(size)`` hands out a
        buffer that becomes the next chunk, ``finish()`` ends the stream and
        ``fail()`` fails it. As a context manager it finishes on success and
        fails on an exception."""

        def __init__(self, client: Any, stream: Any) -> None:
            self._client = client
            self._stream = ObjectID(stream)
            client.open_stream(self._stream, "w")

        def next(self, size: int) -> memoryview:
            return self._client.new_buffer_chunk(self._stream, size)

        def append(self, chunk: Any, timeout: float | None = None) -> None:
            self._client.push_chunk(self._stream, chunk, timeout)

        def fail(self) -> None:
            self._client.stop_stream(self._stream, True)

        def finish(self) -> None:
            self._client.stop_stream(self._stream, False)

        def __enter__(self) -> Any:
            return self

        def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
            if kind is None:
                self.finish()
            else:
                self.fail()

        def __repr__(self) -> str:
            return f"{type(self).__qualname__} of Stream <{self._stream!r}>"

        __str__ = __repr__

    def __init__(self, meta: ObjectMeta, resolver: Callable[[Any], Any] | None = None, *,
                 params: dict[str, Any] | None = None, client: Any = None) -> None:
        self._meta = meta
        self._stream = meta.id
        self._resolver = resolver
        self._params = params if params is not None else _params_of(meta)
        self._client = client
        self._reader: Any = None
        self._writer: Any = None

    @classmethod
    def _create(cls, client: Any, params: dict[str, Any] | None, meta: ObjectMeta | None,
                readers: int, capacity: int) -> Any:
        if meta is None:
            meta = ObjectMeta()
        meta["typename"] = cls.typename
        params = dict(params or {})
        meta["params_"] = params
        meta = client.create_metadata(meta)
        client.create_stream(meta.id, readers, capacity)
        return cls(meta, params=params, client=client)

    @classmethod
    def new(cls, client: Any, params: dict[str, Any] | None = None, meta: ObjectMeta | None = None, *,
            readers: int = 1, capacity: int = 0) -> Any:
        """Creates a stream of this kind: its metadata (``params`` stored as
        ``params_``), then the stream. ``readers`` readers each see every
        chunk; ``capacity`` chunks are buffered before the writer waits (0:
        the daemon's default)."""
        return cls._create(client, params, meta, readers, capacity)

    @property
    def id(self) -> ObjectID:
        return self._stream

    @property
    def meta(self) -> ObjectMeta:
        return self._meta

    @property
    def params(self) -> dict[str, Any]:
        return self._params

    def _client_or(self, client: Any) -> Any:
        client = client if client is not None else self._client
        if client is None:
            raise ValueError(f"{self!r} was made without a client: pass one")
        return client

    def _open_new_reader(self, client: Any) -> Any:
        return BaseStream.Reader(client, self.id, self._resolver)

    def _open_new_writer(self, client: Any) -> Any:
        return BaseStream.Writer(client, self.id)

    def open_reader(self, client: Any = None) -> Any:
        """Opens the stream for reading on ``client`` (default: the client
        it came with); the same reader on later calls."""
        if self._reader is None:
            self._reader = self._open_new_reader(self._client_or(client))
        return self._reader

    def open_writer(self, client: Any = None) -> Any:
        """Opens the stream for writing on ``client`` (default: the client
        it came with); the same writer on later calls."""
        if self._writer is None:
            self._writer = self._open_new_writer(self._client_or(client))
        return self._writer

    @property
    def reader(self) -> Any:
        return self.open_reader()

    @property
    def writer(self) -> Any:
        return self.open_writer()

    def drop(self, client: Any = None) -> None:
        """Removes the stream and its metadata."""
        self._client_or(client).drop_stream(self.id)

    def __repr__(self) -> str:
        return f"{type(self).__name__} <{self._stream!r}>"

    __str__ = __repr__


def _params_of(meta: ObjectMeta) -> dict[str, Any]:
    raw = meta.get("params_")
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}
    return dict(raw) if isinstance(raw, dict) else {}


class StreamCollection:
    """A set of streams (or collections), as upstream's: an object of type
    ``vineyard::StreamCollection`` listing their ids under ``__streams``."""

    KEY_OF_STREAMS = "__streams"
    KEY_OF_PATH = "__path"
    KEY_OF_GLOBAL = "__global"
    KEY_OF_OPTIONS = "__options"

    def __init__(self, meta: ObjectMeta, streams: list[ObjectID]) -> None:
        self._meta = meta
        self._streams = streams
        self._global = bool(meta.get(StreamCollection.KEY_OF_GLOBAL, False))

    @staticmethod
    def new(client: Any, metadata: dict[str, Any], streams: list[Any], meta: ObjectMeta | None = None) -> StreamCollection:
        if meta is None:
            meta = ObjectMeta()
        meta["typename"] = "vineyard::StreamCollection"
        for k, v in metadata.items():
            if k not in ("id", "signature", "instance_id", "transient", "global", "typename"):
                meta[k] = v
        meta[StreamCollection.KEY_OF_STREAMS] = [int(s) for s in streams]
        meta = client.create_metadata(meta)
        return StreamCollection(meta, [ObjectID(s) for s in streams])

    @property
    def id(self) -> ObjectID:
        return self._meta.id

    @property
    def meta(self) -> ObjectMeta:
        return self._meta

    @property
    def isglobal(self) -> bool:
        return self._global

    @property
    def streams(self) -> list[ObjectID]:
        return self._streams

    def __repr__(self) -> str:
        return f"StreamCollection: {self.id!r} [{[repr(s) for s in self.streams]}]"

    __str__ = __repr__


def stream_collection_resolver(obj: Any) -> StreamCollection:
    meta = obj.meta
    return StreamCollection(meta, [ObjectID(s) for s in json.loads(meta[StreamCollection.KEY_OF_STREAMS])])


def _register(typename: str, make: Callable[[ObjectMeta, Any], Any]) -> None:
    """Registers a resolver of typename that makes the stream object with
    the client of the get."""
    from ..data import registry

    def resolve(session: Any, tree: dict[str, Any], pin: Any) -> Any:
        return make(ObjectMeta(tree), session.client)

    registry.register_resolver(typename, resolve)


def register_stream_collection_types(_builder_ctx: Any = None, resolver_ctx: Any = None) -> None:
    """Registers the resolver of ``vineyard::StreamCollection``."""
    _register("vineyard::StreamCollection",
              lambda meta, client: StreamCollection(meta, [ObjectID(s) for s in json.loads(
                  meta[StreamCollection.KEY_OF_STREAMS])]))
