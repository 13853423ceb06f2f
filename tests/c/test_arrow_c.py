"""examples/c/arrow_sum.c: a C program that reads a table through the Arrow C
stream interface, against include/v6d.h only, built and run here."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import vineyard

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def arrow_sum() -> Path:
    lib = Path(os.environ.get("V6D_LIBRARY", str(ROOT / "build" / "libv6d.so")))
    out = ROOT / "build" / "tests" / "arrow_sum"
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{ROOT / 'include'}",
                    str(ROOT / "examples" / "c" / "arrow_sum.c"), "-o", str(out), f"-L{lib.parent}", "-lv6d",
                    f"-Wl,-rpath,{lib.parent}"], check=True)
    return out


def _table() -> pa.Table:
    batches = []
    for b in range(4):
        n = 1000 + 17 * b
        batches.append(pa.record_batch({
            "i": pa.array([None if (k + b) % 7 == 0 else k * (b + 1) for k in range(n)], pa.int64()),
            "d": pa.array([k / 3.0 for k in range(n)], pa.float64()),
            "s": pa.array([str(k) for k in range(n)]),
        }))
    # Slicing gives batches with offsets, and a partial first and last batch.
    return pa.Table.from_batches(batches).slice(123, 3000)


def _run(prog: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(prog), *args], capture_output=True, text=True, timeout=60, check=False)


def test_arrow_sum_matches_pyarrow(c_daemon, arrow_sum):
    t = _table()
    assert any(b.column(0).offset for b in t.to_batches())
    with vineyard.connect(c_daemon) as client:
        oid = client.put(t)
    r = _run(arrow_sum, c_daemon, repr(oid), "i")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["sum", str(pc.sum(t.column("i")).as_py()), "rows", str(t.num_rows),
                                "nulls", str(t.column("i").null_count)]
    r = _run(arrow_sum, c_daemon, repr(oid), "d")
    assert r.returncode == 0, r.stderr
    assert abs(float(r.stdout.split()[1]) - pc.sum(t.column("d")).as_py()) < 1e-6


def test_arrow_sum_errors(c_daemon, arrow_sum):
    with vineyard.connect(c_daemon) as client:
        oid = client.put(_table())
        blob = client.put(b"not arrow")
    r = _run(arrow_sum, c_daemon, repr(oid), "s")
    assert r.returncode == 1 and "format u" in r.stderr
    r = _run(arrow_sum, c_daemon, repr(oid), "nope")
    assert r.returncode == 1 and "no column" in r.stderr
    r = _run(arrow_sum, c_daemon, repr(blob), "i")
    assert r.returncode == 1 and "ObjectTypeError" in r.stderr
