"""Puts of DLPack producers (``vineyard.dlpack``): any value with
``__dlpack__`` and ``__dlpack_device__`` that no type builder takes, and
bare DLPack capsules, are stored as a ``vineyard::Tensor`` through a
zero-copy NumPy view of their memory; a get returns that NumPy array, which
exports DLPack back."""

from __future__ import annotations

from typing import Any

from .._types import ObjectID, ObjectMeta
from .registry import register_protocol_builder
from .tensor import build_numpy

__all__ = ["register"]


def _accepts(value: Any) -> bool:
    klass = type(value)
    if hasattr(klass, "__dlpack__") and hasattr(klass, "__dlpack_device__"):
        return True
    if klass.__name__ == "PyCapsule":
        from ..dlpack import _is_capsule

        return _is_capsule(value)
    return False


def _build(session: Any, value: Any, **kw: Any) -> ObjectID | ObjectMeta:
    from ..dlpack import from_producer

    return build_numpy(session, from_producer(value), **kw)


def register() -> None:
    register_protocol_builder(_accepts, _build)
