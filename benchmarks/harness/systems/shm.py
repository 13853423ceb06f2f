"""``multiprocessing.shared_memory``: put = create a segment and copy the array into
it; get = attach by name and wrap an ``np.ndarray`` over it (no copy); drop = close.
Raw bytes only: DataFrames and Arrow tables do not apply."""

from __future__ import annotations

from multiprocessing import shared_memory
from typing import Any

from .base import System


class _View:
    """An attached segment and the array over it; dropping it closes the segment."""

    def __init__(self, shm: shared_memory.SharedMemory, array: Any) -> None:
        self.shm = shm
        self.array = array
        self.nbytes = array.nbytes

    def __del__(self) -> None:
        self.array = None
        self.shm.close()


class Shm(System):
    name = "shm"
    kinds = frozenset({"array"})

    def __init__(self) -> None:
        self.segments: dict[str, shared_memory.SharedMemory] = {}

    def start(self, cfg: dict[str, Any]) -> dict[str, Any]:
        import platform

        return {"version": "Python " + platform.python_version()}

    def stop(self) -> None:
        self.delete(list(self.segments))

    @classmethod
    def attach(cls, info: Any) -> Shm:
        return cls()

    def put(self, value: Any) -> Any:
        import numpy as np

        seg = shared_memory.SharedMemory(create=True, size=max(value.nbytes, 1))
        np.ndarray(value.shape, value.dtype, buffer=seg.buf)[...] = value
        self.segments[seg.name] = seg
        return (seg.name, value.nbytes)

    def get(self, ref: Any) -> Any:
        import numpy as np

        name, n = ref
        seg = shared_memory.SharedMemory(name=name)
        array = np.ndarray((n,), np.uint8, buffer=seg.buf)
        array.flags.writeable = False
        return _View(seg, array)

    def delete(self, refs: list[Any]) -> None:
        for ref in refs:
            seg = self.segments.pop(ref[0] if isinstance(ref, tuple) else ref, None)
            if seg is not None:
                seg.close()
                seg.unlink()


SYSTEM = Shm
