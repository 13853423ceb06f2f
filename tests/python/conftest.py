"""Fixtures: a real vineyardd per test module, and a client connected to it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from vineyard.deploy import launch, start_vineyardd


@pytest.fixture(scope="module")
def vineyard_socket() -> Iterator[str]:
    with start_vineyardd(size="1Gi") as sock:
        yield sock


@pytest.fixture
def client(vineyard_socket: str):
    import vineyard

    c = vineyard.connect(vineyard_socket)
    yield c
    c.close()


@pytest.fixture
def private_daemon(tmp_path) -> Iterator[tuple[subprocess.Popen, str]]:
    """A daemon of this test only, that the test may kill: (process, socket)."""
    d = launch("64Mi", str(tmp_path / "vineyard.sock"), quiet=True)
    try:
        yield d.proc, d.socket
    finally:
        d.kill()
