"""Fixtures: a real vineyardd per test module, and a client connected to it."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator

import pytest
from vineyard.deploy import _wait, daemon_path


@pytest.fixture(scope="module")
def vineyard_socket() -> Iterator[str]:
    tmp = tempfile.mkdtemp(prefix="v6d-py-", dir="/tmp")
    sock = os.path.join(tmp, "v.sock")
    proc = subprocess.Popen([daemon_path(), "--socket", sock, "--size", "1Gi"])
    try:
        _wait(sock, proc)
        yield sock
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def client(vineyard_socket: str):
    import vineyard

    c = vineyard.connect(vineyard_socket)
    yield c
    c.close()
