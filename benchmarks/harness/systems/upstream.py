"""Upstream Vineyard (v6d-io/v6d, PyPI ``vineyard`` + ``vineyard-bdist``), run in its own
virtual environment: its daemon through ``python -m vineyard`` (local metadata, no TCP),
its client through ``vineyard.connect(socket)``, ``client.put`` / ``client.get``."""

from __future__ import annotations

import sys
import time
from typing import Any

from .. import daemons
from .base import DaemonClient


class Upstream(DaemonClient):
    name = "upstream"

    @classmethod
    def connect(cls, socket: str) -> Any:
        import vineyard

        deadline = time.monotonic() + 30
        while True:
            try:
                return vineyard.connect(socket)
            except Exception:
                if time.monotonic() > deadline:  # the daemon may still be starting its meta service
                    raise
                time.sleep(0.1)

    def start(self, cfg: dict[str, Any]) -> dict[str, Any]:
        import vineyard

        self.daemon = daemons.upstream(sys.executable, int(cfg["arena"]), cfg.get("log"))
        self.client = self.connect(self.daemon.socket)
        return {"version": vineyard.__version__, "module": vineyard.__file__}

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
