"""Streams through the C ABI (v6d_create_stream ... v6d_drop_stream), a
UNIX-socket writer and a TCP one, against the real daemon."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from vineyard.deploy import start_vineyardd


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_c_streams(c_programs: Path) -> None:
    port = free_port()
    with start_vineyardd(size="64Mi", args=["--rpc-socket-port", str(port)]) as sock:
        for args in ([sock], [sock, f"127.0.0.1:{port}"]):
            r = subprocess.run([str(c_programs / "stream_test"), *args], capture_output=True, text=True, timeout=60,
                               check=False)
            assert r.returncode == 0, (args, r.stderr)
            assert r.stdout.strip() == "ok"
