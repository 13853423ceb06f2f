"""Global objects (``vineyard::GlobalTensor``, ``vineyard::GlobalDataFrame``,
and any ``vineyard::Global*``): an object made of partitions that may live on
several instances of a cluster, as upstream's.

Getting one returns what upstream's resolvers return: the list of the
partitions stored on the instance this client is connected to, each resolved
as a normal get would (a NumPy array, a DataFrame...), in partition order.
The partitions of other instances are left out; their metadata is in the
global object's tree (``client.get_meta``), and a client of their instance
gets them there.

Make one with :func:`make_global_tensor`, :func:`make_global_dataframe`
(upstream's helpers), ``client.put([id, ...], global_=True)``, or
``client.create_metadata`` of an ``ObjectMeta(global_=True)``. The partitions
must be persisted (by any instance); the global object is persisted too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._types import ObjectID, ObjectMeta
from .registry import register_resolver


def _partitions(tree: dict[str, Any]) -> list[dict[str, Any]]:
    n = int(tree.get("partitions_-size", 0))
    out = []
    for i in range(n):
        member = tree.get(f"partitions_-{i}")
        if isinstance(member, dict):
            out.append(member)
    return out


def resolve_global(session: Any, tree: dict[str, Any], pin: Any) -> list[Any]:
    """The local partitions of a global object, each got with a normal get
    (the global object's own tree may come from another instance, which
    pinned none of this instance's blobs)."""
    client = session.client
    here = client.instance_id
    return [client.get(part["id"]) for part in _partitions(tree)
            if int(part.get("instance_id", -1)) == here]


def make_global_object(client: Any, blocks: Sequence[Any], typename: str | None = None,
                       extra_meta: dict[str, Any] | None = None) -> ObjectMeta:
    """Creates and persists a global object whose partitions are ``blocks``
    (ids, or ObjectMeta / objects with an ``id``, persisted on any instance
    of the cluster) and returns its metadata. ``typename`` defaults to
    ``vineyard::GlobalTensor`` when every block is a tensor,
    ``vineyard::GlobalDataFrame`` when every block is a DataFrame, else
    ``vineyard::GlobalObject``."""
    ids = [ObjectID(b.id if hasattr(b, "id") else b) for b in blocks]
    if typename is None:
        kinds = {client.get_meta(i).typename.split("<")[0] for i in ids}
        typename = {"vineyard::Tensor": "vineyard::GlobalTensor",
                    "vineyard::DataFrame": "vineyard::GlobalDataFrame"}.get(kinds.pop(), "vineyard::GlobalObject") \
            if len(kinds) == 1 else "vineyard::GlobalObject"
    meta = ObjectMeta(global_=True)
    meta["typename"] = typename
    meta["partitions_-size"] = len(ids)
    for k, v in (extra_meta or {}).items():
        meta[k] = v
    for i, oid in enumerate(ids):
        meta.add_member(f"partitions_-{i}", oid)
    created = client.create_metadata(meta)
    client.persist(created.id)
    return created


def make_global_tensor(client: Any, blocks: Sequence[Any], extra_meta: dict[str, Any] | None = None) -> ObjectMeta:
    """Upstream's helper: a ``vineyard::GlobalTensor`` of ``blocks``."""
    return make_global_object(client, blocks, "vineyard::GlobalTensor", extra_meta)


def make_global_dataframe(client: Any, blocks: Sequence[Any], extra_meta: dict[str, Any] | None = None) -> ObjectMeta:
    """Upstream's helper: a ``vineyard::GlobalDataFrame`` of ``blocks``."""
    return make_global_object(client, blocks, "vineyard::GlobalDataFrame", extra_meta)


def register() -> None:
    register_resolver("vineyard::Global", resolve_global)
