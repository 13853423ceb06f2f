"""Files into the store and back, over pyarrow.dataset: Parquet, CSV, ORC and
JSON lines, from a local path or, when fsspec is installed, any fsspec URL
(``s3://``, ``gs://``, ``memory://``...).

- :func:`read` opens a file (or a directory of them) as a
  :class:`~vineyard.io.recordbatch.RecordBatchStream` whose batches a thread
  of this process writes as they are read (another process may read the
  stream meanwhile), or, with ``accumulate=True``, stores it as one table
  and returns its id.
- :func:`write` writes a RecordBatchStream (read to its end), a stored table
  or a pyarrow table to one file.

``python -m vineyard.io read|write ...`` does the same from a shell.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Callable
from urllib.parse import urlparse

from .._types import ObjectID
from .recordbatch import RecordBatchStream

__all__ = ["FORMATS", "format_of", "read", "write"]

#: The formats, by the file name extensions that imply them.
FORMATS = {
    ".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".orc": "orc",
    ".json": "json", ".jsonl": "json", ".ndjson": "json",
}


def format_of(path: str, format: str | None = None) -> str:
    """The format named, or implied by the extension of ``path``."""
    if format is not None:
        if format not in set(FORMATS.values()):
            raise ValueError(f"vineyard.io: unknown format {format!r}: one of {sorted(set(FORMATS.values()))}")
        return format
    name = urlparse(path).path if "://" in path else path
    ext = os.path.splitext(name.rstrip("/"))[1].lower()
    if ext not in FORMATS:
        raise ValueError(f"vineyard.io: cannot tell the format of {path!r} from its name: pass format= "
                         f"({', '.join(sorted(set(FORMATS.values())))})")
    return FORMATS[ext]


def _filesystem(path: str, storage_options: dict[str, Any] | None) -> tuple[Any, str]:
    """(a pyarrow filesystem or None for the local one, the path in it)."""
    scheme = urlparse(path).scheme if "://" in path else ""
    if scheme in ("", "file"):
        return None, path[len("file://"):] if scheme else path
    try:
        import fsspec
    except ImportError as e:
        raise ValueError(f"vineyard.io: {path!r} is a {scheme}:// URL: install fsspec to read it") from e
    import pyarrow.fs as pafs

    fs, inner = fsspec.core.url_to_fs(path, **(storage_options or {}))
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), inner


def _dataset(path: str, format: str, storage_options: dict[str, Any] | None) -> Any:
    import pyarrow.dataset as ds

    fs, inner = _filesystem(path, storage_options)
    return ds.dataset(inner, format=format, filesystem=fs)


def read(path: str, vineyard_ipc_socket: str | None = None, *, client: Any = None, format: str | None = None,
         accumulate: bool = False, chunk_hook: Callable[[Any], Any] | None = None, batch_size: int | None = None,
         capacity: int = 0, storage_options: dict[str, Any] | None = None,
         handlers: list[Any] | None = None) -> Any:
    """Reads ``path`` (a file or a directory of files of one format) into
    the store.

    Returns a :class:`RecordBatchStream` of its record batches (each
    ``chunk_hook(batch)`` when given), written by a thread of this process
    on a connection of its own as fast as the stream's readers take them
    (``capacity`` chunks ahead; the thread is appended to ``handlers``);
    a read error fails the stream (and is logged). With ``accumulate=True`` the whole file
    is stored as one ``vineyard::Table`` and its id returned. ``client``
    defaults to a connection to ``vineyard_ipc_socket`` (or the
    environment's)."""
    import vineyard

    if client is None:
        client = vineyard.connect(vineyard_ipc_socket)
    fmt = format_of(path, format)
    dataset = _dataset(path, fmt, storage_options)
    scan = {"batch_size": batch_size} if batch_size else {}
    if accumulate:
        import pyarrow as pa

        batches = [chunk_hook(b) if chunk_hook else b for b in dataset.to_batches(**scan)]
        table = pa.Table.from_batches(batches, schema=None if batches else dataset.schema)
        return client.put(table)
    stream = RecordBatchStream.new(client, {"path": path, "format": fmt}, capacity=capacity)
    writer_client = client.fork()
    writer = stream.open_writer(writer_client)

    def produce() -> None:
        try:
            for batch in dataset.to_batches(**scan):
                writer.write(chunk_hook(batch) if chunk_hook else batch, timeout=3600)
        except BaseException as e:  # noqa: BLE001 (the stream's readers learn of it)
            writer.fail()
            logging.getLogger("vineyard").warning("vineyard.io.read %s failed: %r", path, e)
        else:
            writer.finish()
        finally:
            writer_client.close()

    thread = threading.Thread(target=produce, name=f"vineyard.io.read {path}", daemon=True)
    thread.start()
    if handlers is not None:
        handlers.append(thread)
    return stream


def _batches_of(client: Any, source: Any) -> tuple[Any, Any]:
    """(schema, iterator of record batches) of a stream, a stored object or
    a pyarrow table / reader."""
    import pyarrow as pa

    if isinstance(source, (ObjectID, int, str)):
        source = client.get(ObjectID(source) if not isinstance(source, ObjectID) else source)
    if isinstance(source, RecordBatchStream):
        source = pa.RecordBatchReader.from_stream(source.open_reader(client))
    if isinstance(source, pa.RecordBatch):
        source = pa.Table.from_batches([source])
    if isinstance(source, pa.Table):
        return source.schema, iter(source.to_batches())
    if isinstance(source, pa.RecordBatchReader):
        return source.schema, iter(source)
    raise TypeError(f"vineyard.io.write: cannot write a {type(source).__name__}: a RecordBatchStream, a stored "
                    "table or record batch, or a pyarrow table")


def write(path: str, source: Any, vineyard_ipc_socket: str | None = None, *, client: Any = None,
          format: str | None = None, chunk_hook: Callable[[Any], Any] | None = None,
          storage_options: dict[str, Any] | None = None) -> None:
    """Writes ``source`` to the file ``path``: a RecordBatchStream (or its
    id; read to its end on ``client``), a stored table or record batch (its
    id), or a pyarrow table. A stream that fails raises
    ``StreamFailedException`` and leaves a partial file."""
    import vineyard

    if client is None:
        client = vineyard.connect(vineyard_ipc_socket)
    fmt = format_of(path, format)
    schema, batches = _batches_of(client, source)
    if chunk_hook is not None:
        batches = (chunk_hook(b) for b in batches)
    fs, inner = _filesystem(path, storage_options)
    if fs is None:
        parent = os.path.dirname(os.path.abspath(inner))
        os.makedirs(parent, exist_ok=True)
        sink = open(inner, "wb")  # noqa: SIM115 (closed below)
    else:
        sink = fs.open_output_stream(inner)
    try:
        _write_format(fmt, sink, schema, batches)
    finally:
        sink.close()


def _write_format(fmt: str, sink: Any, schema: Any, batches: Any) -> None:
    import pyarrow as pa

    if fmt == "parquet":
        import pyarrow.parquet as pq

        with pq.ParquetWriter(sink, schema) as w:
            for b in batches:
                w.write_batch(b)
    elif fmt == "csv":
        import pyarrow.csv as pacsv

        with pacsv.CSVWriter(sink, schema) as w:
            for b in batches:
                w.write_batch(b)
    elif fmt == "orc":
        import pyarrow.orc as paorc

        w = paorc.ORCWriter(sink)
        try:
            for b in batches:
                w.write(pa.Table.from_batches([b]))
        finally:
            w.close()
    else:  # JSON lines
        for b in batches:
            text = b.to_pandas().to_json(orient="records", lines=True, date_format="iso")
            if text and not text.endswith("\n"):
                text += "\n"
            sink.write(text.encode())
