"""Fixtures of the interop suite: upstream Vineyard's pinned packages in their
own venv (build/bench/venv-upstream, made once by the benchmark harness's
provisioning from benchmarks/requirements-upstream.txt), both daemons, and
agents: one process per client (ours, upstream's) per daemon, so every value
is put in one process and got in another."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


sys.path.insert(0, str(ROOT / "benchmarks"))
try:
    from harness import agents as harness_agents
    from harness import jsonlines
finally:
    sys.path.pop(0)


@pytest.fixture(scope="session")
def upstream_python() -> str:
    """The Python of the upstream venv; made on first use (pip, minutes)."""
    try:
        return harness_agents.ensure_venv("upstream", sys.stderr)
    except harness_agents.Skip as e:
        pytest.fail(f"cannot make upstream's venv: {e}")


def _wait_socket(path: str, proc: subprocess.Popen, log: str) -> None:
    """Waits for upstream's daemon, which has no readiness signal: its socket
    file, then a little more, since it creates the file before it listens."""
    deadline = time.monotonic() + 60
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"daemon did not start: {Path(log).read_text()[-2000:]}")
        time.sleep(0.05)
    time.sleep(0.2)


@pytest.fixture(scope="session")
def sockets(upstream_python: str) -> Iterator[dict[str, str]]:
    """Both daemons, 1 GiB each: {"ours": socket, "upstream": socket}."""
    from vineyard.deploy import launch

    tmp = tempfile.mkdtemp(prefix="v6d-interop-")
    socks = {"ours": f"{tmp}/ours.sock", "upstream": f"{tmp}/upstream.sock"}
    argv = [upstream_python, "-m", "vineyard", "--socket", socks["upstream"], "--size", "1Gi", "--meta=local", "--norpc"]
    with launch("1Gi", socks["ours"], log=f"{tmp}/ours.log"):
        log = f"{tmp}/upstream.log"
        with open(log, "w") as f:
            proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, cwd=tmp, start_new_session=True)
        try:
            _wait_socket(socks["upstream"], proc, log)
            yield socks
        finally:  # in a session of its own: the group is ours to stop
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def client_env(which: str) -> dict[str, str]:
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = "1"
    env["INTEROP_CLIENT"] = which
    if which == "ours":
        env["PYTHONPATH"] = str(ROOT / "python")
        env.setdefault("V6D_LIBRARY", str(ROOT / "build" / "libv6d.so"))
    else:
        env.pop("PYTHONPATH", None)
        env.pop("V6D_LIBRARY", None)
    return env


@pytest.fixture(scope="session")
def agents(upstream_python: str, sockets: dict[str, str],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """agents(client, daemon) -> a client process (agent.py, a jsonlines.Agent: call()
    sends one command), one per client and daemon, made on first use."""
    made: dict[tuple[str, str], jsonlines.Agent] = {}
    logs = tmp_path_factory.mktemp("agents")

    def get(client: str, daemon: str) -> jsonlines.Agent:
        key = (client, daemon)
        if key not in made or made[key].proc.poll() is not None:
            python = upstream_python if client == "upstream" else sys.executable
            made[key] = jsonlines.Agent([python, str(HERE / "agent.py"), sockets[daemon]], name=f"{client} agent on {daemon}",
                                        env=client_env(client), log=logs / f"{client}-{daemon}.log", timeout=120)
        return made[key]

    yield get
    for a in made.values():
        a.close(wait=10)
