"""Starting a daemon (ours or upstream's) on a private socket and stopping it.

Standard library only: the harness uses it without loading libv6d, and agents use it
inside peer environments. Ours starts through the one launcher, python/vineyard/deploy.py
(loaded by its path, so without the vineyard package), which waits for the daemon's
READY line; upstream's has no readiness signal, so for it we wait for the socket.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_DEPLOY = Path(__file__).resolve().parents[2] / "python" / "vineyard" / "deploy.py"


def deploy() -> Any:
    """The checkout's vineyard.deploy module, loaded by its path."""
    mod = sys.modules.get("_v6d_deploy")
    if mod is None:
        spec = importlib.util.spec_from_file_location("_v6d_deploy", _DEPLOY)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules["_v6d_deploy"] = mod
        spec.loader.exec_module(mod)
    return mod


# METRICS_ENV=1 (run.py --metrics) starts our daemons with their metrics listener on (and
# so every request timed), to measure its cost against a run without.
METRICS_ENV = "V6D_BENCH_METRICS"


def free_port() -> int:
    """A TCP port of 127.0.0.1 free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def log_fd(path: str | None) -> int:
    """An fd appending to path (or /dev/null), for a child's stdout; close it after Popen."""
    return os.open(path or os.devnull, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


class Daemon:
    """Upstream's daemon process listening on ``self.socket`` in a private temp directory."""

    def __init__(self, argv: list[str], log: str | None = None, timeout: float = 60.0) -> None:
        self.dir = tempfile.mkdtemp(prefix="v6d-bench-", dir="/tmp")
        self.socket = os.path.join(self.dir, "vineyard.sock")
        self.argv = [*argv, "--socket", self.socket]
        out = log_fd(log)
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        finally:
            os.close(out)
        try:
            self._wait(timeout)
        except BaseException:
            self.stop()
            raise

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.argv[0]} exited with status {self.proc.returncode}: {' '.join(self.argv)}")
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(self.socket)
                    return
            except OSError:
                time.sleep(0.02)
        raise TimeoutError(f"{' '.join(self.argv)} did not listen on {self.socket} within {timeout:.0f} s")

    def stop(self) -> None:
        """Stops the daemon (SIGTERM, then SIGKILL after 30 s) and removes its directory. Idempotent."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def ours(binary: str, size: int, reserve_memory: bool = False, log: str | None = None,
         prefault_ahead: int | None = None) -> Any:
    """Our vineyardd (``binary``) with an arena of ``size`` bytes, no TCP listener, in a
    private temp directory: a vineyard.deploy.Daemon (``socket``, ``proc``, ``stop()``).
    ``prefault_ahead`` sets ``--prefault-ahead`` (None: the daemon's default); its log
    goes to ``log`` (None: dropped)."""
    args = ["--reserve-memory"] if reserve_memory else []
    if prefault_ahead is not None:
        args += ["--prefault-ahead", str(prefault_ahead)]
    if os.environ.get(METRICS_ENV) == "1":
        args += ["--metrics-port", str(free_port())]
    return deploy().launch(size, None, args, binary=binary, log=log, quiet=log is None)


def resident_shmem(pid: int) -> int:
    """Bytes of shared memory process pid maps (RssShmem), 0 when unknown."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssShmem:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def wait_resident(pid: int, nbytes: int, timeout: float = 300.0, still: float = 2.0) -> int:
    """Waits until process pid maps ``nbytes`` of shared memory (a daemon's background
    pre-fault got that far), or its figure stopped growing for ``still`` seconds, or
    ``timeout`` passed; returns the bytes it maps."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while True:
        now = time.monotonic()
        got = resident_shmem(pid)
        if got >= nbytes or now > deadline:
            return got
        if got != last:
            last, since = got, now
        elif now - since > still:
            return got
        time.sleep(0.05)


def upstream(python: str, size: int, log: str | None = None) -> Daemon:
    """Upstream's vineyardd, through ``python -m vineyard`` (it execs the binary that
    vineyard-bdist ships): local metadata, no TCP listener."""
    return Daemon([python, "-m", "vineyard", "--size", str(size), "--meta=local", "--norpc"], log)
