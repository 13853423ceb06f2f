"""Global objects (``vineyard::GlobalTensor``, ``vineyard::GlobalDataFrame``,
and any ``vineyard::Global*``): an object made of partitions that may live on
several instances of a cluster, as upstream's.

Getting one returns what upstream's resolvers return: the list of the
partitions stored on the instance this client is connected to, each resolved
as a normal get would (a NumPy array, a DataFrame...), in partition order.
The partitions of other instances are left out; their metadata is in the
global object's tree (``client.get_meta``), and a client of their instance
gets them there.
"""

from __future__ import annotations

from typing import Any

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


def register() -> None:
    register_resolver("vineyard::Global", resolve_global)
