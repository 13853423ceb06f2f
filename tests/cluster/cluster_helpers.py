"""Helpers of the cluster suite (conftest.py's fixture uses them): a real etcd (build/v6d-etcd, an embedded
etcd server run as a process) and real vineyardd processes started with
``--meta etcd``, each with its own socket and arena.

The etcd helper is found through env V6D_ETCD (``make test-python`` sets
it), else in the checkout's build/. When V6D_ETCD names a missing file the
suite fails; when it is unset and build/v6d-etcd does not exist, it is
skipped (run ``make build``).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import vineyard
import vineyard.deploy

ROOT = Path(__file__).resolve().parents[2]

# Short enough that a killed daemon's objects go within seconds, long enough
# that a loaded 2-core machine keeps every live lease.
LEASE_TTL = "3s"
ETCD_TIMEOUT = "2s"


def etcd_path() -> str:
    env = os.environ.get("V6D_ETCD")
    if env:
        if not os.access(env, os.X_OK):
            pytest.fail(f"V6D_ETCD={env} is not an executable (run 'make build')")
        return env
    cand = ROOT / "build" / "v6d-etcd"
    if not os.access(cand, os.X_OK):
        pytest.skip("build/v6d-etcd is missing: run 'make build' (or set V6D_ETCD)")
    return str(cand)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(what: str, cond: Callable[[], Any], timeout: float = 20.0) -> Any:
    """Polls cond until it returns something true, or fails naming what."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            got = cond()
            if got:
                return got
        except vineyard.VineyardException as e:
            last = e
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}" + (f" (last error: {last})" if last else ""))


class Etcd:
    """A v6d-etcd process at a fixed port and data directory, so that it can
    be stopped and started again where its clients expect it."""

    def __init__(self, workdir: str) -> None:
        self.binary = etcd_path()
        self.data_dir = os.path.join(workdir, "etcd-data")
        self.port, self.peer_port = free_port(), free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = os.path.join(workdir, "etcd.log")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        url_file = os.path.join(os.path.dirname(self.data_dir), "etcd.url")
        if os.path.exists(url_file):
            os.remove(url_file)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [self.binary, "-data-dir", self.data_dir, "-port", str(self.port),
                 "-peer-port", str(self.peer_port), "-endpoint-file", url_file],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not (os.path.exists(url_file) and os.path.getsize(url_file) > 0):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"v6d-etcd did not start:\n{Path(self.log).read_text()[-2000:]}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        self.proc = None


class Daemon:
    """A vineyardd --meta etcd process and its socket (vineyard.deploy.launch)."""

    def __init__(self, workdir: str, name: str, etcd: Etcd, prefix: str) -> None:
        self.socket = os.path.join(workdir, f"{name}.sock")
        self.log = os.path.join(workdir, f"{name}.log")
        self.killed = False
        try:
            self.daemon = vineyard.deploy.launch(
                "64Mi", self.socket,
                ["--meta", "etcd", "--rpc-socket-port", "0", "--etcd-endpoint", etcd.endpoint, "--etcd-prefix", prefix,
                 "--etcd-lease-ttl", LEASE_TTL, "--etcd-timeout", ETCD_TIMEOUT, "--check-invariants", "1s"],
                log=self.log)
        except vineyard.deploy.DaemonError as e:
            pytest.fail(f"vineyardd {name} did not start: {e}")
        self.proc = self.daemon.proc

    def connect(self) -> vineyard.Client:
        return vineyard.connect(self.socket)

    def kill(self) -> None:
        """kill -9: no clean stop, so its lease is not revoked."""
        self.killed = True
        self.daemon.kill()

    def stop(self) -> int:
        return self.daemon.stop()


class Cluster:
    """etcd and three daemons a, b, c sharing one prefix."""

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.prefix = "v6d-test-" + uuid.uuid4().hex[:8]
        self.etcd = Etcd(workdir)
        self.etcd.start()
        self.daemons: list[Daemon] = []
        self.a, self.b, self.c = (self.start_daemon(n) for n in "abc")

    def start_daemon(self, name: str) -> Daemon:
        d = Daemon(self.workdir, name, self.etcd, self.prefix)
        self.daemons.append(d)
        return d

    def close(self) -> dict[str, int]:
        """Stops everything; returns the exit status of each daemon that was
        still running, by its log file."""
        statuses = {d.log: d.stop() for d in self.daemons if not d.killed}
        self.etcd.stop()
        return statuses
