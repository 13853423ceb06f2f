"""vineyard.contrib.dask across daemons: a dask.distributed.LocalCluster of
two workers bound to daemons a and b of one etcd cluster (c has no worker).
Results are compared with pandas' and NumPy's; placement is asked of the
workers that ran the tasks."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

distributed = pytest.importorskip("distributed")
import cloudpickle
import dask
import dask.array as da
import dask.dataframe as dd
from cluster_helpers import Cluster
from vineyard.contrib.dask import bind_workers, dask_context, worker_instances
from vineyard.contrib.dask import dask as dask_module
from vineyard.contrib.dask.dask import _worker_client
from vineyard.data.global_objects import make_global_dataframe, make_global_tensor

# The workers cannot import this file: ship its functions by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def dask_cluster(cluster: Cluster) -> Iterator[tuple[Any, dict[int, str]]]:
    """(dask client, {instance id: worker address}) with worker 0 on daemon a,
    worker 1 on daemon b. Work stealing is off, so that a task on a
    partition runs on the worker holding it (the tests ask that worker)."""
    with dask.config.set({"distributed.scheduler.work-stealing": False}), distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  host="127.0.0.1") as lc, distributed.Client(lc) as dc:
        workers = sorted(dc.scheduler_info()["workers"])
        got = bind_workers(dc, {workers[0]: cluster.a.socket, workers[1]: cluster.b.socket})
        assert worker_instances(dc) == got
        yield dc, {iid: w for w, iid in got.items()}
        for kept in dask_module._dask_clients.values():  # those dask_scheduler= made
            kept.close()


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x": np.arange(n, dtype="int64") + seed * 1000, "y": rng.random(n),
                         "k": rng.integers(0, 5, n)})


def _where(df: pd.DataFrame) -> pd.DataFrame:
    """Runs on the worker that holds df: its daemon, and whether df's
    columns are views of that daemon's memory."""
    client = _worker_client()
    return pd.DataFrame({"instance": [int(client.instance_id)], "rows": [len(df)],
                         "zero_copy": [bool(client.is_shared_memory(df["x"].to_numpy()))
                                       and bool(client.is_shared_memory(df["y"].to_numpy()))]})


def _copies(cluster: Cluster, signature: int, owner: int) -> set[int]:
    """Ids of the copies of an object (same signature, another instance) that
    daemons a and b hold."""
    out = set()
    for d in (cluster.a, cluster.b):
        with d.connect() as c:
            for meta in c.list_metadatas("vineyard::DataFrame*", limit=0):
                if meta.signature == signature and meta.instance_id != owner:
                    out.add(int(meta.id))
    return out


def test_dataframe_put_and_get_across_daemons(cluster, dask_cluster):
    dc, worker_of = dask_cluster
    pdf = pd.concat([_frame(500, i) for i in range(4)], ignore_index=True)
    ddf = dd.from_pandas(pdf, npartitions=4)
    a = cluster.a.connect()
    with dask_context():
        gid = a.put(ddf, dask_client=dc)
        meta = a.get_meta(gid)
        assert meta.typename == "vineyard::GlobalDataFrame" and meta["partitions_-size"] == 4
        # Each partition went to the daemon of a worker (a or b), none elsewhere.
        assert {meta.member(f"partitions_-{i}").instance_id for i in range(4)} <= set(worker_of)
        got = cluster.b.connect().get(gid, dask_client=dc)
    assert got.npartitions == 4
    pd.testing.assert_frame_equal(got.compute().reset_index(drop=True), pdf)
    pd.testing.assert_series_equal(got.groupby("k")["y"].sum().compute().sort_index(),
                                  pdf.groupby("k")["y"].sum())
    # Each partition was read on a worker whose daemon holds it, as a view.
    where = got.map_partitions(_where, meta={"instance": "int64", "rows": "int64", "zero_copy": "bool"}).compute()
    owners = [meta.member(f"partitions_-{i}").instance_id for i in range(4)]  # in partition order
    assert list(where["instance"]) == owners
    assert where["zero_copy"].all() and where["rows"].sum() == len(pdf)


def test_partition_without_a_worker_migrates_once(cluster, dask_cluster):
    dc, worker_of = dask_cluster
    a, c = cluster.a.connect(), cluster.c.connect()
    parts = [_frame(300, 10 + i) for i in range(3)]
    ids = []
    for i, (daemon, part) in enumerate(zip((a, cluster.b.connect(), c), parts)):
        oid = daemon.put(part, partition_index=[i, 0])
        daemon.persist(oid)
        ids.append(oid)
    gid = make_global_dataframe(a, ids).id
    on_c = c.get_meta(ids[2])
    want = pd.concat(parts, ignore_index=True)
    with dask_context():
        for _ in range(2):  # the second get reuses the copy the first made
            got = a.get(gid, dask_client=dc)
            pd.testing.assert_frame_equal(got.compute().reset_index(drop=True), want)
            assert len(_copies(cluster, on_c.signature, c.instance_id)) == 1
            where = got.map_partitions(_where, meta={"instance": "int64", "rows": "int64",
                                                     "zero_copy": "bool"}).compute()
            assert set(where["instance"]) <= set(worker_of) and where["zero_copy"].all()


def test_array_put_and_get_across_daemons(cluster, dask_cluster):
    dc, _ = dask_cluster
    x = np.arange(40 * 30, dtype="float64").reshape(40, 30)
    darr = da.from_array(x, chunks=(20, 15))
    a = cluster.a.connect()
    with dask_context():
        gid = a.put(darr, dask_client=dc)
        meta = a.get_meta(gid)
        assert meta.typename == "vineyard::GlobalTensor" and meta["partitions_-size"] == 4
        got = cluster.b.connect().get(gid, dask_client=dc)
    assert got.shape == x.shape and got.chunks == darr.chunks
    np.testing.assert_array_equal(got.compute(), x)
    assert float(got.sum().compute()) == float(x.sum())


def test_upstream_style_resolvers(cluster, dask_cluster):
    """upstream's test_dask_array_resolver and test_dask_dataframe_resolver,
    with dask_workers given as upstream does."""
    dc, worker_of = dask_cluster
    clients = [cluster.a.connect(), cluster.b.connect()]
    n = len(clients)
    chunks = []
    for i in range(n):
        for j in range(n):
            owner = clients[(i + j) % n]
            chunk = owner.put(np.array([i - j] * 8), partition_index=[i, j])
            owner.persist(chunk)
            chunks.append(chunk)
    frames = []
    for i, owner in enumerate(clients):
        chunk = owner.put(pd.DataFrame({"x": [i, i * 2], "y": [i * 3, i * 4]}))
        owner.persist(chunk)
        frames.append(chunk)
    with dask_context():
        darr = clients[0].get(make_global_tensor(clients[0], chunks).id, dask_workers=worker_of, dask_client=dc)
        ddf = clients[0].get(make_global_dataframe(clients[0], frames).id, dask_workers=worker_of, dask_client=dc)
    assert darr.shape == (2, 16) and darr.sum().compute() == 0
    assert ddf.sum().sum().compute() == 10  # upstream's 60 is for its fixture's more daemons


def test_no_worker_with_a_daemon_is_refused(cluster, dask_cluster):
    dc, _ = dask_cluster
    a = cluster.a.connect()
    gid = make_global_dataframe(a, [a.put(_frame(3, 0), persist=True)]).id
    with dask_context(), pytest.raises(RuntimeError, match="no Dask worker has a vineyard daemon"):
        a.get(gid, dask_client=dc, dask_workers={})


def test_dask_scheduler_keyword(cluster, dask_cluster):
    """upstream's keyword: the scheduler's address instead of a client."""
    dc, _ = dask_cluster
    address = dc.scheduler.address
    pdf = _frame(64, 3)
    a = cluster.a.connect()
    with dask_context():
        gid = a.put(dd.from_pandas(pdf, npartitions=2), dask_scheduler=address)
        got = a.get(gid, dask_scheduler=address)
    pd.testing.assert_frame_equal(got.compute().reset_index(drop=True), pdf)
