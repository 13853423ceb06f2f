"""Starting a daemon (ours or upstream's) on a private socket and stopping it.

Standard library only: the harness uses it without loading libv6d, and agents use it
inside peer environments.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time


def log_fd(path: str | None) -> int:
    """An fd appending to path (or /dev/null), for a child's stdout; close it after Popen."""
    return os.open(path or os.devnull, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


class Daemon:
    """A daemon process listening on ``self.socket`` in a private temp directory."""

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


def ours(binary: str, size: int, reserve_memory: bool = False, log: str | None = None) -> Daemon:
    """Our vineyardd (``binary``) with an arena of ``size`` bytes."""
    argv = [binary, "--size", str(size), "--norpc"] + (["--reserve-memory"] if reserve_memory else [])
    return Daemon(argv, log)


def upstream(python: str, size: int, log: str | None = None) -> Daemon:
    """Upstream's vineyardd, through ``python -m vineyard`` (it execs the binary that
    vineyard-bdist ships): local metadata, no TCP listener."""
    return Daemon([python, "-m", "vineyard", "--size", str(size), "--meta=local", "--norpc"], log)
