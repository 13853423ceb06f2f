"""DataframeStream: a stream whose chunks are blobs each holding one record
batch in Arrow's IPC stream format (upstream's ``vineyard.io.dataframe``,
whose layout this keeps). ``reader.next()`` returns a ``pyarrow.RecordBatch``
over the shared memory, as upstream's; iterating a reader yields pandas
DataFrames; ``read_table()`` reads the rest into a table.

>>> stream = DataframeStream.new(client)                     # doctest: +SKIP
>>> with stream.open_writer(client) as writer:               # doctest: +SKIP
...     writer.write(df)
>>> for df in client.get(stream.id).open_reader(other):      # doctest: +SKIP
...     ...
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..errors import StreamDrainedException
from .stream import BaseStream, _register

__all__ = ["DataframeStream", "register_dataframe_stream_types"]


class DataframeStream(BaseStream):
    typename = "vineyard::DataframeStream"

    class Reader(BaseStream.Reader):
        def next(self) -> Any:
            import pyarrow as pa

            try:
                buffer = self._client.next_buffer_chunk(self._stream)
            except StreamDrainedException as e:
                raise StopIteration("No more chunks") from e
            with pa.ipc.open_stream(pa.py_buffer(buffer)) as reader:
                return reader.read_next_batch()

        def __next__(self) -> Any:
            return self.next().to_pandas()

        def __iter__(self) -> Iterator[Any]:
            return self

        def read_table(self) -> Any:
            import pyarrow as pa

            batches = []
            while True:
                try:
                    batches.append(self.next())
                except StopIteration:
                    break
            return pa.Table.from_batches(batches)

    class Writer(BaseStream.Writer):
        def write(self, batch: Any) -> None:
            """Writes one record batch (or a pandas DataFrame) as a chunk."""
            import pyarrow as pa

            if not isinstance(batch, pa.RecordBatch):
                batch = pa.RecordBatch.from_pandas(batch, preserve_index=False)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, batch.schema) as w:
                w.write_batch(batch)
            data = sink.getvalue()
            if data.size:
                self.next(data.size)[:] = memoryview(data).cast("B")

        def write_table(self, table: Any) -> None:
            for batch in table.to_batches():
                self.write(batch)

    def _open_new_reader(self, client: Any) -> Any:
        return DataframeStream.Reader(client, self.id)

    def _open_new_writer(self, client: Any) -> Any:
        return DataframeStream.Writer(client, self.id)


def register_dataframe_stream_types(_builder_ctx: Any = None, resolver_ctx: Any = None) -> None:
    """Registers the resolver that makes ``client.get`` of a
    ``vineyard::DataframeStream`` a :class:`DataframeStream`."""
    _register(DataframeStream.typename, lambda meta, client: DataframeStream(meta, client=client))
