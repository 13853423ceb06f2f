"""NumPy arrays as ``vineyard::Tensor<T>``: one blob, read-only zero-copy views
on get (C or Fortran order kept)."""

from __future__ import annotations

import ctypes
import functools
import json
import math
from typing import Any

import numpy as np

from .._handles import ArrayHolder, ArrayPin
from .._types import ObjectID, ObjectMeta
from .base import build_pickle
from .batch import BlobBatch
from .registry import _by_typename, register_builder, register_resolver

__all__ = ["build_numpy", "numpy_plan", "plain_tensor", "register", "resolve_numpy", "tensor_meta"]

_CPP_TYPES = {"int32": "int", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
              "float32": "float", "float64": "double"}


@functools.lru_cache(maxsize=4096)
def _shape_text(shape: tuple[int, ...]) -> str:
    return json.dumps(list(shape))


@functools.lru_cache(maxsize=4096)
def _parse_shape(text: str) -> tuple[int, ...]:
    return tuple(json.loads(text))


@functools.lru_cache(maxsize=256)
def _dtype_fields(dtype: Any) -> tuple[str, str, str]:
    """(typename, value_type_, value_type_meta_) of a dtype; dtype.name is
    slow (computed in Python by NumPy)."""
    return f"vineyard::Tensor<{_CPP_TYPES.get(dtype.name, dtype.name)}>", dtype.name, dtype.str


@functools.lru_cache(maxsize=256)
def _dtype(text: str) -> Any:
    return np.dtype(text)


def tensor_meta(arr: Any) -> ObjectMeta:
    """The ``vineyard::Tensor`` tree of ``arr`` without its ``buffer_`` blob,
    in upstream's layout: the blob holds ``arr.nbytes`` bytes in C order,
    whatever the array's order, and ``order_`` is the JSON text ``"F"`` for an
    array that is F- but not C-contiguous (to be re-made in F order on get),
    else ``"C"``."""
    typename, name, typestr = _dtype_fields(arr.dtype)
    return ObjectMeta({
        "typename": typename,
        "shape_": _shape_text(arr.shape),
        "partition_index_": "[]",
        "order_": '"F"' if arr.flags.f_contiguous and not arr.flags.c_contiguous else '"C"',
        "value_type_": name,
        "value_type_meta_": typestr,
        "nbytes": arr.nbytes,
    })


def build_numpy(session: Any, arr: Any, **kw: Any) -> ObjectID | ObjectMeta:
    if arr.dtype.hasobject:
        return build_pickle(session, arr)
    meta = tensor_meta(arr)
    if kw.get("partition_index") is not None:  # upstream's keyword: the block's place in a global tensor
        meta["partition_index_"] = json.dumps([int(i) for i in kw["partition_index"]])
    batch = BlobBatch()
    batch.add(meta, "buffer_", arr)  # a strided or F array is copied into C order in one pass (upstream's layout)
    batch.commit(session, meta)
    return meta


def _resolve_string_tensor(session: Any, tree: dict[str, Any]) -> Any:
    """Upstream's string tensor (``vineyard::Tensor<std::string>``): its
    ``buffer_`` is a LargeStringArray (``buffer_offsets_`` int64,
    ``buffer_data_`` UTF-8); decoded into a NumPy array of str (a copy)."""
    arr = tree["buffer_"]
    if not isinstance(arr, dict) or "buffer_offsets_" not in arr or "buffer_data_" not in arr:
        raise ValueError(f"vineyard: object {tree.get('id')} ({tree.get('typename')}): its buffer_ is not "
                         "a LargeStringArray (buffer_offsets_, buffer_data_ missing)")
    length, offset = int(arr.get("length_", 0)), int(arr.get("offset_", 0))
    if int(arr.get("null_count_", 0)):
        raise ValueError(f"vineyard: object {tree.get('id')} ({tree.get('typename')}): string tensors with "
                         "nulls are not supported")

    def blob(key: str) -> bytes:
        bid = int(ObjectID(arr[key]["id"]))
        if bid == 1 << 63:
            return b""
        address, size = session.blob_pointer(bid)
        return ctypes.string_at(address, size)

    offsets = np.frombuffer(blob("buffer_offsets_"), dtype="<i8")
    data = blob("buffer_data_")
    if len(offsets) < offset + length + 1 or (length and int(offsets[offset + length]) > len(data)):
        raise ValueError(f"vineyard: object {tree.get('id')} ({tree.get('typename')}): {length} strings need "
                         f"more than the {len(offsets)} offsets and {len(data)} bytes of its blobs")
    items = [data[offsets[i]:offsets[i + 1]].decode() for i in range(offset, offset + length)]
    out = np.array(items, dtype=str).reshape(_parse_shape(tree["shape_"]))
    out.flags.writeable = False
    return out


def _resolve_object_tensor(session: Any, tree: dict[str, Any]) -> Any:
    """Upstream's object tensor (``vineyard::Tensor<object>``): its blob is a
    pickle of the array. Never a view: object pointers in shared memory would
    crash the process."""
    import pickle

    bid = int(ObjectID(tree["buffer_"]["id"]))
    address, size = session.blob_pointer(bid) if bid != 1 << 63 else (0, 0)
    try:
        value = pickle.loads(ctypes.string_at(address, size))
    except Exception as e:
        raise ValueError(f"vineyard: object {tree.get('id')} ({tree.get('typename')}): its buffer_ is not a "
                         f"pickled array: {e}") from e
    out = np.asarray(value, dtype=object).reshape(_parse_shape(tree["shape_"]))
    out.flags.writeable = False
    return out


def resolve_numpy(session: Any, tree: dict[str, Any], pin: Any) -> Any:
    """A read-only NumPy view of a tensor tree's blob (no copy), kept alive
    by ``pin``."""
    if tree.get("typename") == "vineyard::Tensor<std::string>":
        return _resolve_string_tensor(session, tree)
    if _dtype(tree["value_type_meta_"]).hasobject:
        return _resolve_object_tensor(session, tree)
    dtype = _dtype(tree["value_type_meta_"])
    shape = _parse_shape(tree["shape_"])
    order = str(tree.get("order_", '"C"'))
    # Upstream's layout (order_ the JSON text "F") holds C-order bytes of an F
    # array; our earlier one (bare F) held the F-order bytes.
    upstream_f = order == '"F"'
    fortran = order == "F"
    if order not in ('"C"', '"F"', "C", "F"):
        raise ValueError(f"vineyard: object {tree.get('id')} ({tree.get('typename')}): unknown order_ {order!r}")
    blob = tree["buffer_"]
    need = math.prod(shape) * dtype.itemsize
    if need == 0:
        out = np.zeros(shape, dtype=dtype, order="F" if fortran else "C")
        out.flags.writeable = False
        return out
    address, size = session.pinned_blob(pin, blob["id"])
    if need > size:  # a bad tree, or bytes that never arrived: never a view past its blob, never zeros
        raise ValueError(f"vineyard: object {tree.get('id')} ({tree.get('typename')}): a tensor of shape "
                         f"{shape} and dtype {dtype} needs more than its blob's {size} bytes ({need}; blob "
                         f"{blob.get('id')})")
    strides = None
    if fortran and len(shape) > 1:
        steps, step = [], dtype.itemsize
        for dim in shape:
            steps.append(step)
            step *= dim
        strides = tuple(steps)
    view = np.asarray(ArrayHolder(pin, address, shape, dtype.str, strides))
    if upstream_f and len(shape) > 1:
        out = np.asfortranarray(view)  # a copy, as upstream's reader makes
        out.flags.writeable = False
        return out
    return view


def plain_tensor(tree: dict[str, Any]) -> tuple[str, Any, tuple[int, ...]] | None:
    """(typename, dtype, shape) of a tensor tree that :func:`resolve_numpy`
    makes a plain view of: a C-order tensor of a NumPy dtype with bytes to
    view (not upstream's string tensor, not objects, not empty); else None.
    What the get plans (:func:`numpy_plan`, ``dataframe_plan``) fix per
    tree shape."""
    typename = tree.get("typename")
    if not isinstance(typename, str) or not typename.startswith("vineyard::Tensor<") \
            or typename == "vineyard::Tensor<std::string>" or str(tree.get("order_", '"C"')) not in ('"C"', "C"):
        return None
    try:
        dtype = _dtype(tree["value_type_meta_"])
        shape = _parse_shape(tree["shape_"])
    except (KeyError, TypeError, ValueError):
        return None
    if dtype.hasobject or math.prod(shape) == 0:
        return None
    return typename, dtype, shape


def numpy_plan(tree: dict[str, Any], pin: Any) -> Any:
    """A get of every later tree of ``tree``'s shape (its shape number, see
    v6d_get_object_shaped) without parsing it: ``plan(conn, oid, address,
    size)``, given the connection, the object and the one blob that get
    pinned, is what :func:`resolve_numpy` returns for such a tree (its base an
    :class:`ArrayPin`, which holds the get's pin), or None where the plan does
    not apply (the caller then pins, parses and resolves). None when ``tree`` is not a C-order tensor of a
    NumPy dtype whose only member object is its blob, pinned by this get
    (``pin``).

    Within one shape everything but the ids and signatures is the same text,
    so dtype, shape and order are fixed, and the one member object, hence the
    one blob a get pins, is the tensor's buffer. Each call still checks that
    ``resolve_numpy`` is the resolver registered for the typename, and that
    the blob holds the bytes the shape needs."""
    spec = plain_tensor(tree)
    if spec is None:
        return None
    typename, dtype, shape = spec
    blob = tree.get("buffer_")
    members = [v for v in tree.values() if isinstance(v, (dict, list))]
    try:
        views = pin.views or {}
        bid = int(ObjectID(blob["id"]))  # type: ignore[index]
        blob_type = blob["typename"]  # type: ignore[index]
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    need = math.prod(shape) * dtype.itemsize
    if members != [blob] or blob_type != "vineyard::Blob" or list(views) != [bid] or views[bid][1] < need:
        return None
    typestr = dtype.str

    def plan(conn: Any, oid: int, address: int, size: int) -> Any:
        if _by_typename.get(typename) is not resolve_numpy or need > size:
            return None
        return np.asarray(ArrayPin(conn, oid, address, shape, typestr))

    return plan


def register() -> None:
    register_builder("numpy.ndarray", build_numpy)
    register_resolver("vineyard::Tensor", resolve_numpy)
