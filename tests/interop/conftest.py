"""Fixtures of the interop suite: upstream Vineyard's pinned packages in their
own venv (build/bench/venv-upstream, made once by the benchmark harness's
provisioning from benchmarks/requirements-upstream.txt), both daemons, and
agents: one process per client (ours, upstream's) per daemon, so every value
is put in one process and got in another."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
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


@pytest.fixture(scope="session")
def upstream_python() -> str:
    """The Python of the upstream venv; made on first use (pip, minutes)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from harness import agents
    finally:
        sys.path.pop(0)
    try:
        return agents.ensure_venv("upstream", sys.stderr)
    except agents.Skip as e:
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


class Agent:
    """A client process (see agent.py); call() sends one command."""

    def __init__(self, python: str, env: dict[str, str], socket: str) -> None:
        self.proc = subprocess.Popen([python, str(HERE / "agent.py"), socket], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)

    def call(self, timeout: float = 120, **req: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise RuntimeError(f"agent exited: {self.stderr()}") from None
        if not self.sel.select(timeout):
            self.proc.kill()
            raise TimeoutError(f"agent: {req} took more than {timeout} s")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"agent exited ({self.proc.wait()}): {self.stderr()}")
        return json.loads(line)

    def stderr(self) -> str:
        self.proc.kill()
        assert self.proc.stderr is not None
        return self.proc.stderr.read()[-3000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


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
def agents(upstream_python: str, sockets: dict[str, str]) -> Iterator[Any]:
    """agents(client, daemon) -> Agent, one process each, made on first use."""
    made: dict[tuple[str, str], Agent] = {}

    def get(client: str, daemon: str) -> Agent:
        key = (client, daemon)
        if key not in made or made[key].proc.poll() is not None:
            python = upstream_python if client == "upstream" else sys.executable
            made[key] = Agent(python, client_env(client), sockets[daemon])
        return made[key]

    yield get
    for a in made.values():
        a.close()
