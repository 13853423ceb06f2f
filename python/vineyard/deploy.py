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
from collections.abc import Iterator, Sequence

from .client import Client, connect

__all__ = ["daemon_path", "init", "log_path", "shutdown", "start_vineyardd"]

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


def _wait(path: str, proc: subprocess.Popen, timeout: float = 30.0, log: str | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"vineyard: vineyardd exited with status {proc.returncode}{_log_tail(log)}")
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(path)
                return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"vineyard: vineyardd did not listen on {path}{_log_tail(log)}")


def _log_tail(log: str | None, lines: int = 20) -> str:
    """The last lines of the daemon's log file, for an error message."""
    if log is None:
        return ""
    try:
        with open(log, errors="replace") as f:
            tail = f.read().splitlines()[-lines:]
    except OSError:
        return f" (log: {log})"
    return f"; its log {log} ends with:\n" + "\n".join(tail)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _rpc_default(args: Sequence[str]) -> list[str]:
    """``args``, with ``--norpc`` first unless they set up the TCP listener."""
    rpc = any(a.lstrip("-").replace("_", "-").startswith("rpc") for a in args)
    return list(args) if rpc else ["--norpc", *args]


@contextlib.contextmanager
def start_vineyardd(size: str = "1Gi", socket: str | None = None, log: str | None = None,
                    args: Sequence[str] = ()) -> Iterator[str]:
    """Runs a daemon until the block ends and yields its socket path (a fresh
    temp directory under /tmp when ``socket`` is None), as upstream's
    ``vineyard.deploy.local.start_vineyardd`` does. The daemon logs to this
    process's stderr, or with ``log`` appends to that file instead. ``args``
    are more flags; without an ``--rpc...`` one the TCP listener is off
    (``--norpc``), so that daemons never compete for port 9600."""
    tmp = None
    if socket is None:
        tmp = tempfile.mkdtemp(prefix="vineyard-", dir="/tmp")
        socket = os.path.join(tmp, "vineyard.sock")
    with contextlib.ExitStack() as files:
        out = files.enter_context(open(log, "ab")) if log is not None else None
        proc = subprocess.Popen([daemon_path(), "--socket", socket, "--size", str(size), *_rpc_default(args)], stdout=out,
                                stderr=subprocess.STDOUT if out is not None else None)
    try:
        _wait(socket, proc, log=log)
        yield socket
    finally:
        _stop(proc)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


_running: contextlib.ExitStack | None = None
_log: str | None = None


def init(size: str = "1Gi", socket: str | None = None) -> Client:
    """Starts a private daemon for this process (stopped at exit) and returns
    a client connected to it; sets VINEYARD_IPC_SOCKET. Later calls return a
    new client of the same daemon.

    The daemon's log goes to a file, not to this process's output (a
    notebook stays clean): ``vineyardd.log`` in a fresh temp directory, or
    ``<socket>.log`` beside a ``socket`` given; :func:`log_path` names it.
    If the daemon cannot start, the error quotes the end of that log."""
    global _running, _log
    if _running is None:
        stack = contextlib.ExitStack()
        if socket is None:
            tmp = tempfile.mkdtemp(prefix="vineyard-", dir="/tmp")
            stack.callback(shutil.rmtree, tmp, True)
            socket = os.path.join(tmp, "vineyard.sock")
            log = os.path.join(tmp, "vineyardd.log")
        else:
            log = socket + ".log"
        try:
            os.environ["VINEYARD_IPC_SOCKET"] = stack.enter_context(start_vineyardd(size, socket, log=log))
        except BaseException:
            stack.close()
            raise
        _running, _log = stack, log
        atexit.register(shutdown)
    return connect(os.environ["VINEYARD_IPC_SOCKET"])


def log_path() -> str | None:
    """The log file of the daemon :func:`init` started, or None if none runs."""
    return _log


def shutdown() -> None:
    """Stops the daemon ``init`` started (no-op otherwise); a log file in a
    temp directory of init's own goes with it."""
    global _running, _log
    if _running is not None:
        stack, _running, _log = _running, None, None
        stack.close()
