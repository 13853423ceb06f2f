"""NumPy arrays as ``vineyard::Tensor<T>``: one blob, read-only zero-copy views
on get (C or Fortran order kept)."""

from __future__ import annotations

import functools
import json
import math
from typing import Any

import numpy as np

from .._handles import ArrayHolder
from .._types import ObjectID, ObjectMeta
from .base import build_pickle
from .batch import BlobBatch
from .registry import register_builder, register_resolver

__all__ = ["build_numpy", "register", "resolve_numpy", "tensor_meta"]

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
    which must hold ``arr.nbytes`` bytes in the tree's ``order_`` (F for an
    array that is F- but not C-contiguous, else C)."""
    typename, name, typestr = _dtype_fields(arr.dtype)
    return ObjectMeta({
        "typename": typename,
        "shape_": _shape_text(arr.shape),
        "partition_index_": "[]",
        "order_": "F" if arr.flags.f_contiguous and not arr.flags.c_contiguous else "C",
        "value_type_": name,
        "value_type_meta_": typestr,
        "nbytes": arr.nbytes,
    })


def build_numpy(session: Any, arr: Any, **kw: Any) -> ObjectID | ObjectMeta:
    if arr.dtype.hasobject:
        return build_pickle(session, arr)
    meta = tensor_meta(arr)
    batch = BlobBatch()
    batch.add(meta, "buffer_", arr)  # a strided array is copied into C order in one pass
    batch.commit(session, meta)
    return meta


def resolve_numpy(session: Any, tree: dict[str, Any], pin: Any) -> Any:
    """A read-only NumPy view of a tensor tree's blob (no copy), kept alive
    by ``pin``."""
    dtype = _dtype(tree["value_type_meta_"])
    shape = _parse_shape(tree["shape_"])
    fortran = str(tree.get("order_", "C")).strip('"') == "F"
    blob = tree["buffer_"]
    need = math.prod(shape) * dtype.itemsize
    if need == 0:
        out = np.zeros(shape, dtype=dtype, order="F" if fortran else "C")
        out.flags.writeable = False
        return out
    address, size = session.blob_pointer(int(ObjectID(blob["id"])))
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
    return np.asarray(ArrayHolder(pin, address, shape, dtype.str, strides))


def register() -> None:
    register_builder("numpy.ndarray", build_numpy)
    register_resolver("vineyard::Tensor", resolve_numpy)
