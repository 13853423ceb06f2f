"""Starting daemons: the bundled vineyardd, ``vineyard.init()`` for notebooks."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from .client import connect

__all__ = ["daemon_path", "init", "shutdown", "start_vineyardd"]

def daemon_path() -> str:
    """The daemon binary: env VINEYARDD, the package's bin/vineyardd, or the
    checkout's build/vineyardd."""
    here = os.path.dirname(os.path.abspath(__file__))
    tried: list[str] = []
    for cand in (os.environ.get("VINEYARDD"), os.path.join(here, "bin", "vineyardd"),
                 os.path.join(os.path.dirname(os.path.dirname(here)), "build", "vineyardd")):
        if cand:
            tried.append(cand)
            if os.access(cand, os.X_OK):
                return cand
    raise FileNotFoundError("vineyard: vineyardd not found (tried {})".format(", ".join(tried)))


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


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def start_vineyardd(size: str = "1Gi", socket: str | None = None) -> Iterator[str]:
    """Runs a daemon until the block ends and yields its socket path (a fresh
    temp directory under /tmp when ``socket`` is None), as upstream's
    ``vineyard.deploy.local.start_vineyardd`` does."""
    tmp = None
    if socket is None:
        tmp = tempfile.mkdtemp(prefix="vineyard-", dir="/tmp")
        socket = os.path.join(tmp, "vineyard.sock")
    proc = subprocess.Popen([daemon_path(), "--socket", socket, "--size", str(size)])
    try:
        _wait(socket, proc)
        yield socket
    finally:
        _stop(proc)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


_running: contextlib.ExitStack | None = None


def init(size: str = "1Gi", socket: str | None = None, **kw: Any) -> Any:
    """Starts a private daemon for this process (stopped at exit) and returns
    a client connected to it; sets VINEYARD_IPC_SOCKET."""
    global _running
    if _running is None:
        stack = contextlib.ExitStack()
        os.environ["VINEYARD_IPC_SOCKET"] = stack.enter_context(start_vineyardd(size, socket))
        _running = stack
        atexit.register(shutdown)
    return connect(os.environ["VINEYARD_IPC_SOCKET"])


def shutdown() -> None:
    """Stops the daemon ``init`` started (no-op otherwise)."""
    global _running
    if _running is not None:
        stack, _running = _running, None
        stack.close()
