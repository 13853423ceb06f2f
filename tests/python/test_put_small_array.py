"""The small-array put (Client._put_small_array): the same stored tree and
value as the builders make, one round trip (none when pipelined), also for
medium arrays up to client._ONE_CALL_BYTES, and registered builders still
take precedence."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import vineyard
from vineyard import data
from vineyard.data import registry

_VOLATILE = {"id", "instance_id", "signature", "transient", "global", "__name", "buffer_"}


def _stable(tree: Any) -> dict[str, Any]:
    return {k: v for k, v in tree.items() if k not in _VOLATILE}


ARRAYS = [
    np.arange(1, dtype=np.uint8),
    np.arange(1024, dtype=np.uint8),
    np.arange(12, dtype=np.float64).reshape(3, 4),
    np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4)),
    np.array(7, dtype=np.int64),  # 0-d
    np.arange(6, dtype=np.complex64),
    np.array(["a", "bc"]),
    np.zeros(3, dtype=[("x", "<i4"), ("y", "<f8")]),
    np.arange(8192, dtype=np.int64),  # 64 KiB: the inline limit
    np.arange(0, 3, dtype="M8[ns]"),  # no buffer protocol: its address from arr.ctypes
    np.frombuffer(b"12345678", dtype=np.uint8),  # read-only
    np.arange(20, dtype=np.int16)[5:9],  # a view starting inside its base
    np.arange(1 << 17, dtype=np.int64),  # 1 MiB: medium, one call
    np.arange(3 << 20, dtype=np.float64).reshape(-1, 1024),  # 24 MiB: filled by several goroutines
]


@pytest.mark.parametrize("arr", ARRAYS, ids=lambda a: f"{a.dtype}{a.shape}")
def test_same_tree_and_value_as_the_builder(client, arr):
    fast = client.put(arr)
    slow = data.build(client._session, arr)
    assert _stable(client.get_meta(fast)) == _stable(client.get_meta(slow))
    got, want = client.get(fast), client.get(slow)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes(order="A") == want.tobytes(order="A") == arr.tobytes(order="A")
    assert got.flags.f_contiguous == want.flags.f_contiguous == arr.flags.f_contiguous
    # Stored by value: a later change of the array does not reach it.
    if arr.flags.writeable and arr.size and arr.dtype.kind in "iuf":
        arr = arr.copy()
        oid = client.put(arr)
        arr.flat[0] += 1
        assert client.get(oid).flat[0] != arr.flat[0]


def test_small_arrays_skip_the_builders_others_take_them(client, monkeypatch):
    arr = np.arange(10, dtype=np.int64)
    client.put(arr)  # the builder lookup is known from here on
    taken = []
    real = data.build
    monkeypatch.setattr(data, "build", lambda *a, **kw: taken.append(a[1]) or real(*a, **kw))
    assert np.array_equal(client.get(client.put(arr)), arr)
    assert taken == []
    # Medium arrays too, in one call.
    for n in (1 << 14, 1 << 17, 2 << 20):  # 128 KiB, 1 MiB, 16 MiB
        medium = np.arange(n, dtype=np.int64)
        assert np.array_equal(client.get(client.put(medium)), medium)
    assert taken == []
    # Strided, large, empty and object arrays, subclasses and keywords take the builders.
    strided = np.arange(100, dtype=np.int16)[::3]
    big = np.arange((vineyard.client._ONE_CALL_BYTES >> 3) + 1, dtype=np.int64)
    empty = np.zeros(0, dtype=np.float32)
    objs = np.array([1, "a"], dtype=object)
    sub = np.arange(3).view(np.matrix)
    for value in (strided, big, empty, objs, sub):
        got = client.get(client.put(value))
        if value.dtype != object:
            assert np.array_equal(np.asarray(got), np.asarray(value))
    client.put(arr, some_builder_option=1)
    assert len(taken) == 6


def test_registered_builder_takes_precedence(client):
    arr = np.arange(16, dtype=np.uint8)
    client.put(arr)  # the tree text of this key is cached now
    calls = []

    def mine(session: Any, value: Any, **kw: Any) -> Any:
        calls.append(value)
        return data.tensor.build_numpy(session, value)

    registry.register_builder(np.ndarray, mine)
    try:
        client.put(arr)
        client.put(arr)
    finally:
        del registry._builders[np.ndarray]
        registry._by_type.clear()
    assert len(calls) == 2
    client.put(arr)
    assert len(calls) == 2


def test_closed_client(vineyard_socket):
    c = vineyard.connect(vineyard_socket)
    c.close()
    with pytest.raises(vineyard.VineyardException, match="closed"):
        c.put(np.arange(4, dtype=np.uint8))


def test_a_full_store_refuses_a_small_put_and_the_next_one_works():
    """The failure of a small put (its error out-parameter is the thread's,
    made once) raises, and leaves nothing behind for the next put."""
    from vineyard.deploy import start_vineyardd

    with start_vineyardd(size="2Mi") as sock, vineyard.connect(sock) as c:
        chunk = np.full(60 << 10, 1, dtype=np.uint8)  # small (inline), one blob each
        kept = []
        with pytest.raises(vineyard.NotEnoughMemoryException):
            for _ in range(64):
                kept.append(c.put(chunk))
        assert 0 < len(kept) < 64
        c.delete(kept)
        oid = c.put(np.arange(5, dtype=np.int16))
        assert c.get(oid).tolist() == [0, 1, 2, 3, 4]


def test_a_full_store_refuses_a_medium_put_and_the_next_one_works():
    """A medium put (one call, pipelined) that finds no memory raises at
    once, and the store takes the next one after a delete."""
    from vineyard.deploy import start_vineyardd

    with start_vineyardd(size="24Mi") as sock, vineyard.connect(sock) as c:
        chunk = np.full(3 << 20, 7, dtype=np.uint8)
        kept = []
        with pytest.raises(vineyard.NotEnoughMemoryException):
            for _ in range(16):
                kept.append(c.put(chunk))
        assert 0 < len(kept) < 16
        for oid in kept:
            assert np.array_equal(c.get(oid), chunk)
        c.delete(kept)
        oid = c.put(chunk)
        assert np.array_equal(c.get(oid), chunk)


def test_a_remote_client_puts_medium_arrays_in_one_call(monkeypatch):
    """Over TCP a medium array goes with its put's request, straight from the
    array (no local buffer, no builder); a local client reads it back."""
    import socket

    from vineyard.deploy import start_vineyardd

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with start_vineyardd(size="256Mi", args=["--rpc-socket-port", str(port)]) as sock, \
            vineyard.connect("127.0.0.1", port) as remote, vineyard.connect(sock) as local:
        small = np.arange(3, dtype=np.int32)
        remote.put(small)  # the builder lookup is known from here on
        taken = []
        real = data.build
        monkeypatch.setattr(data, "build", lambda *a, **kw: taken.append(a[1]) or real(*a, **kw))
        for n in (1 << 14, 1 << 17, 8 << 20):  # 128 KiB, 1 MiB, 64 MiB
            arr = np.arange(n, dtype=np.int64)
            oid = remote.put(arr)
            assert np.array_equal(local.get(oid), arr) and np.array_equal(remote.get(oid), arr)
        assert taken == []
