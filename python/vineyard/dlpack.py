"""DLPack: hand what a get returns to any tensor library without a copy, and
put any DLPack producer.

Export. The NumPy arrays a get returns are read-only views of the store, and
NumPy's own ``__dlpack__`` exports them: to a consumer that asks for DLPack
1.0 (``max_version=(1, 0)``: ``np.from_dlpack``, recent torch and JAX) a
versioned capsule (``"dltensor_versioned"``) with ``DLPACK_FLAG_BITMASK_READ_ONLY``
set. NumPy refuses the legacy capsule (``"dltensor"``, which cannot say
read-only) for a read-only array; :func:`producer` wraps an array in a
producer that makes one anyway for the consumers that ask for it (JAX up to
0.10), and :func:`to_dlpack` makes the capsule itself for the consumers that
take capsules (``tf.experimental.dlpack.from_dlpack``):
the consumer gets the store's read-only pages as they are, and a write through
it faults (SIGSEGV) instead of changing the stored value. :class:`vineyard.Blob`
exports both kinds by itself (versioned when asked, legacy otherwise).

Either capsule holds the array it was made from, and so the get's pin: the
object's blobs stay pinned while the consumer holds the capsule or anything
it made of it, and are released when the consumer's deleter runs (a delete
meanwhile hides the object; its memory is freed only then).

Import. ``client.put`` accepts any object with ``__dlpack__`` and
``__dlpack_device__`` that no other builder takes (a JAX array, a CuPy array
on the host, ...) and a bare DLPack capsule (what ``to_dlpack`` functions
return): it takes a zero-copy NumPy view of the producer's memory
(``np.from_dlpack``) and stores it as a ``vineyard::Tensor``, one copy into
the store. Only host memory can be stored: a tensor on a device is an error
that says to copy it to the CPU first.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

__all__ = ["DLPACK_CPU", "DLPackCapsule", "DLPackView", "export", "from_producer", "producer", "to_dlpack"]

# DLDeviceType of host memory (dlpack.h: kDLCPU).
DLPACK_CPU = 1
_DEVICE_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA host", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI",
                 10: "ROCm", 11: "ROCm host", 13: "CUDA managed", 14: "oneAPI", 15: "WebGPU", 16: "Hexagon"}


class _WritableAlias:
    """A writable ``__array_interface__`` over the memory of a read-only
    array, holding that array (and with it, through its base, the get's
    pin): NumPy exports a legacy capsule only for a writable array."""

    __slots__ = ("__array_interface__", "array")

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        iface = dict(array.__array_interface__)
        iface["data"] = (iface["data"][0], False)
        self.__array_interface__ = iface


def export(arr: np.ndarray, *, stream: Any = None, max_version: tuple[int, int] | None = None,
           dl_device: Any = None, copy: bool | None = None) -> Any:
    """The DLPack capsule of ``arr`` for a consumer that called
    ``__dlpack__(stream=..., max_version=..., dl_device=..., copy=...)``:
    versioned (read-only flag set when ``arr`` is read-only) when the
    consumer takes DLPack 1.0, legacy otherwise (also for a read-only
    ``arr``, see the module's doc). ``copy=True`` exports a private, writable
    copy."""
    if stream is not None and stream != -1:
        raise BufferError(f"vineyard: DLPack stream {stream!r} given for host memory (use None)")
    if dl_device is not None and tuple(dl_device) != (DLPACK_CPU, 0):
        raise BufferError(f"vineyard: DLPack export to device {tuple(dl_device)!r}: the store's memory is "
                          "on the CPU, (1, 0)")
    if copy:
        arr = np.array(arr, copy=True)  # the consumer's own; no other copy below
    if max_version is not None and max_version[0] >= 1:
        return arr.__dlpack__(max_version=max_version)
    if not arr.flags.writeable:
        arr = np.asarray(_WritableAlias(arr))
    return arr.__dlpack__()


def to_dlpack(value: Any, *, versioned: bool = False) -> Any:
    """A DLPack capsule of ``value`` (a NumPy array a get returned, a
    :class:`vineyard.Blob`, any array NumPy views without a copy): legacy
    (``"dltensor"``, what ``tf.experimental.dlpack.from_dlpack`` takes) unless
    ``versioned``. The capsule pins what ``value`` pins until its consumer's
    deleter runs (or the capsule, never consumed, is collected)."""
    return producer(value).__dlpack__(max_version=(1, 0) if versioned else None)


class DLPackView:
    """A DLPack producer over an array a get returned (:func:`producer`):
    what it exports is what the consumer asks for, the versioned capsule
    flagged read-only for a DLPack 1.0 consumer and the legacy one for the
    others, for which a plain NumPy array refuses read-only memory (JAX's
    ``jnp.from_dlpack`` up to 0.10 asks for legacy)."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: Any = None, copy: bool | None = None) -> Any:
        return export(self.array, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (DLPACK_CPU, 0)

    def __repr__(self) -> str:
        return f"DLPackView <{self.array.dtype}{list(self.array.shape)} at {self.array.ctypes.data:#x}>"


def producer(value: Any) -> DLPackView:
    """A DLPack producer of ``value`` (an array a get returned, a
    :class:`vineyard.Blob`) that any consumer takes, zero-copy: versioned
    and read-only when it asks for DLPack 1.0, legacy otherwise."""
    arr = value.view(np.ndarray) if isinstance(value, np.ndarray) else np.asarray(value)
    return DLPackView(arr)


# ---- import -------------------------------------------------------------

_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.argtypes = [ctypes.py_object]
_capsule_name.restype = ctypes.c_char_p
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_pointer.restype = ctypes.c_void_p


def _is_capsule(value: Any) -> bool:
    return type(value).__name__ == "PyCapsule" and _capsule_name(value) in (b"dltensor", b"dltensor_versioned")


class DLPackCapsule:
    """A DLPack producer over a bare capsule (``"dltensor"`` or
    ``"dltensor_versioned"``), for consumers that take only producers
    (``np.from_dlpack``). A capsule is consumed once."""

    def __init__(self, capsule: Any) -> None:
        if not _is_capsule(capsule):
            raise TypeError(f"vineyard: not an unconsumed DLPack capsule: {capsule!r}")
        self.capsule = capsule

    def __dlpack__(self, **kw: Any) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        name = _capsule_name(self.capsule)
        ptr = _capsule_pointer(self.capsule, name)
        # DLManagedTensor starts with its DLTensor (data pointer, then the
        # device); DLManagedTensorVersioned has version, manager_ctx,
        # deleter and flags (32 bytes) first.
        at = ptr + 8 + (32 if name == b"dltensor_versioned" else 0)
        dev = (ctypes.c_int32 * 2).from_address(at)
        return int(dev[0]), int(dev[1])


def from_producer(value: Any) -> np.ndarray:
    """A NumPy view (no copy) of a DLPack producer or capsule on the host;
    a clear error for one on a device."""
    if _is_capsule(value):
        value = DLPackCapsule(value)
    device = tuple(value.__dlpack_device__())
    if device[0] != DLPACK_CPU:
        name = _DEVICE_NAMES.get(int(device[0]), f"device type {device[0]}")
        raise ValueError(f"vineyard: cannot store a {type(value).__qualname__} on {name} (DLPack device "
                         f"{device!r}): vineyard stores host memory; copy it to the CPU first")
    try:
        return np.from_dlpack(value)
    except (BufferError, TypeError, ValueError, RuntimeError) as e:
        raise TypeError(f"vineyard: cannot store a {type(value).__qualname__} through DLPack: {e}") from e
