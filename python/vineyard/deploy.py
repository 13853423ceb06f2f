"""Starting daemons: the bundled vineyardd, ``vineyard.init()`` for notebooks."""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any, List, Optional

__all__ = ["daemon_path", "init", "shutdown"]

_proc: Optional[subprocess.Popen] = None
_dir: Optional[str] = None


def daemon_path() -> str:
    """The daemon binary: env VINEYARDD, the package's bin/vineyardd, or the
    checkout's build/vineyardd."""
    here = os.path.dirname(os.path.abspath(__file__))
    tried: List[str] = []
    for cand in (os.environ.get("VINEYARDD"), os.path.join(here, "bin", "vineyardd"),
                 os.path.join(os.path.dirname(os.path.dirname(here)), "build", "vineyardd")):
        if cand:
            tried.append(cand)
            if os.access(cand, os.X_OK):
                return cand
    raise FileNotFoundError("vineyard: vineyardd not found (tried %s)" % ", ".join(tried))


def _wait(path: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"vineyard: vineyardd exited with status {proc.returncode}")
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(path)
                return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"vineyard: vineyardd did not listen on {path}")


def init(size: str = "1Gi", socket: Optional[str] = None, **kw: Any) -> Any:
    """Starts a private daemon for this process (stopped at exit) and returns
    a client connected to it; sets VINEYARD_IPC_SOCKET."""
    global _proc, _dir
    from .client import connect

    if _proc is None:
        if socket is None:
            _dir = tempfile.mkdtemp(prefix="vineyard-", dir="/tmp")
            socket = os.path.join(_dir, "vineyard.sock")
        _proc = subprocess.Popen([daemon_path(), "--socket", socket, "--size", str(size)])
        _wait(socket, _proc)
        os.environ["VINEYARD_IPC_SOCKET"] = socket
        atexit.register(shutdown)
    return connect(os.environ["VINEYARD_IPC_SOCKET"])


def shutdown() -> None:
    """Stops the daemon ``init`` started (no-op otherwise)."""
    global _proc, _dir
    if _proc is not None:
        _proc.terminate()
        try:
            _proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _proc.kill()
        _proc = None
    if _dir is not None:
        shutil.rmtree(_dir, ignore_errors=True)
        _dir = None
