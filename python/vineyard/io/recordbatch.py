"""RecordBatchStream: a stream whose chunks are stored Arrow record batches
(or tables, or any value: upstream's writers push what they put). A reader
yields each chunk's value, zero-copy (a ``pyarrow.RecordBatch`` for a record
batch); a RecordBatchStream, and its reader, also give the Arrow C stream
interface (``__arrow_c_stream__``, over ``v6d_get_arrow_stream``), so
``pa.RecordBatchReader.from_stream(stream)``, polars or duckdb read it as it
is written (through the connection of the stream's client, which must stay
open until the reading ends).

>>> stream = RecordBatchStream.new(client)                    # doctest: +SKIP
>>> with stream.open_writer(client) as writer:                # doctest: +SKIP
...     writer.write_table(table)
>>> pa.RecordBatchReader.from_stream(client.get(stream.id)).read_all()  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .. import _ffi
from .stream import BaseStream, _register

__all__ = ["RecordBatchStream", "recordbatch_stream_context", "register_recordbatch_stream_types"]


def _arrow_stream_capsule(client: Any, stream: Any) -> Any:
    """A capsule of an ArrowArrayStream over the stream, read on ``client``."""
    from ..data.arrow import _STREAM, ArrowArrayStream, _alloc, _capsule, _libc

    ptr = _alloc(ArrowArrayStream)
    try:
        _ffi.call("v6d_get_arrow_stream", client._session.handle(), int(stream), ptr)
    except BaseException:
        _libc.free(ptr)
        raise
    return _capsule(_STREAM, ptr)


class RecordBatchStream(BaseStream):
    typename = "vineyard::RecordBatchStream"

    class Reader(BaseStream.Reader):
        def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
            """The rest of the stream as an Arrow C stream (the batches of
            its record batch and table chunks), read on this reader's
            connection."""
            return _arrow_stream_capsule(self._client, self._stream)

        def record_batch_reader(self) -> Any:
            """The rest of the stream as a ``pyarrow.RecordBatchReader``."""
            import pyarrow as pa

            return pa.RecordBatchReader.from_stream(self)

        def read_table(self) -> Any:
            """Reads the rest of the stream into a ``pyarrow.Table`` (its
            buffers are the chunks' shared memory)."""
            return self.record_batch_reader().read_all()

    class Writer(BaseStream.Writer):
        def write(self, value: Any, timeout: float | None = None) -> Any:
            """Puts ``value`` (a record batch, table, data frame: anything
            ``client.put`` takes) and pushes it as the next chunk; returns
            its id."""
            chunk = self._client.put(value)
            self.append(chunk, timeout)
            return chunk

        def write_table(self, table: Any, timeout: float | None = None) -> None:
            """Pushes each record batch of ``table`` as a chunk."""
            for batch in table.to_batches():
                self.write(batch, timeout)

    def _open_new_reader(self, client: Any) -> Any:
        return RecordBatchStream.Reader(client, self.id, self._resolver)

    def _open_new_writer(self, client: Any) -> Any:
        return RecordBatchStream.Writer(client, self.id)

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """The stream as an Arrow C stream, read by this stream's reader
        (opened on its client if it is not yet)."""
        return self.open_reader().__arrow_c_stream__(requested_schema)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.open_reader())


def register_recordbatch_stream_types(_builder_ctx: Any = None, resolver_ctx: Any = None) -> None:
    """Registers the resolver that makes ``client.get`` of a
    ``vineyard::RecordBatchStream`` a :class:`RecordBatchStream`."""
    _register(RecordBatchStream.typename, lambda meta, client: RecordBatchStream(meta, client=client))


@contextlib.contextmanager
def recordbatch_stream_context() -> Iterator[None]:
    """Upstream's context manager; the resolver is registered at import."""
    register_recordbatch_stream_types()
    yield
