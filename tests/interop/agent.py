"""An agent run by an interpreter (upstream's venv or ours): answers the JSON-lines
commands of benchmarks/harness/jsonlines.py, ``{"cmd": "put"|"get"|"delete"|"info"|
"list"|"loop", ...}``, with ``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any

warnings.simplefilter("ignore")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.append(str(HERE.parents[1] / "benchmarks"))  # harness.jsonlines

from harness import jsonlines

REPLIES = jsonlines.take_stdout()  # before importing what may print

import numpy as np
import vineyard
from values import VALUES, check

# Upstream's reader is checked by data, not by pandas internals (values.check).
LENIENT = os.environ.get("INTEROP_CLIENT") == "upstream"
# The fields of upstream's client.status.
STATUS_FIELDS = ("instance_id", "deployment", "memory_usage", "memory_limit", "deferred_requests",
                 "ipc_connections", "rpc_connections")


def handlers(client: Any) -> dict[str, jsonlines.Handler]:
    def put(kind: str) -> dict[str, Any]:
        return {"id": repr(client.put(VALUES[kind]()))}

    def get(id: str, kind: str) -> None:
        value = client.get(vineyard.ObjectID(id))
        if type(value).__name__ == "Object":  # upstream's get when no resolver matches
            raise TypeError(f"unsupported typename {value.typename}")
        check(kind, value, lenient=LENIENT)

    def delete(id: str) -> None:
        client.delete(vineyard.ObjectID(id))

    def info() -> dict[str, Any]:
        status = client.status
        return {"version": client.version, "meta": {str(k): v for k, v in client.meta.items()},
                "status": {k: getattr(status, k) for k in STATUS_FIELDS}}

    def list_(pattern: str = "*", limit: int = 1000) -> dict[str, Any]:
        return {"n": len(client.list_metadatas(pattern, limit=limit))}

    def loop(mib: int, n: int) -> None:
        """put → get → delete of a large array, n times."""
        arr = np.ones(mib << 17, dtype="float64")
        for _ in range(n):
            oid = client.put(arr)
            got = client.get(oid)
            assert got.shape == arr.shape
            del got
            client.delete(oid)

    return {"put": put, "get": get, "delete": delete, "info": info, "list": list_, "loop": loop}


def main() -> None:
    jsonlines.serve(handlers(vineyard.connect(sys.argv[1])), replies=REPLIES, trace_chars=2000)


if __name__ == "__main__":
    main()
