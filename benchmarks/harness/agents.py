"""The harness side of the agent protocol, and the peers' virtual environments.

Ours runs with the checkout's environment (PYTHONPATH=python, V6D_LIBRARY, VINEYARDD).
shm and pickle run with the harness's own Python. Ray and upstream Vineyard run in
virtual environments under build/bench/, made on first use from the pinned
benchmarks/requirements-*.txt plus NumPy, pandas and pyarrow at the versions
requirements-dev.txt pins (so every peer works on the same data with the same
libraries as ours). They are made from the base interpreter, without
``--system-site-packages``: nothing leaks in from the interpreter ``make bench`` runs. A peer whose environment cannot be made or whose agent
does not start is skipped, with the reason.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from . import daemons

BENCH = Path(__file__).resolve().parents[1]
ROOT = BENCH.parent
VENVS = ROOT / "build" / "bench"

# Peers that need their own environment: name -> requirements file.
REQUIREMENTS = {"ray": BENCH / "requirements-ray.txt", "upstream": BENCH / "requirements-upstream.txt"}
# Ours pins these; every peer's environment gets the same versions (-c).
DEV_REQUIREMENTS = ROOT / "requirements-dev.txt"
SHARED_PACKAGES = ["numpy", "pandas", "pyarrow"]


class Skip(Exception):
    """The system cannot run here; the message says why."""


def ensure_venv(name: str, log: IO[str]) -> str:
    """Returns the Python of the peer's environment, creating it (pip install of the
    pinned requirements) when missing or when the requirements changed."""
    req = REQUIREMENTS[name]
    venv = VENVS / f"venv-{name}"
    python = venv / "bin" / "python"
    stamp = venv / ".bench-stamp"
    want = hashlib.sha256(req.read_bytes() + DEV_REQUIREMENTS.read_bytes() + sys.version.encode()).hexdigest()
    if python.exists() and stamp.exists() and stamp.read_text() == want:
        return str(python)
    print(f"bench: making the {name} environment {venv} (first run only; pip may take minutes)", flush=True)
    base = getattr(sys, "_base_executable", "") or sys.executable
    steps = [[base, "-m", "venv", "--clear", str(venv)],
             [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", "-r", str(req),
              "-c", str(DEV_REQUIREMENTS), *SHARED_PACKAGES]]
    for argv in steps:
        try:
            proc = subprocess.run(argv, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise Skip(f"{' '.join(argv[:4])}: {e}") from e
        log.write(proc.stdout)
        if proc.returncode != 0:
            tail = " | ".join(proc.stdout.strip().splitlines()[-3:])
            raise Skip(f"pip install -r {req.name} failed ({proc.returncode}): {tail}")
    stamp.write_text(want)
    return str(python)


def environment(name: str) -> dict[str, str]:
    """The environment of an agent: ours sees the checkout's package, peers never do."""
    env = dict(os.environ)
    paths = [str(BENCH)]
    if name == "ours":
        paths.insert(0, str(ROOT / "python"))
    else:
        env.pop("V6D_LIBRARY", None)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    # OpenBLAS's idle threads spin for a while after each NumPy call; on a small
    # machine they steal the CPU the figures measure, for every system alike.
    env["OPENBLAS_NUM_THREADS"] = "1"
    return env


class AgentProcess:
    """An agent subprocess; ``call`` sends one command and waits for its reply."""

    def __init__(self, name: str, python: str, log_path: Path) -> None:
        self.name = name
        log = daemons.log_fd(str(log_path))
        try:
            self.proc = subprocess.Popen([python, "-m", "harness.agent", name], cwd=str(BENCH), env=environment(name),
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         start_new_session=True)
        finally:
            os.close(log)
        self._sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self._sel.register(self.proc.stdout, selectors.EVENT_READ)
        self._buf = b""

    def call(self, cmd: str, timeout: float = 600, **args: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write((json.dumps({"cmd": cmd, **args}) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise RuntimeError(f"{self.name} agent exited with status {self.proc.poll()}") from None
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise TimeoutError(f"{self.name} agent: {cmd} took more than {timeout:.0f} s")
            if self._sel.select(left):
                chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    raise RuntimeError(f"{self.name} agent exited with status {self.proc.wait()} during {cmd}")
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):  # stopping anyway
                self.call("stop", timeout=120)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """Kills the agent and what it started (its own process group)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
