"""Client timeouts through the C ABI: v6d_set_timeout / v6d_get_timeout, and
a call against a daemon stopped with SIGSTOP."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator

import pytest
from vineyard.deploy import launch


@pytest.fixture
def own_daemon() -> Iterator[tuple[str, subprocess.Popen]]:
    """A daemon of this test alone (it gets stopped), with its process."""
    tmp = tempfile.mkdtemp(prefix="vineyard-", dir="/tmp")
    sock = os.path.join(tmp, "vineyard.sock")
    daemon = launch("16Mi", sock)
    try:
        yield sock, daemon.proc
    finally:
        daemon.stop(timeout=10)  # SIGCONT first
        shutil.rmtree(tmp, ignore_errors=True)


def stop(proc: subprocess.Popen) -> None:
    """Sends SIGSTOP and waits until every thread of proc has stopped: the
    signal reaches one thread first, and until it spreads another thread may
    still serve a request."""
    proc.send_signal(signal.SIGSTOP)
    deadline = time.monotonic() + 30
    while True:
        states = []
        for tid in os.listdir(f"/proc/{proc.pid}/task"):
            try:
                with open(f"/proc/{proc.pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:
                continue  # the thread exited
        if states and all(st in ("T", "t") for st in states):
            return
        assert time.monotonic() < deadline, f"daemon threads did not stop: {states}"
        time.sleep(0.005)


def test_timeout_ranges(c_daemon, c_programs):
    r = subprocess.run([str(c_programs / "timeout_test"), "ranges", c_daemon],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ranges ok"


def test_call_to_stopped_daemon_times_out(own_daemon, c_programs):
    sock, daemon = own_daemon
    prog = subprocess.Popen([str(c_programs / "timeout_test"), "stopped", sock, "300"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert prog.stdout is not None
        assert prog.stdout.readline().strip() == "ready"
        stop(daemon)
        # Without a timeout the call would block until the daemon resumes:
        # the daemon stays stopped until the program has exited.
        out, err = prog.communicate("go\n", timeout=60)
        assert prog.returncode == 0, err
        assert out.strip() == "timeout ok"
        assert "did not reply within 300ms" in err
    finally:
        if prog.poll() is None:
            prog.kill()
            prog.wait()
