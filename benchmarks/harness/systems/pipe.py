"""Pickle through a ``multiprocessing`` pipe: the producer keeps its objects in its own
heap; a get is a request over the pipe answered by ``Connection.send(obj)`` (pickle,
write), then ``recv`` (read, unpickle) in the consumer. Nothing is stored by a put, so
put figures do not apply; a get copies the data twice (pickle and unpickle)."""

from __future__ import annotations

import itertools
import multiprocessing as mp
import threading
from typing import Any

from .base import NotApplicable, System


class Pipe(System):
    name = "pickle"
    can_put = False
    concurrent = False

    def __init__(self) -> None:
        self.objects: dict[int, Any] = {}
        self._ids = itertools.count(1)
        self._conn: Any = None
        self._child: Any = None

    def start(self, cfg: dict[str, Any]) -> dict[str, Any]:
        import pickle
        import platform

        return {"version": f"Python {platform.python_version()}, pickle protocol {pickle.DEFAULT_PROTOCOL}"}

    def attach_info(self) -> Any:
        # One pipe per consumer, served by a thread of the producer.
        self._conn, self._child = mp.get_context("spawn").Pipe()
        threading.Thread(target=self._serve, args=(self._conn,), daemon=True).start()
        return self._child

    def _serve(self, conn: Any) -> None:
        try:
            while True:
                conn.send(self.objects[conn.recv()])
        except (EOFError, OSError):
            pass

    @classmethod
    def attach(cls, info: Any) -> Pipe:
        if info is None:
            raise NotApplicable("the pickle pipe has no shared store to attach to")
        self = cls()
        self._conn = info
        return self

    def put(self, value: Any) -> Any:
        ref = next(self._ids)
        self.objects[ref] = value
        return ref

    def get(self, ref: Any) -> Any:
        self._conn.send(ref)
        return self._conn.recv()

    def delete(self, refs: list[Any]) -> None:
        for ref in refs:
            self.objects.pop(ref, None)


SYSTEM = Pipe
