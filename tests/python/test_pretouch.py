"""v6d_pretouch: a large copy into a new blob first maps its pages (16 per
read fault); it accepts only ranges of blobs this process created, and a put
that uses it stores exactly its bytes."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import vineyard
from vineyard import _ffi
from vineyard.data import batch
from vineyard.errors import InvalidException


def test_pretouch_accepts_a_new_blob_and_keeps_its_bytes(client):
    size = 8 << 20
    builder = client.create_blob(size)
    ctypes.memset(builder.address, 7, size)
    _ffi.call("v6d_pretouch", builder.address, size)
    _ffi.call("v6d_pretouch", builder.address + 12345, 4 << 20)  # any piece of it
    blob = client.get(builder.seal())
    assert bytes(memoryview(blob)[:4]) == b"\x07" * 4
    assert np.frombuffer(blob, dtype=np.uint8).min() == 7  # reading wrote nothing


def test_pretouch_refuses_memory_outside_the_writable_arena(client):
    heap = ctypes.create_string_buffer(1 << 20)
    with pytest.raises(InvalidException, match="not in a writable arena mapping"):
        _ffi.call("v6d_pretouch", ctypes.addressof(heap), len(heap))
    view = client.get(client.put(np.ones(1 << 18)))  # a read-only view of the arena
    with pytest.raises(InvalidException):
        _ffi.call("v6d_pretouch", view.__array_interface__["data"][0], view.nbytes)
    builder = client.create_blob(1 << 20)
    with pytest.raises(InvalidException):  # runs past the end of the arena's mapping
        _ffi.call("v6d_pretouch", builder.address, 1 << 62)
    builder.abort()


@pytest.mark.parametrize("order", ["C", "F"])
def test_large_puts_through_the_pretouch_store_their_bytes(client, order, monkeypatch):
    # Larger than a C-order array put in one call (libv6d maps its pages itself).
    monkeypatch.setattr(vineyard.client, "_ONE_CALL_BYTES", 1 << 20)
    calls = []
    real = _ffi.call

    def counting(name, *args):
        if name == "v6d_pretouch":
            calls.append(args[1])
        return real(name, *args)

    monkeypatch.setattr(_ffi, "call", counting)
    a = np.asarray(np.arange(3 << 20, dtype=np.int64).reshape(-1, 1024), order=order)  # 24 MiB
    got = client.get(client.put(a))
    np.testing.assert_array_equal(got, a)
    assert sum(calls) == a.nbytes and all(n >= batch._PRETOUCH_BYTES for n in calls)
