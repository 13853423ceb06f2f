"""Builders (put) and resolvers (get) per type, and their registry.

A builder ``fn(client, value, **kw) -> ObjectID`` is picked by the first
registered type in ``type(value).__mro__``; a resolver ``fn(client, tree, pin)``
by the longest registered typename prefix. Register your own with
:func:`register_builder` / :func:`register_resolver`.
"""

from __future__ import annotations

import ctypes
import json
import pickle
from typing import Any, Callable, Dict, List

from ._types import BLOB_TYPENAME, ObjectID, ObjectMeta

__all__ = ["build", "register_builder", "register_resolver", "resolve"]

Builder = Callable[..., ObjectID]
Resolver = Callable[[Any, Dict[str, Any], Any], Any]

_builders: Dict[type, Builder] = {}
_resolvers: Dict[str, Resolver] = {}


def register_builder(pytype: type, fn: Builder) -> None:
    """Registers ``fn`` to put values of ``pytype`` (and its subclasses)."""
    _builders[pytype] = fn


def register_resolver(typename_prefix: str, fn: Resolver) -> None:
    """Registers ``fn`` to get objects whose typename starts with the prefix."""
    _resolvers[typename_prefix] = fn


def build(client: Any, value: Any, **kw: Any) -> ObjectID:
    for klass in type(value).__mro__:
        fn = _builders.get(klass)
        if fn is not None:
            return fn(client, value, **kw)
    return _build_pickle(client, value)


def resolve(client: Any, tree: Dict[str, Any], pin: Any) -> Any:
    typename = str(tree.get("typename", ""))
    best = ""
    for prefix in _resolvers:
        if typename.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    if not best:
        return ObjectMeta(tree)
    return _resolvers[best](client, tree, pin)


# ---- blobs -----------------------------------------------------------------


def _copy_into_blob(client: Any, address: int, nbytes: int) -> Any:
    builder = client.create_blob(nbytes)
    if nbytes:
        ctypes.memmove(builder.address, address, nbytes)
    return builder


def _build_bytes(client: Any, value: Any, **kw: Any) -> ObjectID:
    view = memoryview(value).cast("B")
    builder = client.create_blob(view.nbytes)
    if view.nbytes:
        builder.copy(0, view)
    return builder.seal(client)


def _resolve_blob(client: Any, tree: Dict[str, Any], pin: Any) -> memoryview:
    from .client import Blob

    bid = int(ObjectID(tree["id"]))
    address, size = client._blob_pointer(bid) if int(tree.get("length", 0)) else (0, 0)
    return memoryview(Blob(bid, address, size, pin))


# ---- numpy -----------------------------------------------------------------

_CPP_TYPES = {"int32": "int", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
              "float32": "float", "float64": "double"}


def _build_numpy(client: Any, arr: Any, **kw: Any) -> ObjectID:
    import numpy as np

    if arr.dtype.hasobject:
        return _build_pickle(client, arr)
    if not (arr.flags.c_contiguous or arr.flags.f_contiguous):
        arr = np.ascontiguousarray(arr)
    order = "C" if arr.flags.c_contiguous else "F"
    builder = _copy_into_blob(client, arr.ctypes.data, arr.nbytes)
    meta = ObjectMeta({"typename": "vineyard::Tensor<%s>" % _CPP_TYPES.get(arr.dtype.name, arr.dtype.name)})
    meta["shape_"] = list(arr.shape)
    meta["partition_index_"] = []
    meta["order_"] = order
    meta["value_type_"] = arr.dtype.name
    meta["value_type_meta_"] = arr.dtype.str
    meta.nbytes = arr.nbytes
    meta.add_member("buffer_", ObjectID(builder.id))
    return client.create_metadata(meta, seal=[builder.id]).id


def _resolve_numpy(client: Any, tree: Dict[str, Any], pin: Any) -> Any:
    import numpy as np

    from .client import _ArrayHolder

    dtype = np.dtype(tree["value_type_meta_"])
    shape = tuple(json.loads(tree["shape_"]))
    order = str(tree.get("order_", "C")).strip('"')
    blob = tree["buffer_"]
    if int(blob.get("length", 0)) == 0:
        out = np.zeros(shape, dtype=dtype, order=order)
        out.flags.writeable = False
        return out
    address, _size = client._blob_pointer(int(ObjectID(blob["id"])))
    strides = None
    if order == "F" and len(shape) > 1:
        strides, step = [], dtype.itemsize
        for dim in shape:
            strides.append(step)
            step *= dim
        strides = tuple(strides)
    return np.asarray(_ArrayHolder(pin, address, shape, dtype.str, strides))


# ---- scalars and sequences -------------------------------------------------


def _build_scalar(client: Any, value: Any, **kw: Any) -> ObjectID:
    kind = {bool: ("bool", "bool"), int: ("int", "int"), float: ("double", "float"),
            str: ("std::string", "str")}[type(value) if type(value) in (bool, int, float, str) else
                                          next(t for t in (bool, int, float, str) if isinstance(value, t))]
    meta = ObjectMeta({"typename": "vineyard::Scalar<%s>" % kind[0], "value_": value, "type_": kind[1]})
    if isinstance(value, int) and not isinstance(value, bool) and not -(1 << 63) <= value < 1 << 63:
        return _build_pickle(client, value)
    return client.create_metadata(meta).id


def _resolve_scalar(client: Any, tree: Dict[str, Any], pin: Any) -> Any:
    value = tree["value_"]
    kind = tree.get("type_")
    return {"bool": bool, "int": int, "float": float, "str": str}.get(kind, lambda v: v)(value)


def _build_sequence(client: Any, value: Any, **kw: Any) -> ObjectID:
    meta = ObjectMeta({"typename": "vineyard::Sequence", "size_": len(value),
                       "__elements_-size": len(value), "is_list_": isinstance(value, list)})
    for i, item in enumerate(value):
        meta.add_member("__elements_-%d" % i, build(client, item))
    return client.create_metadata(meta).id


def _resolve_sequence(client: Any, tree: Dict[str, Any], pin: Any) -> Any:
    items = [resolve(client, tree["__elements_-%d" % i], pin) for i in range(int(tree["__elements_-size"]))]
    return items if tree.get("is_list_") else tuple(items)


# ---- pickle protocol 5 -----------------------------------------------------


def _build_pickle(client: Any, value: Any, **kw: Any) -> ObjectID:
    buffers: List[pickle.PickleBuffer] = []
    data = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    blobs = client.create_blob([len(data)] + [r.nbytes for r in raws])
    if data:
        blobs[0].copy(0, data)
    for blob, raw in zip(blobs[1:], raws):
        if raw.nbytes:
            blob.copy(0, raw)
    meta = ObjectMeta({"typename": "vineyard::PickleBuffer", "size_": len(data), "__buffers_-size": len(raws)})
    meta.nbytes = len(data) + sum(r.nbytes for r in raws)
    meta.add_member("buffer_", ObjectID(blobs[0].id))
    for i, blob in enumerate(blobs[1:]):
        meta.add_member("__buffers_-%d" % i, ObjectID(blob.id))
    return client.create_metadata(meta, seal=[b.id for b in blobs]).id


def _resolve_pickle(client: Any, tree: Dict[str, Any], pin: Any) -> Any:
    data = _resolve_blob(client, tree["buffer_"], pin)
    buffers = [_resolve_blob(client, tree["__buffers_-%d" % i], pin)
               for i in range(int(tree.get("__buffers_-size", 0)))]
    return pickle.loads(data, buffers=buffers)


def _register_builtins() -> None:
    for t in (bytes, bytearray, memoryview):
        register_builder(t, _build_bytes)
    for t in (bool, int, float, str):
        register_builder(t, _build_scalar)
    register_builder(list, _build_sequence)
    register_builder(tuple, _build_sequence)
    register_builder(object, _build_pickle)
    register_resolver(BLOB_TYPENAME, _resolve_blob)
    register_resolver("vineyard::Scalar", _resolve_scalar)
    register_resolver("vineyard::Sequence", _resolve_sequence)
    register_resolver("vineyard::PickleBuffer", _resolve_pickle)
    register_resolver("vineyard::Tensor", _resolve_numpy)
    try:
        import numpy as np

        register_builder(np.ndarray, _build_numpy)
    except ImportError:  # numpy is a dependency; stay importable without it
        pass


_register_builtins()


