"""Upstream's RPC client (``vineyard.connect(host, port)`` of the pinned
0.24.2 package) against our TCP listener, for what it supports: blobs and
metadata cross both ways between it and our clients (issue 11, item 7)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import vineyard

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rpc-upstream")
    sock, port = str(tmp / "ours.sock"), _free_port()
    binary = os.environ.get("VINEYARDD", str(ROOT / "build" / "vineyardd"))
    proc = subprocess.Popen(
        [binary, "--socket", sock, "--size", "256Mi", "--rpc-socket-port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not os.path.exists(sock):
        assert proc.poll() is None and time.monotonic() < deadline, "vineyardd did not start"
        time.sleep(0.05)
    yield sock, port
    proc.terminate()
    proc.wait(20)


def _upstream(python: str, code: str) -> dict:
    out = subprocess.run(
        [python, "-c", textwrap.dedent(code)], check=False, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, f"upstream's client failed:\n{out.stderr[-3000:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_upstream_rpc_client_reads_what_ours_put(daemon, upstream_python):
    sock, port = daemon
    value = np.arange(1000, dtype=np.int64).reshape(20, 50)
    with vineyard.connect(sock) as c:
        oid = c.put(value)
        c.persist(oid)
        got = _upstream(
            upstream_python,
            f"""
            import json, vineyard
            c = vineyard.connect("127.0.0.1", {port})
            a = c.get(vineyard.ObjectID({int(oid)}))
            m = c.get_meta(vineyard.ObjectID({int(oid)}))
            print(json.dumps({{"sum": int(a.sum()), "shape": list(a.shape), "typename": m.typename}}))
        """,
        )
    assert got == {"sum": int(value.sum()), "shape": [20, 50], "typename": "vineyard::Tensor<int64>"}


def test_ours_reads_what_upstream_rpc_client_put(daemon, upstream_python):
    sock, port = daemon
    got = _upstream(
        upstream_python,
        f"""
        import json, numpy as np, vineyard
        c = vineyard.connect("127.0.0.1", {port})
        oid = c.put(np.arange(300, dtype=np.float64))
        print(json.dumps({{"id": int(oid)}}))
    """,
    )
    with vineyard.connect(sock) as c:
        arr = c.get(vineyard.ObjectID(got["id"]))
    assert arr.dtype == np.float64 and (arr == np.arange(300, dtype=np.float64)).all()
