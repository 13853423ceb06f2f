"""Upstream Vineyard (v6d-io/v6d, PyPI ``vineyard`` + ``vineyard-bdist``), run in its own
virtual environment: its daemon through ``python -m vineyard`` (local metadata, no TCP),
its client through ``vineyard.connect(socket)``, ``client.put`` / ``client.get``."""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any

from .. import daemons
from .base import System


def _connect(sock: str) -> Any:
    import vineyard

    deadline = time.monotonic() + 30
    while True:
        try:
            return vineyard.connect(sock)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


class Upstream(System):
    name = "upstream"

    def __init__(self) -> None:
        self.daemon: Any = None
        self.client: Any = None

    def start(self, cfg: dict[str, Any]) -> dict[str, Any]:
        import vineyard

        self.daemon = daemons.upstream(sys.executable, int(cfg["arena"]), cfg.get("log"))
        self.client = _connect(self.daemon.socket)
        return {"version": vineyard.__version__, "module": vineyard.__file__}

    def stop(self) -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):  # best effort at teardown
                self.client.close()
            self.client = None
        if self.daemon is not None:
            self.daemon.stop()
            self.daemon = None

    def attach_info(self) -> Any:
        return self.daemon.socket

    @classmethod
    def attach(cls, info: Any) -> Upstream:
        self = cls()
        self.client = _connect(info)
        return self

    def detach(self) -> None:
        with contextlib.suppress(Exception):  # best effort at teardown
            self.client.close()

    def put(self, value: Any) -> Any:
        return int(self.client.put(value))

    def get(self, ref: Any) -> Any:
        import vineyard

        return self.client.get(vineyard.ObjectID(ref))

    def delete(self, refs: list[Any]) -> None:
        import vineyard

        if refs:
            self.client.delete([vineyard.ObjectID(r) for r in refs])


SYSTEM = Upstream
