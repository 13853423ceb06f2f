"""ByteStream: a stream whose chunks are blobs of bytes (upstream's
``vineyard.io.byte``). A reader yields read-only memoryviews over the shared
memory; a writer hands out writable buffers (``next(size)``) or gathers
``write(data)`` into chunks of ``buffer_size_limit`` bytes.

>>> stream = ByteStream.new(client)                       # doctest: +SKIP
>>> with stream.open_writer(client) as writer:            # doctest: +SKIP
...     writer.write(b"abc")
>>> b"".join(client.get(stream.id).open_reader(other))    # doctest: +SKIP
b'abc'
"""

from __future__ import annotations

import io
from typing import Any

from ..errors import StreamDrainedException
from .stream import BaseStream, _register

__all__ = ["ByteStream", "register_byte_stream_types"]


class ByteStream(BaseStream):
    typename = "vineyard::ByteStream"

    class Reader(BaseStream.Reader):
        def next(self) -> memoryview:
            try:
                return self._client.next_buffer_chunk(self._stream)
            except StreamDrainedException as e:
                raise StopIteration("No more chunks") from e

    class Writer(BaseStream.Writer):
        def __init__(self, client: Any, stream: Any) -> None:
            super().__init__(client, stream)
            self._buffer_size_limit = 256 << 20
            self._buffer = io.BytesIO()

        @property
        def buffer_size_limit(self) -> int:
            return self._buffer_size_limit

        @buffer_size_limit.setter
        def buffer_size_limit(self, value: int) -> None:
            self._buffer_size_limit = value

        def write(self, data: Any) -> None:
            """Appends bytes; a chunk goes out each time ``buffer_size_limit``
            bytes gathered, the rest at ``finish``."""
            self._buffer.write(data)
            self._flush(False)

        def _flush(self, force: bool) -> None:
            view = self._buffer.getbuffer()
            n = len(view)
            if n and (force or n >= self._buffer_size_limit):
                self.next(n)[:] = view
            view.release()
            if n and (force or n >= self._buffer_size_limit):
                self._buffer = io.BytesIO()

        def finish(self) -> None:
            self._flush(True)
            super().finish()

    def _open_new_reader(self, client: Any) -> Any:
        return ByteStream.Reader(client, self.id)

    def _open_new_writer(self, client: Any) -> Any:
        return ByteStream.Writer(client, self.id)


def register_byte_stream_types(_builder_ctx: Any = None, resolver_ctx: Any = None) -> None:
    """Registers the resolver that makes ``client.get`` of a
    ``vineyard::ByteStream`` a :class:`ByteStream`."""
    _register(ByteStream.typename, lambda meta, client: ByteStream(meta, client=client))



