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

    def stream_write(kind: str, n: int) -> dict[str, Any]:
        """Makes a stream of kind with upstream's classes and API (both
        clients have them), writes n chunks whose content names their
        number, finishes it; returns its id."""
        stream = stream_class(kind).new(client)
        writer = stream.open_writer(client)
        for i in range(n):
            if kind == "recordbatch":
                writer.append(client.put(stream_batch(i)))
            elif kind == "dataframe":
                writer.write(stream_batch(i))
            else:
                chunk = writer.next(16 + i)
                chunk[:] = bytes([i]) * (16 + i)
        writer.finish()
        return {"id": repr(stream.id)}

    def stream_read(id: str, kind: str, n: int) -> dict[str, Any]:
        """Reads the stream id to its end with upstream's API, checking each
        chunk; returns how many chunks it read."""
        stream = client.get(vineyard.ObjectID(id))
        reader = stream.open_reader(client)
        i = 0
        while True:
            try:
                chunk = reader.next()
            except StopIteration:
                break
            if kind == "byte":
                assert bytes(chunk) == bytes([i]) * (16 + i), (i, bytes(chunk)[:32])
            else:
                assert chunk.equals(stream_batch(i)), (i, chunk)
            i += 1
        assert i == n, (i, n)
        return {"n": i}

    return {"put": put, "get": get, "delete": delete, "info": info, "list": list_, "loop": loop,
            "stream_write": stream_write, "stream_read": stream_read}


def stream_class(kind: str) -> Any:
    import vineyard.io.byte
    import vineyard.io.dataframe
    import vineyard.io.recordbatch

    return {"byte": vineyard.io.byte.ByteStream, "dataframe": vineyard.io.dataframe.DataframeStream,
            "recordbatch": vineyard.io.recordbatch.RecordBatchStream}[kind]


def stream_batch(i: int) -> Any:
    import pyarrow as pa

    return pa.record_batch({"i": pa.array(np.full(50, i, dtype=np.int64)),
                            "x": pa.array(np.arange(50, dtype=np.float64) + i)})


def main() -> None:
    jsonlines.serve(handlers(vineyard.connect(sys.argv[1])), replies=REPLIES, trace_chars=2000)


if __name__ == "__main__":
    main()
