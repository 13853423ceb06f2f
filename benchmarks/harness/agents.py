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

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import IO

from . import jsonlines

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


class AgentProcess(jsonlines.Agent):
    """An agent subprocess of one system (harness/agent.py); ``call`` sends one command
    and waits for its reply."""

    def __init__(self, name: str, python: str, log_path: Path) -> None:
        super().__init__([python, "-m", "harness.agent", name], name=f"{name} agent", env=environment(name), cwd=str(BENCH),
                         log=log_path, timeout=600)

    def close(self, stop: str | None = "stop", wait: float = 30) -> None:
        super().close(stop, wait)
