"""Fixtures for the C ABI tests: a real daemon and the compiled C programs."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from vineyard.deploy import start_vineyardd

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"


@pytest.fixture(scope="module")
def c_daemon() -> Iterator[str]:
    with start_vineyardd(size="64Mi") as sock:
        yield sock


@pytest.fixture(scope="session")
def c_programs() -> Path:
    lib = Path(os.environ.get("V6D_LIBRARY", str(BUILD / "libv6d.so")))
    out = BUILD / "tests"
    out.mkdir(parents=True, exist_ok=True)
    for src in sorted(Path(__file__).parent.glob("*.c")):
        subprocess.run(
            ["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{ROOT / 'include'}",
             str(src), "-o", str(out / src.stem), f"-L{lib.parent}", "-lv6d",
             f"-Wl,-rpath,{lib.parent}"],
            check=True,
        )
    return out
