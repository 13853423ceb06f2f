"""Blobs of a composite value, created in one round trip and filled once.

A builder of a value made of many arrays (a DataFrame and its columns) first
builds the metadata trees and records, for each blob, which tree it belongs to,
under which member key, and which bytes it must hold; :meth:`BlobBatch.commit`
then creates every blob with one ``create_blob`` round trip, copies each source
exactly once (large copies split over a few threads: ``ctypes.memmove`` and
NumPy's copy loops release the GIL; each thread first maps the pages of its
piece with ``v6d_pretouch``, 16 at a time instead of a fault per page) and adds
the blobs as members. The root
tree, created with ``create_metadata``, seals them all in the same round trip.

When all the bytes are few (``vineyard._session.INLINE_BYTES``, 64 KiB), no blob is created up front:
they go with the tree itself (``ObjectMeta.add_inline_member``), blobs and
objects in a single round trip.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from .. import _ffi
from .._handles import ArrayHolder
from .._session import INLINE_BYTES
from .._types import ObjectID, ObjectMeta

__all__ = ["BlobBatch", "copy_bytes"]

# Copies of at least this many bytes are split into chunks over the pool.
_SPLIT_BYTES = 8 << 20
_CHUNK_BYTES = 4 << 20
# Copies of at least this many bytes into shared memory first map their pages
# (v6d_pretouch): 1-5% of a warm put's time when already mapped, about a
# quarter of faulting page by page when not (docs/performance.md, "Cold puts").
_PRETOUCH_BYTES = 1 << 20

_pool: ThreadPoolExecutor | None = None
_pool_pid = 0
_pool_lock = threading.Lock()


def _copy_threads() -> int:
    value = os.environ.get("VINEYARD_COPY_THREADS")
    if value:
        return max(1, int(value))
    return max(1, min(4, os.cpu_count() or 1))


def _executor() -> ThreadPoolExecutor | None:
    global _pool, _pool_pid
    threads = _copy_threads()
    if threads < 2:
        return None
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():  # a forked child has no threads of ours
            _pool = ThreadPoolExecutor(threads, thread_name_prefix="vineyard-copy")
            _pool_pid = os.getpid()
        return _pool


def _source_array(source: Any) -> Any:
    if isinstance(source, np.ndarray):
        return source
    return np.frombuffer(source, dtype=np.uint8)  # bytes, memoryview: read-only is fine


def _writable_view(address: int, like: Any) -> Any:
    """A writable C-order array over ``address`` with ``like``'s shape and dtype."""
    return np.asarray(ArrayHolder(None, address, like.shape, like.dtype.str, None, readonly=False))


class BlobBatch:
    """Blobs to create together: :meth:`add` records them, :meth:`commit`
    creates, fills and attaches them."""

    def __init__(self) -> None:
        self._jobs: list[tuple[ObjectMeta, str, Any]] = []
        self._builders: list[Any] = []
        self.created: list[int] = []  # objects stored while building (Arrow columns)

    def add(self, meta: ObjectMeta, key: str, source: Any) -> None:
        """Records a blob member ``key`` of ``meta`` holding ``source``: a
        NumPy array (any strides or order; stored in C order, as
        :func:`~vineyard.data.tensor.tensor_meta` says, in one pass) or a
        bytes-like object."""
        self._jobs.append((meta, key, _source_array(source)))

    def commit(self, session: Any, root: ObjectMeta) -> None:
        """Creates every blob in one round trip, fills them, adds them to
        their trees, and makes ``root`` (the tree ``create_metadata`` will
        get) seal them. Every tree given to :meth:`add` must be ``root`` or
        embedded in it already."""
        jobs = self._jobs = [job for job in self._jobs if not _reused(session, *job)]
        if not jobs:
            return
        sizes = [src.nbytes for _, _, src in jobs]
        if sum(sizes) <= INLINE_BYTES:
            for meta, key, src in jobs:  # a strided or F-order source gets its C-order copy here
                data = src if src.flags.c_contiguous else np.ascontiguousarray(src)
                root.add_inline_member(key, data, tree=meta)
            self._jobs = []
            return
        builders = self._builders = session.create_blob(sizes) if len(jobs) > 1 else [session.create_blob(sizes[0])]
        touch = not session.conn.remote  # a remote client's blobs are local buffers, not the arena
        if sum(sizes) < _SPLIT_BYTES:
            for builder, (_, _, src) in zip(builders, jobs):
                if src.nbytes:
                    _copy_one((builder.address, src, touch))
        else:
            _run([task for builder, (_, _, src) in zip(builders, jobs) if src.nbytes
                  for task in _copy_tasks(builder.address, src, touch)])
        for builder, (meta, key, _) in zip(builders, jobs):
            meta.add_member(key, builder)
            if meta is not root and not builder.issealed:  # root copied a member's seal ids when embedding it
                root.seal_with(builder)
        self._jobs = []

    @contextlib.contextmanager
    def building(self, session: Any) -> Iterator[BlobBatch]:
        """On an error inside the block, deletes the objects stored for the
        value (``created``) and drops its unsealed blobs, then re-raises."""
        try:
            yield self
        except BaseException:
            with contextlib.suppress(Exception):  # best effort: the original error matters
                for builder in self._builders:
                    if not builder.issealed:
                        builder.abort()
                if self.created:
                    session.delete(self.created)
            raise


def _reused(session: Any, meta: ObjectMeta, key: str, src: Any) -> bool:
    """Upstream reuses a stored blob for data that is its bytes (a column of
    a got frame put again): when ``src`` is, whole, a read-only view of a
    blob that a get on this session's connection pinned, ``meta`` gets that
    blob as member ``key`` (no copy; the blob is sealed, so the bytes are
    the stored ones) and True is returned; else False."""
    if not isinstance(src, np.ndarray) or not src.nbytes or not src.flags.c_contiguous:
        return False
    base: Any = src
    while base is not None and not isinstance(base, ArrayHolder):
        base = getattr(base, "base", None)
    pin = getattr(base, "pin", None)
    readonly = bool(getattr(base, "__array_interface__", {}).get("data", (0, False))[1])
    if pin is None or pin.conn is not session.conn or not pin.views or not readonly:
        return False  # not a get's view, another connection's, or writable (a TCP client's private copy)
    address = src.__array_interface__["data"][0]
    for bid, (start, size) in pin.views.items():
        if start == address and size == src.nbytes:
            meta.add_member(key, ObjectID(bid))
            return True
    return False


def _copy_tasks(address: int, src: Any, touch: bool) -> list[tuple[int, Any, bool]]:
    """Splits one large copy into (destination address, source array, touch)
    pieces of about _CHUNK_BYTES."""
    if src.flags.c_contiguous:
        flat = src.reshape(-1).view("u1")
        return [(address + i, flat[i:i + _CHUNK_BYTES], touch) for i in range(0, flat.nbytes, _CHUNK_BYTES)]
    row = src.nbytes // len(src)  # strided or F order: stored C-contiguous, copied by slabs of rows
    step = max(1, _CHUNK_BYTES // row)
    return [(address + i * row, src[i:i + step], touch) for i in range(0, len(src), step)]


def _copy_one(task: tuple[int, Any, bool]) -> None:
    """Copies src to address; with touch (address in the arena), large
    copies map their destination pages first."""
    address, src, touch = task
    if src.flags.c_contiguous:
        copy_bytes(address, src.ctypes.data, src.nbytes, touch)
        return
    if touch and src.nbytes >= _PRETOUCH_BYTES:
        _ffi.call("v6d_pretouch", address, src.nbytes)
    np.copyto(_writable_view(address, src), src, casting="no")  # into C order; releases the GIL


def copy_bytes(address: int, source: int, nbytes: int, touch: bool) -> None:
    """Copies nbytes from address source to address (a blob this process
    created; touch: in the arena, not a remote client's buffer), mapping the
    destination pages of each _CHUNK_BYTES piece just before copying it."""
    if not touch or nbytes < _PRETOUCH_BYTES:
        ctypes.memmove(address, source, nbytes)  # releases the GIL
        return
    for off in range(0, nbytes, _CHUNK_BYTES):
        n = min(_CHUNK_BYTES, nbytes - off)
        _ffi.call("v6d_pretouch", address + off, n)
        ctypes.memmove(address + off, source + off, n)


def _run(tasks: list[tuple[int, Any, bool]]) -> None:
    pool = _executor() if len(tasks) > 1 else None
    if pool is None:
        for task in tasks:
            _copy_one(task)
        return
    futures = [pool.submit(_copy_one, task) for task in tasks]
    try:
        for future in futures:
            future.result()
    finally:  # on an error (or Ctrl-C) no copy may go on into blobs the caller then aborts
        for future in futures:
            future.cancel()
        wait(futures)
