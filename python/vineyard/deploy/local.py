"""Upstream's ``vineyard.deploy.local``: local daemons for a process, over
:func:`vineyard.deploy.launch` (the one launcher).

``vineyard.deploy`` is a module of ours (deploy.py); it names this folder as
its ``__path__``, so that ``import vineyard.deploy.local`` finds this file.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import socket as socketlib
from collections.abc import Iterator
from typing import Any

from .. import deploy

__all__ = ["get_current_socket", "shutdown", "start_vineyardd", "try_init"]


@contextlib.contextmanager
def start_vineyardd(meta: str | None = "local", etcd_endpoints: str | None = None, etcd_prefix: str | None = None,
                    vineyardd_path: str | None = None, size: str | None = "", socket: str | None = None,
                    rpc: bool = True, rpc_socket_port: int | str = 9600,
                    debug: bool = False) -> Iterator[tuple[Any, str, str | None]]:
    """Runs one daemon until the block ends; yields ``(process, socket,
    etcd_endpoints)`` as upstream's. ``meta="etcd"`` without
    ``etcd_endpoints`` has the daemon launch an etcd of its own on a free
    local port (its ``--etcd-cmd``: env V6D_ETCD, else ``etcd`` on PATH),
    stopped with it, as upstream's launches one. Differences: the default
    metadata backend is ``local`` (ours needs no etcd), the default size is
    1Gi, and ``debug`` shows the daemon's output."""
    args = ["--meta", meta or "local"]
    if meta == "etcd":
        if not etcd_endpoints:
            cmd = os.environ.get("V6D_ETCD") or shutil.which("etcd")
            if not cmd:
                raise ValueError("vineyard: meta='etcd' without etcd_endpoints launches etcd, but none was found "
                                 "(set V6D_ETCD or put etcd on PATH), or pass etcd_endpoints")
            etcd_endpoints = f"http://127.0.0.1:{_free_port()}"
            args += ["--etcd-cmd", cmd]
        args += ["--etcd-endpoint", etcd_endpoints]
        if etcd_prefix:
            args += ["--etcd-prefix", etcd_prefix]
    if rpc:
        args += ["--rpc-socket-port", str(rpc_socket_port)]
    with deploy.launch(size or "1Gi", socket, args, rpc=rpc, binary=vineyardd_path, quiet=not debug) as d:
        yield d.proc, d.socket, etcd_endpoints


def _free_port() -> int:
    with socketlib.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_contexts: dict[str, contextlib.AbstractContextManager] = {}


def try_init() -> str:
    """Starts a local daemon for this process (stopped by :func:`shutdown`
    or at exit), sets VINEYARD_IPC_SOCKET to its socket and returns it.
    Raises ValueError when VINEYARD_IPC_SOCKET is already set (a daemon is
    there), as upstream's."""
    if "VINEYARD_IPC_SOCKET" in os.environ:
        raise ValueError(f"vineyard: VINEYARD_IPC_SOCKET is already set ({os.environ['VINEYARD_IPC_SOCKET']}): "
                         "a daemon may be running already")
    ctx = start_vineyardd(meta="local", rpc=False)
    _, socket, _ = ctx.__enter__()
    _contexts[socket] = ctx
    os.environ["VINEYARD_IPC_SOCKET"] = socket
    return socket


def get_current_socket() -> str:
    """The socket of the daemon :func:`try_init` started; ValueError if none."""
    if not _contexts:
        raise ValueError("vineyard: no local daemon: call vineyard.deploy.local.try_init() first")
    return next(iter(_contexts))


def shutdown() -> None:
    """Stops the daemons :func:`try_init` started and unsets
    VINEYARD_IPC_SOCKET (only then: a socket set by someone else stays)."""
    if _contexts:
        for socket in reversed(list(_contexts)):
            _contexts.pop(socket).__exit__(None, None, None)
        os.environ.pop("VINEYARD_IPC_SOCKET", None)


atexit.register(shutdown)
