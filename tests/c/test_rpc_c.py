"""A C client over TCP (v6d_connect_rpc) against the real daemon."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from vineyard.deploy import start_vineyardd


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_c_rpc_put_get(c_programs: Path) -> None:
    port = free_port()
    with start_vineyardd(size="64Mi", args=["--rpc-socket-port", str(port)]) as sock:
        r = subprocess.run([str(c_programs / "rpc_test"), f"127.0.0.1:{port}", sock], capture_output=True,
                           text=True, timeout=60, check=False)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "ok"


def test_c_rpc_secret_refused(c_programs: Path, tmp_path: Path) -> None:
    port = free_port()
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    with start_vineyardd(size="16Mi", args=["--rpc-socket-port", str(port), "--rpc-auth-file", str(secret)]):
        for wrong in ("", "s3cre", "wrong"):
            r = subprocess.run([str(c_programs / "rpc_test"), "refused", f"127.0.0.1:{port}", wrong],
                               capture_output=True, text=True, timeout=60, check=False)
            assert r.returncode == 0, (wrong, r.stderr)
