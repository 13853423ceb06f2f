"""The module layout upstream's users import (vineyard.core, vineyard.data.*,
vineyard.deploy.local, vineyard._C, Client.fork), as layers over ours.
Upstream's own tests of them run in make test-upstream-suite."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
import vineyard


def test_fork_is_a_new_connection_to_the_same_daemon(client):
    other = client.fork()
    try:
        assert other is not client
        assert other._handle() != client._handle()
        assert other.instance_id == client.instance_id
        assert other.timeout == client.timeout
        oid = client.put(np.arange(10))
        got: list = []
        t = threading.Thread(target=lambda: got.append(other.get(oid).sum()))
        t.start()
        t.join()
        assert got == [45]
        client.close()
        assert other.get(oid).sum() == 45  # the fork lives on its own
    finally:
        other.close()


def test_resolver_context_scopes_a_resolver(client):
    from vineyard.core import resolver_context
    from vineyard.core.resolver import resolver_context as same

    assert same is resolver_context
    oid = client.put((1, 2, 3))
    seen = []

    def fake(obj, resolver):
        seen.append((obj.typename, obj.id))
        return "faked"

    with resolver_context({"vineyard::Sequence": fake}):
        assert client.get(oid) == "faked"
        with resolver_context() as ctx:
            ctx.register("vineyard::Sequence", lambda obj, resolver: "inner")
            assert client.get(oid) == "inner"
        assert client.get(oid) == "faked"
    assert client.get(oid) == (1, 2, 3)
    assert seen == [("vineyard::Sequence", oid)] * 2


def test_resolver_gets_members_through_its_context(client):
    from vineyard.core import resolver_context

    oid = client.put((1, "two"))

    def firsts(obj, resolver):
        return resolver.run(obj.member("__elements_-0"))

    with resolver_context({"vineyard::Sequence": firsts}):
        assert client.get(oid) == 1


class Point:  # pickled by reference: module level
    def __init__(self, x):
        self.x = x


def test_builder_context_scopes_a_builder(client):
    from vineyard.core import builder_context, default_builder_context

    def build_point(c, value, builder, **kw):
        assert builder is not None
        return c.put(value.x * 10)

    with builder_context({Point: build_point}):
        oid = client.put(Point(4))
    assert client.get(oid) == 40
    assert client.get(client.put(Point(5))).x == 5  # pickled again outside the block
    default_builder_context.register(Point, build_point)
    try:
        assert client.get(client.put(Point(6))) == 60
    finally:
        from vineyard.data import registry

        registry._builders.pop(Point)
        registry._by_type.clear()


def test_register_builtin_types_is_accepted():
    from vineyard.core import default_builder_context, default_resolver_context
    from vineyard.data import register_builtin_types

    register_builtin_types(default_builder_context, default_resolver_context)


@pytest.mark.parametrize("value", [b"x" * 10, memoryview(b"abc"), {"a": np.ones(3)}, list(range(1000))])
def test_pickled_reader_and_writer_round_trip(value):
    from vineyard.data.pickle import PickledReader, PickledWriter

    reader = PickledReader(value)
    writer = PickledWriter(reader.store_size)
    while block := reader.read(7):
        writer.write(block)
    assert writer.value is None
    writer.close()
    got = writer.value
    if isinstance(value, dict):
        np.testing.assert_array_equal(got["a"], value["a"])
    else:
        assert got == value


def test_pickled_writer_refuses_short_and_long_input():
    from vineyard.data.pickle import PickledReader, PickledWriter

    reader = PickledReader(123)
    writer = PickledWriter(reader.store_size)
    with pytest.raises(ValueError, match="announced"):
        writer.close()
    with pytest.raises(ValueError, match="announced"):
        writer.write(b"x" * (reader.store_size + 1))


def test_ndarray_array_column_round_trips(client):
    pd = pytest.importorskip("pandas")
    from vineyard.data.dataframe import NDArrayArray

    rows = np.arange(60, dtype=float).reshape(20, 3)
    df = pd.DataFrame({"data": NDArrayArray(rows), "label": np.arange(20)})
    assert df.shape == (20, 2)
    got = client.get(client.put(df))
    assert got.shape == df.shape
    np.testing.assert_array_equal(np.asarray(got["data"].array.values), rows)
    np.testing.assert_array_equal(got["label"], np.arange(20))


def test_c_module_names():
    from vineyard import _C

    assert _C.ObjectMeta is vineyard.ObjectMeta
    assert _C.ObjectID is vineyard.ObjectID
    assert _C.IPCClient is vineyard.Client and _C.RPCClient is vineyard.Client
    meta = _C.ObjectMeta()
    meta["typename"] = "vineyard::Pair"
    assert meta.typename == "vineyard::Pair"


def test_deploy_local_try_init_and_shutdown(monkeypatch):
    from vineyard.deploy import local

    monkeypatch.delenv("VINEYARD_IPC_SOCKET", raising=False)
    socket = local.try_init()
    try:
        assert os.environ["VINEYARD_IPC_SOCKET"] == socket == local.get_current_socket()
        with pytest.raises(ValueError, match="already set"):
            local.try_init()
        c = vineyard.connect()
        assert c.get(c.put(1024)) == 1024
        c.close()
    finally:
        local.shutdown()
    assert "VINEYARD_IPC_SOCKET" not in os.environ
    with pytest.raises(ValueError, match="try_init"):
        local.get_current_socket()
    assert not os.path.exists(socket)


def test_scoped_resolver_applies_to_a_get_that_has_a_plan(client):
    # A tensor got once has a plan (the hot path); a scoped resolver must
    # still be asked while its block runs, and the plan serve again after.
    from vineyard.core import resolver_context

    oid = client.put(np.arange(5))
    assert client.get(oid).sum() == 10
    assert client.get(oid).sum() == 10
    with resolver_context({"vineyard::Tensor": lambda obj, resolver: "scoped"}):
        assert client.get(oid) == "scoped"
    assert client.get(oid).sum() == 10


def test_put_and_get_take_upstreams_positions(client):
    from vineyard.core import builder_context, default_builder_context, resolver_context

    with builder_context({Point: lambda c, value, builder, **kw: c.put(value.x + 1)}) as b:
        pass
    oid = client.put(Point(1), b)  # put(value, builder, persist, name)
    assert client.get(oid) == 2
    named = client.put(7, default_builder_context, True, "upstream-positions")
    assert client.get(None, "upstream-positions") == 7 and client.get_name("upstream-positions") == named
    with resolver_context() as r:
        r.register("vineyard::Scalar", lambda obj, resolver: "by position")
    assert client.get(named, None, r) == "by position"  # get(object_id, name, resolver, fetch)
    assert client.get(named) == 7
    with pytest.raises(TypeError, match="vineyard.core"):
        client.put(1, True)
    with pytest.raises(TypeError, match="vineyard.core"):
        client.get(named, None, True)


def test_connect_with_nothing_set_starts_a_local_daemon(monkeypatch):
    from vineyard.deploy import local

    monkeypatch.delenv("VINEYARD_IPC_SOCKET", raising=False)
    monkeypatch.delenv("VINEYARD_RPC_ENDPOINT", raising=False)
    c = vineyard.connect()
    try:
        socket = os.environ["VINEYARD_IPC_SOCKET"]
        assert socket == local.get_current_socket() == c.ipc_socket
        c2 = vineyard.connect()  # the same daemon, not a second one
        assert c2.instance_id == c.instance_id and c2.get(c.put(1024)) == 1024
        c2.close()
    finally:
        c.close()
        local.shutdown()
    assert not os.path.exists(socket)


def test_islocal_names_the_instance_of_the_client(client):
    oid = client.put((1, 2))
    meta = client.get_meta(oid)
    assert meta.islocal and meta.member("__elements_-0").islocal and meta["__elements_-1"].islocal
    assert all(m.islocal for m in client.list_metadatas("vineyard::Sequence", limit=0))
    other = vineyard.ObjectMeta(meta._tree)
    other._here = client.instance_id + 1  # as if another instance's client returned it
    assert not other.islocal and not other.member("__elements_-0").islocal
    assert vineyard.ObjectMeta().islocal  # a tree being built


def test_seal_returns_the_blob_which_stands_for_its_id(client):
    # upstream's BlobBuilder.seal returns the Blob; ours is taken wherever an id is
    b = client.create_blob(5)
    b.copy(0, b"hello")
    blob = b.seal(client)
    assert isinstance(blob, vineyard.Blob) and blob.id.is_blob and blob.size == 5 and bytes(blob) == b"hello"
    assert vineyard.ObjectID(blob) == blob.id and client.get_blob(blob).id == blob.id
    assert bytes(client.get(blob)) == b"hello" and client.exists(blob)
    assert blob.typename == "vineyard::Blob" and not blob.is_empty and blob.buffer.readonly
    assert vineyard.Blob.empty().is_empty and vineyard.Blob.empty().id == 1 << 63
    assert vineyard.IPCClient is vineyard.RPCClient is vineyard.Client
    from vineyard import default_builder_context, register_builtin_types  # upstream's top-level names

    register_builtin_types(default_builder_context, vineyard.default_resolver_context)


def test_a_put_of_a_got_column_reuses_its_blob(client):
    # upstream's test_dataframe_reusing: the bytes of a got object put again
    # are its blob, not a copy; the blob outlives the first object's delete
    import pandas as pd

    ones = np.ones(1000)
    first = client.put(pd.DataFrame({"x": ones}))
    frame = pd.DataFrame(client.get(first))
    frame["y"] = ones * 2
    second = client.put(frame)
    blob = client.get_meta(first)["__values_-value-0"]["buffer_"].id
    assert client.get_meta(second)["__values_-value-0"]["buffer_"].id == blob
    del frame
    client.delete(first)
    got = client.get(second)
    assert (got["x"] == 1).all() and (got["y"] == 2).all() and client.exists(blob)


def test_objectmeta_and_object_members_upstream_reaches(client):
    oid = client.put(np.arange(1000, dtype=np.int64))
    client.label(oid, "team", "a")
    meta = client.get_meta(oid)
    assert meta.get_member("buffer_").id == meta.member("buffer_").id
    assert meta.memory_usage == 8000
    details = meta.memory_usage_details(pretty=False)
    assert details["memory_usage"] == 8000
    assert meta.memory_usage_details()["memory_usage"] == "7.8 KiB"
    assert meta.labels == {"team": "a"} and meta.label("team") == "a" and meta.label("other") is None
    obj = client.get_object(oid)
    assert obj.islocal and not obj.isglobal and not obj.ispersist
    client.persist(oid)
    assert client.get_object(oid).ispersist
    fresh = vineyard.ObjectMeta({"typename": "t", "signature": 7, "k": 1})
    fresh.reset_signature()
    fresh.reset_key("k")
    assert "signature" not in fresh and "k" not in fresh and isinstance(fresh.timestamp, int)


def test_a_global_object_is_not_local(client):
    # upstream's test_migration_and_deletion: a global object's metadata is never local
    part = client.put(np.arange(4))
    client.persist(part)
    glob = client.put([part], global_=True)
    meta = client.get_meta(glob)
    assert meta.isglobal and not meta.islocal
    assert client.get_meta(part).islocal
