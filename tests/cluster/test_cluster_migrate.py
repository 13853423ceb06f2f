"""Migration between real daemons on a real etcd (docs/cluster-data-plane.md,
"Migration"): every kind of value Python stores, persisted on A, is got on B
with ``fetch=True`` and migrated on to C; the values are equal, every node
of the copy is new and the receiver's own, the signature is kept, and a
second migrate returns the same copy. Global objects fetch each member that
is not local. The faults (owner killed, connection cut, out of memory,
deleted meanwhile) are tested in Go against real daemons
(internal/server/migrate*_test.go)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import vineyard
from cluster_helpers import Cluster


class Point:
    """A class pickled with its arrays (module level, so it unpickles)."""

    def __init__(self, name: str, xy: np.ndarray) -> None:
        self.name, self.xy = name, xy


def nodes(meta: vineyard.ObjectMeta) -> Iterator[vineyard.ObjectMeta]:
    """The tree's nodes: meta and every member, depth first."""
    yield meta
    for key in meta:
        if isinstance(meta[key], vineyard.ObjectMeta):
            yield from nodes(meta[key])


def equal_numpy(got: Any, want: Any) -> None:
    assert isinstance(got, np.ndarray)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes(order="A") == want.tobytes(order="A")
    assert got.flags.f_contiguous == want.flags.f_contiguous
    np.testing.assert_array_equal(got, want)


def equal_arrow(got: Any, want: Any) -> None:
    assert type(got) is type(want)
    assert got.equals(want)


def equal_pandas(got: Any, want: Any) -> None:
    if isinstance(want, pd.DataFrame):
        pd.testing.assert_frame_equal(got, want)
    else:
        pd.testing.assert_series_equal(got, want)


def equal_bytes(got: Any, want: tuple[bytes]) -> None:
    assert len(got) == 1 and bytes(got[0]) == want[0]


def equal_point(got: Any, want: dict[str, Any]) -> None:
    assert got.keys() == want.keys()
    assert got["label"] == want["label"]
    np.testing.assert_array_equal(got["values"], want["values"])
    assert got["point"].name == want["point"].name
    np.testing.assert_array_equal(got["point"].xy, want["point"].xy)


def equal_plain(got: Any, want: Any) -> None:
    assert got == want


EMPTY_BLOB = vineyard.ObjectID(1 << 63)

rng = np.random.default_rng(12)

VALUES: dict[str, tuple[Any, Callable[[Any, Any], None]]] = {
    "float64 2-D": (rng.random((700, 300)), equal_numpy),
    "int32 F-order": (np.asfortranarray(np.arange(60_000, dtype=np.int32).reshape(200, 300)), equal_numpy),
    "uint8 3-D": (rng.integers(0, 255, (40, 50, 60), dtype=np.uint8), equal_numpy),
    "bool": (rng.random(10_001) > 0.5, equal_numpy),
    "complex128": (rng.random(5000) + 1j * rng.random(5000), equal_numpy),
    "float16": (rng.random(3333).astype(np.float16), equal_numpy),
    "datetime64": (np.arange(1000).astype("datetime64[ns]"), equal_numpy),
    "0-d": (np.array(3.25), equal_numpy),
    "empty": (np.zeros((0, 4), dtype=np.int64), equal_numpy),
    "float64 8 MiB": (rng.random(1 << 20), equal_numpy),
    "DataFrame": (
        pd.DataFrame(
            {
                "x": np.arange(2000, dtype=np.int64),
                "y": rng.random(2000),
                "s": [f"row {i}" for i in range(2000)],
                "b": rng.random(2000) > 0.3,
            },
            index=pd.Index([f"k{i}" for i in range(2000)], name="key"),
        ),
        equal_pandas,
    ),
    "Series": (pd.Series(rng.random(500), index=pd.RangeIndex(100, 600, name="pos"), name="val"), equal_pandas),
    "Arrow Array": (pa.array([1, None, 3, 4, None] * 1000, type=pa.int64()), equal_arrow),
    "Arrow string Array": (pa.array([f"s{i}" if i % 7 else None for i in range(3000)]), equal_arrow),
    "Arrow Table": (
        pa.table(
            {
                "a": pa.array(np.arange(4000)),
                "s": pa.array([str(i) * (i % 5) for i in range(4000)]),
                "f": pa.array(rng.random(4000)),
            }
        ),
        equal_arrow,
    ),
    "Arrow RecordBatch": (
        pa.record_batch([pa.array(np.arange(100, dtype=np.int16)), pa.array(["x"] * 100)], names=["i", "t"]),
        equal_arrow,
    ),
    "pickled": (
        {"label": "pickled", "values": rng.random(20_000), "point": Point("p", np.arange(10.0))},
        equal_point,
    ),
    # In a tuple: a bare blob cannot be persisted (upstream neither).
    "bytes": ((bytes(rng.integers(0, 255, 3 << 20, dtype=np.uint8)),), equal_bytes),
    "str": ("a string stored as a scalar", equal_plain),
    "int": (1 << 40, equal_plain),
}


@pytest.mark.parametrize("kind", list(VALUES))
def test_migrate_value(cluster: Cluster, kind: str) -> None:
    value, check = VALUES[kind]
    a, b, c = (d.connect() for d in (cluster.a, cluster.b, cluster.c))
    oid = a.put(value, persist=True)
    assert a.migrate(oid) == oid  # local: itself

    check(b.get(oid, fetch=True), value)
    copy = b.migrate(oid)
    assert copy != oid
    assert b.migrate(oid) == copy  # the copy made before
    origin, mine = a.get_meta(oid), b.get_meta(copy)
    assert mine.signature == origin.signature
    assert mine.typename == origin.typename
    origin_ids = {n.id for n in nodes(origin)}
    for n in nodes(mine):
        if n.id == EMPTY_BLOB:
            continue  # one shared empty blob per daemon
        assert n.id not in origin_ids, f"{n.typename} {n.id} was not copied"
        assert n.instance_id == b.instance_id
    check(b.get(copy), value)
    assert b.get_object(oid, fetch=True).id == copy

    # The copy is persisted (as upstream's): A sees it, and it migrates on to C.
    a.sync_meta()
    assert a.exists(copy) and not a.get_meta(copy).islocal
    check(c.get(copy, fetch=True), value)
    assert c.get_meta(c.migrate(copy)).instance_id == c.instance_id


def test_migrate_torch(cluster: Cluster) -> None:
    torch = pytest.importorskip("torch")
    a, b = cluster.a.connect(), cluster.b.connect()
    value = torch.arange(10_000, dtype=torch.float32).reshape(100, 100)
    got = b.get(a.put(value, persist=True), fetch=True)
    assert torch.equal(got, value)


def test_migrate_global_object(cluster: Cluster) -> None:
    """A global tensor on C of partitions on A and B: migrated to A, A's own
    partition stays a link and B's is fetched; to B, the other way round.
    On C, which holds the global object itself, migrate returns it as it is
    (docs/cluster-data-plane.md)."""
    a, b, c = (d.connect() for d in (cluster.a, cluster.b, cluster.c))
    want = [np.arange(100_000, dtype=np.int64), np.arange(50_000, dtype=np.float32) * 2]
    parts = [a.put(want[0], persist=True), b.put(want[1], persist=True)]
    g = c.put(parts, global_=True)
    assert c.migrate(g) == g

    for mine, client in enumerate((a, b)):
        copy = client.migrate(g)
        assert copy != g and client.migrate(g) == copy
        tree = client.get_meta(copy)
        assert tree.isglobal
        assert tree.signature == c.get_meta(g).signature
        members = [tree.member(f"partitions_-{i}") for i in range(2)]
        assert members[mine].id == parts[mine]  # local: linked as it is
        fetched = members[1 - mine]
        assert fetched.id != parts[1 - mine] and fetched.instance_id == client.instance_id
        # Every partition is local now: get returns both.
        got = client.get(copy)
        assert len(got) == 2
        for g_arr, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g_arr, w)
        np.testing.assert_array_equal(client.get(fetched.id), want[1 - mine])


def test_migrate_unknown_object(cluster: Cluster) -> None:
    b = cluster.b.connect()
    with pytest.raises(vineyard.ObjectNotExistsException):
        b.migrate(vineyard.ObjectID(0x1234))


def test_plain_get_of_another_instances_object_serves_it(cluster: Cluster) -> None:
    # Upstream's plain get (no fetch=True) of a blob-backed object persisted
    # on another instance returns it; ours migrates it, as fetch=True.
    a, b = cluster.a.connect(), cluster.b.connect()
    value = np.arange(1000, dtype=np.int64)
    oid = a.put(value, persist=True)
    np.testing.assert_array_equal(b.get(oid), value)
    with pytest.raises(vineyard.errors.ObjectNotExistsException):
        b.get(vineyard.ObjectID(5))  # unknown everywhere: still the error
    a.close()
    b.close()
