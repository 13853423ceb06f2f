"""An agent run by an interpreter (upstream's venv or ours): reads JSON lines
``{"cmd": "put"|"get"|"delete"|"loop", ...}`` on stdin and answers one JSON line
each, ``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``."""

from __future__ import annotations

import json
import os
import sys
import traceback
import warnings

warnings.simplefilter("ignore")

import numpy as np
import vineyard

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from values import VALUES, check

# Upstream's reader is checked by data, not by pandas internals (values.check).
LENIENT = os.environ.get("INTEROP_CLIENT") == "upstream"
# The fields of upstream's client.status.
STATUS_FIELDS = ("instance_id", "deployment", "memory_usage", "memory_limit", "deferred_requests",
                 "ipc_connections", "rpc_connections")


def main() -> None:
    client = vineyard.connect(sys.argv[1])
    for line in sys.stdin:
        req = json.loads(line)
        try:
            out: dict = {"ok": True}
            cmd = req["cmd"]
            if cmd == "put":
                out["id"] = repr(client.put(VALUES[req["kind"]]()))
            elif cmd == "get":
                value = client.get(vineyard.ObjectID(req["id"]))
                if type(value).__name__ == "Object":  # upstream's get when no resolver matches
                    raise TypeError(f"unsupported typename {value.typename}")
                check(req["kind"], value, lenient=LENIENT)
            elif cmd == "delete":
                client.delete(vineyard.ObjectID(req["id"]))
            elif cmd == "info":
                out["version"] = client.version
                out["meta"] = {str(k): v for k, v in client.meta.items()}
                status = client.status
                out["status"] = {k: getattr(status, k) for k in STATUS_FIELDS}
            elif cmd == "list":
                out["n"] = len(client.list_metadatas(req.get("pattern", "*"), limit=req.get("limit", 1000)))
            elif cmd == "loop":  # put → get → delete of a large array, n times
                arr = np.ones(req["mib"] << 17, dtype="float64")
                for _ in range(req["n"]):
                    oid = client.put(arr)
                    got = client.get(oid)
                    assert got.shape == arr.shape
                    del got
                    client.delete(oid)
            else:
                raise ValueError(f"unknown command {cmd}")
        except Exception as e:  # noqa: BLE001 (answered, the agent goes on)
            out = {"ok": False, "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-2000:]}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
