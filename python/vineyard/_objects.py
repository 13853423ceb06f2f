"""What a get returns besides values: :class:`Blob` (a sealed blob's bytes)
and :class:`Object` (an object's metadata, its blobs pinned), with the
registry of Object subclasses per typename."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

import numpy as np

from ._handles import ArrayHolder, Pin
from ._types import BLOB_TYPENAME, ObjectID, ObjectMeta

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["Blob", "Object", "object_type", "register_object_type"]


def _ndarray() -> type:
    return np.ndarray  # a base mypy sees as Any: ndarray's stubs hide its buffer protocol


class Blob(_ndarray()):  # type: ignore[misc]
    """A sealed blob: a read-only uint8 buffer over shared memory (supports the
    buffer protocol: ``memoryview(blob)``, ``bytes(blob)``); ``id``, ``size``,
    ``address`` as upstream. It keeps its blob pinned while it lives."""

    id: ObjectID
    address: int

    def __new__(cls, oid: int, address: int, size: int, pin: Pin | None) -> Self:
        if size:
            base = np.asarray(ArrayHolder(pin, address, (size,), "|u1"))
        else:
            base = np.zeros(0, dtype=np.uint8)
            base.flags.writeable = False
        self: Any = base.view(cls)
        self.id = ObjectID(oid)
        self.address = address
        return self

    def __array_finalize__(self, obj: Any) -> None:
        self.id = getattr(obj, "id", ObjectID())
        self.address = getattr(obj, "address", 0)

    def memoryview(self) -> memoryview:
        """A read-only memoryview of the bytes."""
        return memoryview(self)

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: Any = None, copy: bool | None = None) -> Any:
        """The bytes as a DLPack capsule (``vineyard.dlpack``): versioned and
        flagged read-only for a DLPack 1.0 consumer, legacy otherwise; it
        keeps the blob pinned until the consumer's deleter runs."""
        from .dlpack import export

        return export(self.view(np.ndarray), stream=stream, max_version=max_version, dl_device=dl_device,
                      copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU

    @property
    def buffer(self) -> builtins.memoryview:
        """A read-only memoryview of the bytes (upstream's name)."""
        return memoryview(self)

    @property
    def is_empty(self) -> bool:
        return not self.size

    @property
    def allocated_size(self) -> int:
        """The bytes the blob holds (upstream's name; its size here)."""
        return int(self.size)

    @property
    def typename(self) -> str:
        return BLOB_TYPENAME

    @staticmethod
    def empty() -> Blob:
        """The empty blob (size 0, id ``o8000000000000000``)."""
        return Blob(1 << 63, 0, 0, None)

    def __repr__(self) -> str:
        return f"Blob <{self.id!r}: {self.size} bytes>"


class Object:
    """An object got from the store: its metadata, with ``id``, ``typename``,
    ``nbytes`` and ``member(name)``. One from :meth:`Client.get_object` keeps
    the blobs of its tree pinned while it lives."""

    def __init__(self, meta: ObjectMeta, pin: Pin | None = None) -> None:
        self.meta = meta
        self._pin = pin

    @property
    def id(self) -> ObjectID:
        return self.meta.id

    @property
    def typename(self) -> str:
        return self.meta.typename

    @property
    def nbytes(self) -> int:
        return self.meta.nbytes

    @property
    def signature(self) -> int:
        return self.meta.signature

    @property
    def islocal(self) -> bool:
        return self.meta.islocal

    @property
    def isglobal(self) -> bool:
        return self.meta.isglobal

    @property
    def ispersist(self) -> bool:
        """Whether the object is persisted (as its tree says when got)."""
        return not self.meta.transient

    def member(self, name: str) -> Object:
        meta = self.meta.member(name)
        return object_type(meta.typename)(meta, self._pin)

    def __getitem__(self, name: str) -> Object:
        return self.member(name)

    def __repr__(self) -> str:
        return f'Object <"{self.id!r}": {self.typename}>'


_object_types: dict[str, type[Object]] = {}


def register_object_type(typename_prefix: str, cls: type[Object]) -> None:
    """Registers the :class:`Object` subclass that ``Client.get_object``
    returns for typenames with this prefix (e.g. one that exposes the Arrow
    PyCapsule interface)."""
    _object_types[typename_prefix] = cls


def object_type(typename: str) -> type[Object]:
    """The Object class for typename: the longest registered prefix wins."""
    best = ""
    for prefix in _object_types:
        if typename.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return _object_types[best] if best else Object
