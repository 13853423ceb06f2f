"""NumPy arrays as ``vineyard::Tensor<T>``: one blob, read-only zero-copy views
on get (C or Fortran order kept)."""

from __future__ import annotations

import ctypes
import functools
import json
from typing import Any

from .._types import ObjectID, ObjectMeta

__all__ = ["build_numpy", "register", "resolve_numpy"]

_CPP_TYPES = {"int32": "int", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
              "float32": "float", "float64": "double"}


@functools.lru_cache(maxsize=4096)
def _shape_text(shape: tuple[int, ...]) -> str:
    return json.dumps(list(shape))


@functools.lru_cache(maxsize=4096)
def _parse_shape(text: str) -> tuple[int, ...]:
    return tuple(json.loads(text))


@functools.lru_cache(maxsize=256)
def _dtype(text: str) -> Any:
    import numpy as np

    return np.dtype(text)


def build_numpy(client: Any, arr: Any, **kw: Any) -> ObjectID | ObjectMeta:
    import numpy as np

    from .base import build_pickle

    if arr.dtype.hasobject:
        return build_pickle(client, arr)
    if not (arr.flags.c_contiguous or arr.flags.f_contiguous):
        arr = np.ascontiguousarray(arr)
    order = "C" if arr.flags.c_contiguous else "F"
    builder = client.create_blob(arr.nbytes)
    if arr.nbytes:
        ctypes.memmove(builder.address, arr.ctypes.data, arr.nbytes)
    dtype = arr.dtype
    meta = ObjectMeta({
        "typename": f"vineyard::Tensor<{_CPP_TYPES.get(dtype.name, dtype.name)}>",
        "shape_": _shape_text(arr.shape),
        "partition_index_": "[]",
        "order_": order,
        "value_type_": dtype.name,
        "value_type_meta_": dtype.str,
        "nbytes": arr.nbytes,
    })
    meta.add_member("buffer_", builder)
    return meta


def resolve_numpy(client: Any, tree: dict[str, Any], pin: Any) -> Any:
    import numpy as np

    from ..client import _ArrayHolder

    dtype = _dtype(tree["value_type_meta_"])
    shape = _parse_shape(tree["shape_"])
    fortran = str(tree.get("order_", "C")).strip('"') == "F"
    blob = tree["buffer_"]
    if int(blob.get("length", 0)) == 0:
        out = np.zeros(shape, dtype=dtype, order="F" if fortran else "C")
        out.flags.writeable = False
        return out
    address, _size = client._blob_pointer(int(ObjectID(blob["id"])))
    strides = None
    if fortran and len(shape) > 1:
        steps, step = [], dtype.itemsize
        for dim in shape:
            steps.append(step)
            step *= dim
        strides = tuple(steps)
    return np.asarray(_ArrayHolder(pin, address, shape, dtype.str, strides))


def register() -> None:
    from . import register_builder, register_resolver

    register_builder("numpy.ndarray", build_numpy)
    register_resolver("vineyard::Tensor", resolve_numpy)
