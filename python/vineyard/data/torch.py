"""torch tensors: every dtype and layout, zero-copy on get.

torch is optional and imported only when a tensor is put or got, never by
``import vineyard``.

Put copies the tensor's buffers into blobs created in one round trip, and
creates the whole tree in one more:

- strided: ``vineyard::Tensor<torch.float32>`` (upstream's typename): fields
  ``value_type_`` (``str(dtype)``), ``value_type_meta_`` (the NumPy dtype, when
  NumPy has one), ``shape_``, ``order_`` ("C"), member ``buffer_``. A
  non-contiguous tensor is stored as one contiguous copy; it comes back
  contiguous, with equal values.
- quantized: ``vineyard::torch::QuantizedTensor<torch.quint8>``: ``qscheme_``,
  ``shape_``, ``scale_``/``zero_point_`` or ``axis_`` and members ``scales_``,
  ``zero_points_``; member ``int_repr_`` holds the integer values (the raw
  packed bytes for quint4x2/quint2x4).
- sparse COO: ``vineyard::torch::SparseCOOTensor<T>``: ``shape_``,
  ``is_coalesced_``, members ``indices_``, ``values_``.
- sparse CSR/CSC/BSR/BSC: ``vineyard::torch::SparseCompressedTensor<T>``:
  ``layout_``, ``shape_``, members ``compressed_indices_``,
  ``plain_indices_``, ``values_`` (the blocksize is the shape of the values).
- nested: ``vineyard::torch::NestedTensor<T>``: ``layout_`` "jagged" (members
  ``values_``, ``offsets_``, optional ``lengths_``; ``ragged_idx_``) or
  "strided" (``nested_size_``, member ``values_``: the packed components).

Every buffer is a ``vineyard::Tensor<torch.T>`` member. A tensor on another
device (CUDA) is copied to the CPU first; a tensor that requires grad is
detached (the graph is not stored); subclasses (``nn.Parameter``) come back as
plain tensors.

Get maps every buffer through a private copy-on-write view (see
``vineyard._handles.PrivateView``): no copy, and the cost does not depend on the size.
torch has no read-only tensors, so "read-only" means: the store's copy is
immutable; your tensor is copy-on-write. In-place operations work and stay
private to your process; the first write to each 4 KiB page copies that page.
The tensor keeps its views (and the blobs pinned) while any tensor sharing its
memory lives. Sparse tensors are checked (``check_invariants``) on get, since
torch would crash on invalid indices.

Without torch, a dense tensor whose dtype NumPy has comes back as a read-only
NumPy array; any other torch object raises ImportError.
"""

from __future__ import annotations

import importlib
import json
import math
from typing import Any

from .._types import ObjectID, ObjectMeta
from .batch import copy_bytes
from .registry import register_builder, register_resolver
from .tensor import resolve_numpy

__all__ = ["build_torch", "register", "resolve_torch"]

DENSE = "vineyard::Tensor<torch."
PREFIX = "vineyard::torch::"

# torch dtype → NumPy typestr, for the dtypes NumPy has (little-endian hosts).
_NUMPY = {
    "torch.bool": "|b1", "torch.uint8": "|u1", "torch.int8": "|i1",
    "torch.int16": "<i2", "torch.uint16": "<u2", "torch.int32": "<i4", "torch.uint32": "<u4",
    "torch.int64": "<i8", "torch.uint64": "<u8", "torch.float16": "<f2", "torch.float32": "<f4",
    "torch.float64": "<f8", "torch.complex64": "<c8", "torch.complex128": "<c16",
}
# quantized dtype → the dtype of its integer representation
_QUANTIZED = {"torch.quint8": "torch.uint8", "torch.qint8": "torch.int8", "torch.qint32": "torch.int32",
              "torch.quint4x2": "torch.uint8", "torch.quint2x4": "torch.uint8"}
_PACKED = {"torch.quint4x2", "torch.quint2x4"}  # several values per byte
_PER_TENSOR = {"per_tensor_affine", "per_tensor_symmetric"}
_PER_CHANNEL = {"per_channel_affine", "per_channel_symmetric", "per_channel_affine_float_qparams"}
# compressed layout → its index accessors (compressed, plain)
_COMPRESSED = {
    "sparse_csr": ("crow_indices", "col_indices"), "sparse_bsr": ("crow_indices", "col_indices"),
    "sparse_csc": ("ccol_indices", "row_indices"), "sparse_bsc": ("ccol_indices", "row_indices"),
}

_torch_module: Any = None  # torch once looked for; False when not installed


def _torch() -> Any:
    """torch, imported on first use, or None when it is not installed."""
    global _torch_module
    if _torch_module is None:
        try:  # not `import torch`: type checkers need not know torch
            _torch_module = importlib.import_module("torch")
        except ImportError:
            _torch_module = False
    return _torch_module or None


# -- put ------------------------------------------------------------------

# One buffer of a tensor: (tensor whose data_ptr() starts the bytes, dtype
# name, shape, nbytes).
_Part = tuple[Any, str, list[int], int]


# Integer dtypes by size, to copy dtypes torch cannot copy (int1..int7, ...).
_CARRIERS = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def _part(t: Any) -> _Part:
    """The buffer of a dense, non-quantized CPU tensor, made contiguous (a
    copy only when it is not), with lazy conjugation/negation applied."""
    t = t.resolve_conj().resolve_neg()
    if not t.is_contiguous():
        carrier = _CARRIERS.get(t.element_size())
        if carrier is None:
            t = t.contiguous()
        else:  # reinterpret as an integer of the same size, copy, reinterpret back
            t = t.view(getattr(_torch(), carrier)).contiguous().view(t.dtype)
    nbytes = t.numel() * t.element_size()
    if nbytes:
        t.data_ptr()  # fails now, before any blob exists, for tensors without data
    return (t, str(t.dtype), list(t.shape), nbytes)


def _store(session: Any, parts: list[_Part]) -> list[ObjectMeta]:
    """Creates the blobs of all parts in one round trip, fills them, and
    returns a dense tensor tree (not created yet) per part."""
    blobs = session.create_blob([p[3] for p in parts])
    metas = []
    for (src, dtype, shape, nbytes), blob in zip(parts, blobs):
        if nbytes:
            copy_bytes(blob.address, src.data_ptr(), nbytes, not session.conn.remote)
        meta = ObjectMeta({"typename": f"vineyard::Tensor<{dtype}>", "value_type_": dtype})
        if dtype in _NUMPY:
            meta["value_type_meta_"] = _NUMPY[dtype]
        meta["shape_"] = shape
        meta["partition_index_"] = []
        meta["order_"] = "C"
        meta.nbytes = nbytes
        meta.add_member("buffer_", blob)
        metas.append(meta)
    return metas


def _composite(kind: str, dtype: str, members: dict[str, ObjectMeta], **fields: Any) -> ObjectMeta:
    meta = ObjectMeta({"typename": f"{PREFIX}{kind}<{dtype}>", "value_type_": dtype})
    for key, value in fields.items():
        meta[key] = value
    for key, member in members.items():
        meta.add_member(key, member)
    meta.nbytes = sum(m.nbytes for m in members.values())
    return meta


def build_torch(session: Any, value: Any, **kw: Any) -> ObjectMeta:
    """Stores a torch tensor (see the module docstring for what is stored)."""
    torch = _torch()
    t = value.detach()
    if t.device.type != "cpu":
        if t.device.type == "meta":
            raise ValueError("vineyard: a tensor on the meta device has no data to store")
        t = t.cpu()
    dtype = str(t.dtype)
    layout = str(t.layout).removeprefix("torch.")
    if t.is_nested:
        return _build_nested(session, t, torch, dtype, layout)
    if t.is_quantized:
        return _build_quantized(session, t, torch, dtype)
    if layout == "strided":
        return _store(session, [_part(t)])[0]
    if layout == "sparse_coo":
        indices, values = _store(session, [_part(t._indices()), _part(t._values())])
        return _composite("SparseCOOTensor", dtype, {"indices_": indices, "values_": values},
                          shape_=list(t.shape), is_coalesced_=bool(t.is_coalesced()))
    if layout in _COMPRESSED:
        compressed, plain = (getattr(t, name)() for name in _COMPRESSED[layout])
        ci, pi, values = _store(session, [_part(compressed), _part(plain), _part(t.values())])
        return _composite("SparseCompressedTensor", dtype,
                          {"compressed_indices_": ci, "plain_indices_": pi, "values_": values},
                          layout_=layout, shape_=list(t.shape))
    raise TypeError(f"vineyard: cannot store a torch tensor with layout {t.layout}")


def _packed_nbytes(torch: Any, shape: list[int], dtype: Any) -> int:
    """Bytes of a packed quantized tensor's storage (torch pads rows)."""
    empty = torch._empty_affine_quantized(shape, scale=1.0, zero_point=0, dtype=dtype)
    return int(empty.untyped_storage().nbytes())


def _build_quantized(session: Any, t: Any, torch: Any, dtype: str) -> ObjectMeta:
    scheme = str(t.qscheme()).removeprefix("torch.")
    q = t.contiguous()
    shape = list(q.shape)
    if dtype in _PACKED:
        nbytes = _packed_nbytes(torch, shape, q.dtype)
        if q.storage_offset() or q.untyped_storage().nbytes() != nbytes:
            q = q.clone()
        parts: list[_Part] = [(q, "torch.uint8", [nbytes], nbytes)]
    else:  # data_ptr() accounts for a storage offset
        parts = [(q, _QUANTIZED[dtype], shape, q.numel() * q.element_size())]
    fields: dict[str, Any] = {"qscheme_": scheme, "shape_": shape}
    if scheme in _PER_TENSOR:
        fields.update(scale_=float(q.q_scale()), zero_point_=int(q.q_zero_point()))
        names = ["int_repr_"]
    elif scheme in _PER_CHANNEL:
        fields["axis_"] = int(q.q_per_channel_axis())
        parts += [_part(q.q_per_channel_scales()), _part(q.q_per_channel_zero_points())]
        names = ["int_repr_", "scales_", "zero_points_"]
    else:
        raise TypeError(f"vineyard: cannot store a quantized tensor with qscheme {scheme}")
    return _composite("QuantizedTensor", dtype, dict(zip(names, _store(session, parts))), **fields)


def _build_nested(session: Any, t: Any, torch: Any, dtype: str, layout: str) -> ObjectMeta:
    if layout == "jagged":
        names = ["values_", "offsets_"]
        parts = [_part(t.values()), _part(t.offsets())]
        if t.lengths() is not None:
            names.append("lengths_")
            parts.append(_part(t.lengths()))
        return _composite("NestedTensor", dtype, dict(zip(names, _store(session, parts))),
                          layout_="jagged", ragged_idx_=int(t._ragged_idx))
    if layout == "strided":
        components = t.unbind()
        flat = t.values() if t.is_contiguous() else None  # the packed buffer, no copy
        if flat is None or flat.numel() != sum(c.numel() for c in components):
            flat = torch.cat([c.reshape(-1) for c in components]) if components else torch.empty(0, dtype=t.dtype)
        (values,) = _store(session, [_part(flat)])
        return _composite("NestedTensor", dtype, {"values_": values},
                          layout_="strided", nested_size_=[list(c.shape) for c in components])
    raise TypeError(f"vineyard: cannot store a nested tensor with layout {t.layout}")


# -- get ------------------------------------------------------------------

def _corrupt(tree: dict[str, Any], why: str) -> ValueError:
    return ValueError(f"vineyard: {tree.get('typename')} {tree.get('id', '')}: {why}")


def _dtype(torch: Any, tree: dict[str, Any]) -> Any:
    name = str(tree.get("value_type_", ""))
    dtype = getattr(torch, name.removeprefix("torch."), None)
    if not name.startswith("torch.") or not isinstance(dtype, torch.dtype):
        raise _corrupt(tree, f"unknown torch dtype {name!r}")
    return dtype


def _shape(tree: dict[str, Any], key: str = "shape_") -> list[int]:
    value = tree.get(key)
    shape = json.loads(value) if isinstance(value, str) else value
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise _corrupt(tree, f"bad {key} {value!r}")
    return shape


def _dense(torch: Any, session: Any, tree: dict[str, Any]) -> Any:
    """A dense tensor tree as a tensor over a private view of its blob."""

    dtype = _dtype(torch, tree)
    if str(dtype) in _QUANTIZED:
        raise _corrupt(tree, f"a dense tensor cannot have the quantized dtype {dtype}")
    shape = _shape(tree)
    nbytes = math.prod(shape) * dtype.itemsize
    blob = tree.get("buffer_")
    if not isinstance(blob, dict) or int(blob.get("length", 0)) != nbytes:
        raise _corrupt(tree, f"its buffer does not hold {shape} values of {dtype}")
    fortran = str(tree.get("order_", "C")).strip('"') == "F" and len(shape) > 1
    if nbytes == 0:
        return torch.empty(0, dtype=torch.uint8).view(dtype).view(shape)
    raw = torch.from_numpy(session.map_private(int(ObjectID(blob["id"])))).view(dtype)
    if fortran:
        return raw.view(shape[::-1]).permute(*reversed(range(len(shape))))
    return raw.view(shape)


def _quantized(torch: Any, session: Any, tree: dict[str, Any]) -> Any:
    dtype = _dtype(torch, tree)
    if str(dtype) not in _QUANTIZED:
        raise _corrupt(tree, f"{dtype} is not a quantized dtype")
    shape = _shape(tree)
    data = _dense(torch, session, tree["int_repr_"])
    scheme = str(tree.get("qscheme_"))
    if scheme in _PER_TENSOR:
        q = torch._empty_affine_quantized(shape, scale=float(tree["scale_"]),
                                          zero_point=int(tree["zero_point_"]), dtype=dtype)
    elif scheme in _PER_CHANNEL:
        scales, zero_points = _dense(torch, session, tree["scales_"]), _dense(torch, session, tree["zero_points_"])
        axis = int(tree["axis_"])
        if not 0 <= axis < len(shape) or any(p.shape != (shape[axis],) for p in (scales, zero_points)):
            raise _corrupt(tree, f"axis_ {axis} and per-channel parameters do not fit the shape {shape}")
        q = torch._empty_per_channel_affine_quantized(shape, scales=scales, zero_points=zero_points, axis=axis,
                                                      dtype=dtype)
    else:
        raise _corrupt(tree, f"unknown qscheme {scheme!r}")
    if data.untyped_storage().nbytes() != q.untyped_storage().nbytes():
        raise _corrupt(tree, f"int_repr_ does not hold {shape} values of {dtype}")
    strides: list[int] = []
    step = 1
    for dim in reversed(shape):
        strides.insert(0, step)
        step *= max(dim, 1)
    return q.set_(data.untyped_storage(), 0, shape, strides)


def _sparse(torch: Any, session: Any, tree: dict[str, Any]) -> Any:
    shape = _shape(tree)
    values = _dense(torch, session, tree["values_"])
    if str(tree["typename"]).startswith(f"{PREFIX}SparseCOOTensor<"):
        return torch.sparse_coo_tensor(_dense(torch, session, tree["indices_"]), values, shape,
                                       is_coalesced=bool(tree.get("is_coalesced_")), check_invariants=True)
    layout = str(tree.get("layout_"))
    if layout not in _COMPRESSED:
        raise _corrupt(tree, f"unknown sparse layout {layout!r}")
    return torch.sparse_compressed_tensor(
        _dense(torch, session, tree["compressed_indices_"]), _dense(torch, session, tree["plain_indices_"]),
        values, shape, layout=getattr(torch, layout), check_invariants=True)


def _nested(torch: Any, session: Any, tree: dict[str, Any]) -> Any:
    values = _dense(torch, session, tree["values_"])
    layout = str(tree.get("layout_"))
    if layout == "strided":
        sizes = _shape_list(tree)
        if sum(math.prod(s) for s in sizes) != values.numel():
            raise _corrupt(tree, "nested_size_ does not match the values")
        if not sizes:
            return torch.nested.nested_tensor([], dtype=values.dtype)
        size_t = torch.tensor(sizes, dtype=torch.int64)
        strides = [[math.prod(s[i + 1:]) for i in range(len(s))] for s in sizes]
        offsets = [0]
        for s in sizes[:-1]:
            offsets.append(offsets[-1] + math.prod(s))
        return torch._nested_view_from_buffer(values, size_t, torch.tensor(strides, dtype=torch.int64),
                                              torch.tensor(offsets, dtype=torch.int64))
    if layout != "jagged":
        raise _corrupt(tree, f"unknown nested layout {layout!r}")
    offsets = _dense(torch, session, tree["offsets_"])
    lengths = _dense(torch, session, tree["lengths_"]) if "lengths_" in tree else None
    ragged = int(tree.get("ragged_idx_", 1))
    _check_jagged(tree, values, offsets, lengths, ragged)
    return torch.nested.nested_tensor_from_jagged(values, offsets, lengths, jagged_dim=ragged)


def _shape_list(tree: dict[str, Any]) -> list[list[int]]:
    value = tree.get("nested_size_")
    sizes = json.loads(value) if isinstance(value, str) else value
    if not isinstance(sizes, list) or not all(
            isinstance(s, list) and len(s) == len(sizes[0]) and all(isinstance(d, int) and d >= 0 for d in s)
            for s in sizes):
        raise _corrupt(tree, f"bad nested_size_ {value!r}")
    return sizes


def _check_jagged(tree: dict[str, Any], values: Any, offsets: Any, lengths: Any, ragged: int) -> None:
    """torch does not check a jagged layout; a bad one would read out of bounds."""
    indices = (offsets,) if lengths is None else (offsets, lengths)
    if not 1 <= ragged <= values.dim() or offsets.dim() != 1 or offsets.numel() < 1 \
            or any(str(t.dtype) not in ("torch.int64", "torch.int32") for t in indices):
        raise _corrupt(tree, "bad jagged layout")
    extent = values.shape[ragged - 1]
    ends = offsets[1:] if lengths is None else offsets[:-1] + lengths
    if (lengths is not None and (lengths.shape != offsets[:-1].shape or bool((lengths < 0).any()))) \
            or bool((offsets < 0).any()) or bool((offsets[1:] < offsets[:-1]).any()) \
            or bool((ends > extent).any()):
        raise _corrupt(tree, "jagged offsets out of bounds")


def resolve_torch(session: Any, tree: dict[str, Any], pin: Any) -> Any:
    """A torch tree as a tensor over private copy-on-write views (see the
    module docstring); without torch, dense NumPy-compatible ones as NumPy."""
    typename = str(tree.get("typename", ""))
    torch = _torch()
    if torch is None:
        if typename.startswith(DENSE) and "value_type_meta_" in tree:

            return resolve_numpy(session, tree, pin)
        raise ImportError(f"vineyard: {typename} needs torch, which is not installed (without it only "
                          f"dense tensors of dtypes NumPy has can be got, as NumPy arrays)")
    if typename.startswith(DENSE):
        return _dense(torch, session, tree)
    kind = typename.removeprefix(PREFIX).split("<", 1)[0]
    resolver = {"QuantizedTensor": _quantized, "SparseCOOTensor": _sparse,
                "SparseCompressedTensor": _sparse, "NestedTensor": _nested}.get(kind)
    if resolver is None:
        raise _corrupt(tree, "unknown torch object")
    return resolver(torch, session, tree)


def register() -> None:
    register_builder("torch.Tensor", build_torch)
    register_resolver(DENSE, resolve_torch)
    register_resolver(PREFIX, resolve_torch)
