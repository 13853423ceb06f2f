"""Dask on vineyard, in upstream's shape (``vineyard.contrib.dask.dask``).

Every Dask worker talks to the daemon of its machine (``VINEYARD_IPC_SOCKET``
in its environment, or :func:`bind_workers`); the daemons form one cluster
(``--meta etcd``, docs/cluster.md).

- **Put.** Inside :func:`dask_context`, ``client.put(collection,
  dask_scheduler=address)`` (or ``dask_client=``) of a dask DataFrame or
  Array runs one task per partition: each puts its partition into the daemon
  of the worker that computed it (no bytes cross the network) and persists
  it; then the client makes a persisted ``vineyard::GlobalDataFrame`` /
  ``vineyard::GlobalTensor`` of them and returns its id.
- **Get.** ``client.get(global_id, dask_scheduler=address)`` returns a dask
  collection whose partitions are read by tasks placed on a worker whose
  daemon holds them (worker restrictions), zero-copy: they are views of
  that daemon's shared memory, held in the worker's memory as the
  collection's futures. A partition whose instance has no worker is read on
  worker ``i mod n`` of the others, which migrates it to its daemon once
  (the daemon keeps the copy: later gets reuse it).

Which worker serves which instance is asked of the workers
(:func:`worker_instances`); upstream's ``dask_workers={instance_id:
worker_name}`` is accepted instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ...core import builder_context, resolver_context
from ...data.global_objects import make_global_dataframe, make_global_tensor

__all__ = [
    "bind_workers", "dask_array_builder", "dask_array_resolver", "dask_context", "dask_dataframe_builder",
    "dask_dataframe_resolver", "register_dask_types", "worker_instances",
]

# -- on the workers -----------------------------------------------------------

_local = threading.Lock()
_clients: dict[tuple[int, str], Any] = {}


def _worker_client() -> Any:
    """This worker process's client of its daemon (VINEYARD_IPC_SOCKET),
    made once per process and socket."""
    import vineyard

    socket = os.environ.get("VINEYARD_IPC_SOCKET", "")
    if not socket:
        raise RuntimeError("vineyard.contrib.dask: this Dask worker has no daemon: start it with "
                           "VINEYARD_IPC_SOCKET set, or call bind_workers()")
    key = (os.getpid(), socket)
    with _local:
        client = _clients.get(key)
        if client is None or not client.connected:
            client = _clients[key] = vineyard.connect(socket)
        return client


def _bind(socket: str) -> int:
    os.environ["VINEYARD_IPC_SOCKET"] = socket
    return int(_worker_client().instance_id)


def _instance() -> int | None:
    try:
        return int(_worker_client().instance_id)
    except RuntimeError:
        return None


def _put_partition(value: Any, partition_index: Sequence[int]) -> tuple[int, int]:
    client = _worker_client()
    oid = client.put(value, partition_index=list(partition_index))
    client.persist(oid)
    return int(client.instance_id), int(oid)


def _get_partition(oid: int, fetch: bool) -> Any:
    """A partition as a view of this worker's daemon (migrated there first
    with ``fetch``: the daemon reuses a copy it made before)."""
    return _worker_client().get(oid, fetch=fetch)


# -- on the client ------------------------------------------------------------

_dask_clients: dict[str, Any] = {}


def _dask_client(kw: Mapping[str, Any]) -> Any:
    """The distributed.Client of ``dask_client=``, else one connected to
    ``dask_scheduler=`` (kept for later calls), else the default one."""
    import distributed

    client = kw.get("dask_client")
    if client is not None:
        return client
    address = kw.get("dask_scheduler")
    if address is None:
        return distributed.get_client()
    address = str(address)
    client = _dask_clients.get(address)
    if client is None or client.status != "running":
        client = _dask_clients[address] = distributed.Client(address, set_as_default=False)
    return client


def bind_workers(dask_client: Any, sockets: Mapping[str, str]) -> dict[str, int]:
    """Binds Dask workers to daemons: ``sockets`` maps a worker's address
    (or name) to the UNIX socket of the daemon it should use, for workers
    that were not started with ``VINEYARD_IPC_SOCKET`` (a LocalCluster's all
    get the parent's environment). Returns each worker's instance id. A
    restarted worker forgets it."""
    out: dict[str, int] = {}
    for worker, socket in sockets.items():
        out.update(dask_client.run(_bind, socket, workers=[worker]))
    return out


def worker_instances(dask_client: Any) -> dict[str, int]:
    """The instance id of each worker's daemon, by worker address (workers
    without a daemon are left out)."""
    return {w: iid for w, iid in dask_client.run(_instance).items() if iid is not None}


def _workers_by_instance(dask_client: Any, kw: Mapping[str, Any]) -> dict[int, list[str]]:
    given = kw.get("dask_workers")
    if given is not None:  # upstream's {instance_id: worker name}
        return {int(i): [w] if isinstance(w, str) else list(w) for i, w in given.items()}
    out: dict[int, list[str]] = {}
    for worker, iid in sorted(worker_instances(dask_client).items()):
        out.setdefault(iid, []).append(worker)
    return out


def _read_partitions(dask_client: Any, members: list[Any], kw: Mapping[str, Any]) -> list[Any]:
    """A future per partition, each read on a worker of its instance, else
    (migrated once) on worker ``i mod n`` of all."""
    by_instance = _workers_by_instance(dask_client, kw)
    everyone = sorted(w for ws in by_instance.values() for w in ws)
    if not everyone:
        raise RuntimeError("vineyard.contrib.dask: no Dask worker has a vineyard daemon (start workers with "
                           "VINEYARD_IPC_SOCKET set, or call bind_workers())")
    futures = []
    for i, member in enumerate(members):
        here = by_instance.get(int(member.instance_id))
        if here:
            fut = dask_client.submit(_get_partition, int(member.id), False, workers=here, pure=False)
        else:
            fut = dask_client.submit(_get_partition, int(member.id), True, workers=[everyone[i % len(everyone)]],
                                     allow_other_workers=True, pure=False)
        futures.append(fut)
    return futures


def _members(meta: Any) -> list[Any]:
    return [meta.member(f"partitions_-{i}") for i in range(int(meta["partitions_-size"]))]


# -- builders and resolvers (upstream's signatures) ---------------------------

def dask_dataframe_builder(client: Any, value: Any, builder: Any = None, **kw: Any) -> Any:
    """Puts a dask DataFrame: each partition into the daemon of the worker
    that computes it, then a GlobalDataFrame of them (see the module doc)."""
    import dask

    dask_client = _dask_client(kw)
    parts = value.to_delayed()
    tasks = [dask.delayed(_put_partition, pure=False)(part, (i, 0)) for i, part in enumerate(parts)]
    placed = dask_client.gather(dask_client.compute(tasks))
    extra = {"dask_columns_": json.dumps([str(c) for c in value.columns])}
    return make_global_dataframe(client, [oid for _, oid in placed], extra).id


def dask_array_builder(client: Any, value: Any, builder: Any = None, **kw: Any) -> Any:
    """Puts a dask Array: each block into the daemon of the worker that
    computes it (with its ``partition_index_``), then a GlobalTensor."""
    import dask
    import numpy as np

    dask_client = _dask_client(kw)
    blocks = value.to_delayed()
    indices = list(np.ndindex(*blocks.shape))
    tasks = [dask.delayed(_put_partition, pure=False)(blocks[idx], idx) for idx in indices]
    placed = dask_client.gather(dask_client.compute(tasks))
    extra = {"shape_": json.dumps(list(value.shape)), "dtype_": value.dtype.str,
             "partition_shape_": json.dumps(list(blocks.shape))}
    return make_global_tensor(client, [oid for _, oid in placed], extra).id


def dask_dataframe_resolver(obj: Any, resolver: Any = None, **kw: Any) -> Any:
    """A dask DataFrame over a GlobalDataFrame's partitions, in partition
    order (``row_batch_index_``/``partition_index_row_`` when they all have
    them), each a future read where its daemon is (see the module doc)."""
    import dask.dataframe as dd

    dask_client = _dask_client(kw)
    members = _members(obj.meta)
    order = list(range(len(members)))
    if members and all("partition_index_row_" in m for m in members):
        order.sort(key=lambda i: (int(members[i]["partition_index_row_"]),
                                  int(members[i].get("row_batch_index_", 0))))
    members = [members[i] for i in order]
    futures = _read_partitions(dask_client, members, kw)
    meta = dask_client.submit(_empty_like, futures[0], workers=None, pure=False).result() if futures else None
    return dd.from_delayed(futures, meta=meta, verify_meta=False)


def _empty_like(df: Any) -> Any:
    return df.iloc[:0].copy()


def dask_array_resolver(obj: Any, resolver: Any = None, **kw: Any) -> Any:
    """A dask Array over a GlobalTensor's blocks, placed by their
    ``partition_index_`` when every block has one (else stacked in order, as
    upstream), each a future read where its daemon is."""
    import dask
    import dask.array as da
    import numpy as np

    dask_client = _dask_client(kw)
    members = _members(obj.meta)
    futures = _read_partitions(dask_client, members, kw)
    arrays = [da.from_delayed(dask.delayed(f), shape=tuple(json.loads(m["shape_"])),
                              dtype=np.dtype(m["value_type_meta_"]))
              for f, m in zip(futures, members)]
    indices = [tuple(json.loads(m.get("partition_index_", "[]") or "[]")) for m in members]
    if not arrays:
        raise ValueError("vineyard.contrib.dask: the global tensor has no partitions")
    if all(indices) and len({len(ix) for ix in indices}) == 1:
        grid = np.empty([max(ix[d] for ix in indices) + 1 for d in range(len(indices[0]))], dtype=object)
        for ix, arr in zip(indices, arrays):
            grid[ix] = arr
        if any(cell is None for cell in grid.flat):
            raise ValueError("vineyard.contrib.dask: the partition indices of the global tensor leave holes")
        return da.block(grid.tolist())
    return da.concatenate(arrays, axis=0)


def register_dask_types(builder_ctx: Any = None, resolver_ctx: Any = None) -> None:
    """Registers the builders (dask Array, DataFrame) and the resolvers
    (``vineyard::GlobalTensor``, ``vineyard::GlobalDataFrame``) on the
    given contexts of :mod:`vineyard.core`."""
    import dask.array as da
    import dask.dataframe as dd

    if builder_ctx is not None:
        builder_ctx.register(da.Array, dask_array_builder)
        builder_ctx.register(dd.DataFrame, dask_dataframe_builder)
    if resolver_ctx is not None:
        resolver_ctx.register("vineyard::GlobalTensor", dask_array_resolver)
        resolver_ctx.register("vineyard::GlobalDataFrame", dask_dataframe_resolver)


@contextlib.contextmanager
def dask_context() -> Iterator[tuple[Any, Any]]:
    """A ``with`` block in which puts of dask collections and gets of global
    tensors and DataFrames go through Dask (upstream's ``dask_context``)."""
    with builder_context() as builder_ctx, resolver_context() as resolver_ctx:
        register_dask_types(builder_ctx, resolver_ctx)
        yield builder_ctx, resolver_ctx
