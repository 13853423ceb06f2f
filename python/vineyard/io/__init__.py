"""Streams and file I/O (upstream's ``vineyard.io``): the stream kinds
:class:`ByteStream`, :class:`RecordBatchStream`, :class:`DataframeStream`
and :class:`StreamCollection`, whose resolvers make ``client.get`` of a
stream id the stream object; :func:`read` and :func:`write` of Parquet, CSV,
ORC and JSON-lines files (:mod:`vineyard.io.files`). Nothing here imports pyarrow or pandas until a
stream needs it."""

from __future__ import annotations

from typing import Any

from . import byte, dataframe, files, recordbatch, stream
from .byte import ByteStream, register_byte_stream_types
from .dataframe import DataframeStream, register_dataframe_stream_types
from .files import read, write
from .recordbatch import RecordBatchStream, register_recordbatch_stream_types
from .stream import BaseStream, StreamCollection, register_stream_collection_types

__all__ = ["BaseStream", "ByteStream", "DataframeStream", "RecordBatchStream", "StreamCollection", "byte",
           "dataframe", "files", "open", "read", "recordbatch", "register_builtin_stream_types", "stream", "write"]


def open(path: str, *args: Any, mode: str = "r", **kwargs: Any) -> Any:
    """Upstream's ``vineyard.io.open``: :func:`read` with ``mode='r'``,
    :func:`write` (``open(path, source, mode='w')``) with ``mode='w'``."""
    if mode == "r":
        return read(path, *args, **kwargs)
    if mode == "w":
        return write(path, *args, **kwargs)
    raise ValueError(f"vineyard.io.open: mode {mode!r}: 'r' or 'w'")


def register_builtin_stream_types(builder_ctx: Any = None, resolver_ctx: Any = None) -> None:
    """Registers the resolvers of every stream kind (done at import)."""
    register_byte_stream_types(builder_ctx, resolver_ctx)
    register_dataframe_stream_types(builder_ctx, resolver_ctx)
    register_recordbatch_stream_types(builder_ctx, resolver_ctx)
    register_stream_collection_types(builder_ctx, resolver_ctx)


register_builtin_stream_types()
