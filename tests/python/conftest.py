"""Fixtures: a real vineyardd per test module, and a client connected to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from vineyard.deploy import start_vineyardd


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
