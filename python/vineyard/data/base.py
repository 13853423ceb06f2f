"""Builders and resolvers of Python's own values: bytes (a blob), scalars,
lists and tuples (``vineyard::Sequence``), and anything else through pickle
protocol 5 with each out-of-band buffer in a blob of its own."""

from __future__ import annotations

import pickle
from typing import Any

from .._objects import Blob
from .._session import INLINE_BYTES
from .._types import BLOB_TYPENAME, ObjectID, ObjectMeta
from .batch import BlobBatch
from .registry import build_meta, register_builder, register_resolver, resolve

__all__ = ["build_pickle", "pickle_tree", "register", "resolve_blob"]


def build_bytes(session: Any, value: Any, **kw: Any) -> ObjectID:
    view = memoryview(value).cast("B")
    if 0 < view.nbytes <= INLINE_BYTES:
        return session.put_inline(None, [view])[1][0]  # the blob is the object: one round trip
    builder = session.create_blob(view.nbytes)
    if view.nbytes:
        builder.copy(0, view)
    return builder._seal_id()


def resolve_blob(session: Any, tree: dict[str, Any], pin: Any) -> memoryview:
    """A read-only memoryview of a blob member this connection holds."""

    bid = int(ObjectID(tree["id"]))
    # The empty blob alone has no bytes: "length" is not trusted (upstream's
    # daemon stores 0 there for every blob).
    address, size = session.pinned_blob(pin, bid) if bid != 1 << 63 else (0, 0)
    return memoryview(Blob(bid, address, size, pin))


# A bool is stored as upstream stores it: Scalar<int> with type_ "bool".
_SCALARS = {bool: ("int", "bool"), int: ("int", "int"), float: ("double", "float"), str: ("std::string", "str")}


def build_scalar(session: Any, value: Any, **kw: Any) -> ObjectID | ObjectMeta:
    kind = _SCALARS.get(type(value)) or next(_SCALARS[t] for t in _SCALARS if isinstance(value, t))
    if isinstance(value, int) and not isinstance(value, bool) and not -(1 << 63) <= value < 1 << 63:
        return build_pickle(session, value)
    return ObjectMeta({"typename": f"vineyard::Scalar<{kind[0]}>", "value_": value, "type_": kind[1]})


def resolve_scalar(session: Any, tree: dict[str, Any], pin: Any) -> Any:
    value = tree["value_"]
    convert: Any = {"bool": bool, "int": int, "float": float, "str": str}.get(str(tree.get("type_")))
    return convert(value) if convert else value


def build_sequence(session: Any, value: Any, **kw: Any) -> ObjectMeta:
    meta = ObjectMeta({"typename": "vineyard::Sequence", "size_": len(value),
                       "__elements_-size": len(value), "is_list_": isinstance(value, list)})
    for i, item in enumerate(value):
        meta.add_member(f"__elements_-{i}", build_meta(session, item))
    return meta


def resolve_sequence(session: Any, tree: dict[str, Any], pin: Any) -> Any:
    items = [resolve(session, tree[f"__elements_-{i}"], pin) for i in range(int(tree["__elements_-size"]))]
    return items if tree.get("is_list_") else tuple(items)


# A pickle without out-of-band buffers is upstream's vineyard::PickleBuffer
# (size_, member buffer_); one with them (our zero-copy pickle, each buffer a
# blob) has a typename of its own, which upstream's reader does not match.
PICKLE, ZERO_COPY_PICKLE = "vineyard::PickleBuffer", "v6d::ZeroCopyPickle"


def pickle_tree(value: Any) -> tuple[ObjectMeta, list[tuple[str, memoryview]]]:
    """The pickle tree of ``value`` (protocol 5) without its blobs, and the
    bytes each blob member must hold, as ``(member key, bytes)``: the stream,
    then each out-of-band buffer."""
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    meta = ObjectMeta({"typename": ZERO_COPY_PICKLE if raws else PICKLE, "size_": len(data)})
    if raws:
        meta["__buffers_-size"] = len(raws)
    meta.nbytes = len(data) + sum(r.nbytes for r in raws)
    return meta, [("buffer_", memoryview(data))] + [(f"__buffers_-{i}", raw) for i, raw in enumerate(raws)]


def build_pickle(session: Any, value: Any, **kw: Any) -> ObjectMeta:
    """Pickles ``value`` with protocol 5: the stream in one blob, each
    out-of-band buffer (NumPy arrays, ...) in a blob of its own."""

    meta, parts = pickle_tree(value)
    batch = BlobBatch()
    for key, part in parts:
        batch.add(meta, key, part)
    batch.commit(session, meta)
    return meta


def resolve_pickle(session: Any, tree: dict[str, Any], pin: Any) -> Any:
    data = resolve_blob(session, tree["buffer_"], pin)
    buffers = [resolve_blob(session, tree[f"__buffers_-{i}"], pin)
               for i in range(int(tree.get("__buffers_-size", 0)))]
    return pickle.loads(data, buffers=buffers)


def register() -> None:
    for buffer_type in (bytes, bytearray, memoryview):
        register_builder(buffer_type, build_bytes)
    for scalar_type in (bool, int, float, str):
        register_builder(scalar_type, build_scalar)
    register_builder(list, build_sequence)
    register_builder(tuple, build_sequence)
    register_builder(object, build_pickle)
    register_resolver(BLOB_TYPENAME, resolve_blob)
    register_resolver("vineyard::Scalar", resolve_scalar)
    register_resolver("vineyard::Sequence", resolve_sequence)
    register_resolver(PICKLE, resolve_pickle)
    register_resolver(ZERO_COPY_PICKLE, resolve_pickle)
