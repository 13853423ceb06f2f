"""Gets through v6d_get_object_into: the tree and the blobs' views land in
per-thread memory of the package, which grows when a tree does not fit."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest
import vineyard
from vineyard import _ffi, _session
from vineyard._session import Session


def test_resolvers_use_the_views_the_get_returned(client, monkeypatch):
    oid = client.put(np.arange(1000, dtype=np.int64))
    blob = client.put(b"some bytes")

    def no_lookup(self, blob_id):
        raise AssertionError(f"blob_pointer({blob_id:#x}) called: the get returned the view")

    monkeypatch.setattr(Session, "blob_pointer", no_lookup)
    np.testing.assert_array_equal(client.get(oid), np.arange(1000, dtype=np.int64))
    assert bytes(client.get(blob)) == b"some bytes"


def test_a_tree_larger_than_the_room_is_got_again(vineyard_socket):
    # A fresh thread starts with the default room (4 KiB of tree, 16 blobs):
    # 200 arrays need more of both; the first get is released and made again.
    out: list = []

    def run() -> None:
        with vineyard.connect(vineyard_socket) as c:
            values = [np.full(3, i, dtype=np.int32) for i in range(200)]
            oid = c.put(values)
            got = c.get(oid)
            out.append(all(np.array_equal(a, b) for a, b in zip(got, values)) and len(got) == 200)
            out.append(_session._room().cap > 4096 and _session._room().blobs >= 200)
            del got
            out.append(int(c.get(c.put(np.int64(7)))))
            # Nothing stays pinned: the delete frees the blobs at once.
            c.delete([oid])
            with pytest.raises(vineyard.ObjectNotExistsException):
                c.get(oid)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert out == [True, True, 7]


def test_failed_gets_leave_the_room_usable(client):
    for _ in range(3):
        with pytest.raises(vineyard.ObjectNotExistsException, match="o0000000000003039"):
            client.get(vineyard.ObjectID(12345))
    assert client.get(client.put(np.arange(3))).tolist() == [0, 1, 2]


def test_gets_from_many_threads(client):
    ids = [client.put(np.full(100, i, dtype=np.int64)) for i in range(8)]
    bad: list = []

    def run(k: int) -> None:
        for _ in range(200):
            for i, oid in enumerate(ids):
                v = client.get(oid)
                if v.shape != (100,) or int(v[0]) != i or int(v[-1]) != i:
                    bad.append((k, i))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_the_untyped_get_path_leaves_the_declared_functions_typed(client):
    from vineyard import _ffi

    np.testing.assert_array_equal(client.get(client.put(np.arange(3))), np.arange(3))
    for name in ("v6d_get_object_into", "v6d_release"):
        assert _ffi.untyped(name) is not _ffi.function(name)
        assert _ffi.untyped(name).argtypes is None
        assert _ffi.function(name).argtypes, f"{name} lost its declared argument types"
    # A typed call still converts (and checks) its arguments.
    with pytest.raises(ctypes.ArgumentError):
        _ffi.function("v6d_release")(client._session.handle(), "not an id", None)


def test_get_args_of_null_fail_and_hold_nothing(client):
    oid = client.put(np.arange(3))
    fn = _ffi.untyped("v6d_get_object_args")
    assert fn(client._session.conn.c_handle, None) == vineyard.errors.Status.INVALID
    with pytest.raises(vineyard.errors.ObjectNotExistsException):  # nothing is held
        _ffi.call("v6d_release", client._session.handle(), int(oid))
