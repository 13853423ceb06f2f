"""Upstream's ``vineyard.data.pickle``: a value as a stream of pickled
bytes read in blocks (:class:`PickledReader`), and back
(:class:`PickledWriter`), e.g. to move a value through a byte stream.

The bytes are one pickle (protocol 5) with every buffer in band, so a reader
of either side can load them with :func:`pickle.loads`. Not how ours stores
values (puts keep buffers as blobs, zero-copy); a helper for byte streams.
"""

from __future__ import annotations

import pickle
from typing import Any

__all__ = ["PickledReader", "PickledWriter"]


class PickledReader:
    """Pickles ``value`` once (a memoryview as its bytes); :meth:`read`
    returns the next block of at most ``block_size`` bytes, ``b""`` at the
    end. ``store_size`` is the total."""

    def __init__(self, value: Any) -> None:
        if isinstance(value, memoryview):  # pickle cannot take one: its bytes
            value = value.tobytes()
        self._data = memoryview(pickle.dumps(value, protocol=5))
        self._pos = 0

    @property
    def value(self) -> memoryview:
        """All the pickled bytes."""
        return self._data

    @property
    def store_size(self) -> int:
        return len(self._data)

    def read(self, block_size: int) -> bytes:
        if block_size <= 0:
            raise ValueError(f"vineyard: read size must be positive, not {block_size}")
        block = self._data[self._pos:self._pos + block_size]
        self._pos += len(block)
        return bytes(block)


class PickledWriter:
    """Collects the ``store_size`` bytes of a :class:`PickledReader` given
    block by block (:meth:`write`); :meth:`close` unpickles them into
    :attr:`value` (None until then)."""

    def __init__(self, store_size: int) -> None:
        self._buf = bytearray(store_size)
        self._pos = 0
        self._value: Any = None

    @property
    def value(self) -> Any:
        return self._value

    def write(self, block: bytes | bytearray | memoryview) -> None:
        n = len(block)
        if self._pos + n > len(self._buf):
            raise ValueError(f"vineyard: {self._pos + n} bytes written, more than the {len(self._buf)} announced")
        self._buf[self._pos:self._pos + n] = block
        self._pos += n

    def close(self) -> None:
        if self._pos != len(self._buf):
            raise ValueError(f"vineyard: {self._pos} bytes written of the {len(self._buf)} announced")
        self._value = pickle.loads(self._buf)
