"""The examples' cluster on one machine: etcd (ours, build/v6d-etcd or env
V6D_ETCD; or one you name) and vineyardd processes with --meta etcd (env
VINEYARDD, or build/vineyardd), all stopped and removed on exit."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def etcd(workdir: str, endpoint: str | None = None) -> Iterator[str]:
    """An etcd endpoint: the one given, else a one-member v6d-etcd of ours."""
    if endpoint:
        yield endpoint
        return
    binary = os.environ.get("V6D_ETCD") or str(ROOT / "build" / "v6d-etcd")
    if not os.access(binary, os.X_OK):
        sys.exit(f"no etcd: {binary} is missing (run `make build`, set V6D_ETCD, or pass --etcd-endpoint)")
    url_file = os.path.join(workdir, "etcd.url")
    with open(os.path.join(workdir, "etcd.log"), "wb") as log:
        proc = subprocess.Popen([binary, "-data-dir", os.path.join(workdir, "etcd"), "-port", str(free_port()),
                                 "-peer-port", str(free_port()), "-endpoint-file", url_file],
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not (os.path.exists(url_file) and os.path.getsize(url_file)):
            if proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"etcd did not start: see {workdir}/etcd.log")
            time.sleep(0.05)
        yield Path(url_file).read_text().strip()
    finally:
        proc.terminate()
        proc.wait(30)


@contextlib.contextmanager
def daemons(n: int, size: str = "256Mi", etcd_endpoint: str | None = None) -> Iterator[list[str]]:
    """n daemons of one cluster (a fresh etcd prefix); yields their sockets."""
    import vineyard.deploy

    workdir = tempfile.mkdtemp(prefix="v6d-example-", dir="/tmp")
    try:
        with etcd(workdir, etcd_endpoint) as endpoint, contextlib.ExitStack() as stack:
            prefix = f"example-{os.getpid()}"
            sockets = []
            for i in range(n):
                d = vineyard.deploy.launch(size, os.path.join(workdir, f"d{i}.sock"),
                                           ["--meta", "etcd", "--etcd-endpoint", endpoint, "--etcd-prefix", prefix],
                                           log=os.path.join(workdir, f"d{i}.log"))
                stack.callback(d.stop)
                sockets.append(d.socket)
            yield sockets
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
