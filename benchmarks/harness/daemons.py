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


def ours(binary: str, size: int, reserve_memory: bool = False, log: str | None = None,
         prefault_ahead: int | None = None) -> Daemon:
    """Our vineyardd (``binary``) with an arena of ``size`` bytes; ``prefault_ahead``
    sets ``--prefault-ahead`` (None: the daemon's default)."""
    argv = [binary, "--size", str(size), "--norpc"] + (["--reserve-memory"] if reserve_memory else [])
    if prefault_ahead is not None:
        argv += ["--prefault-ahead", str(prefault_ahead)]
    return Daemon(argv, log)


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
