"""The Python examples of examples/python, run as a user runs them (each
starts etcd and two daemons of one cluster). The DDP one needs torch (CI
installs it: make test WITH_TORCH=1), the Dask one dask.distributed
(requirements-dask.txt)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"


def _run(script: str, *args: str) -> list[str]:
    r = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True, timeout=600,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    return r.stdout.splitlines()


def test_ddp_example_trains_on_local_partitions_zero_copy():
    pytest.importorskip("torch")
    lines = _run("ddp_train.py", "--epochs", "2")
    assert lines[-1] == "OK"
    ranks = [line for line in lines if line.startswith("rank ")]
    assert len(ranks) == 2
    for line in ranks:
        assert "read 2 of 4 partitions (its own), zero-copy True" in line
        assert "weights equal across ranks True" in line


def test_dask_example_matches_pandas():
    pytest.importorskip("distributed")
    lines = _run("dask_dataframe.py")
    assert lines[-1] == "OK: equal to pandas'"
    assert any("vineyard::GlobalDataFrame" in line for line in lines)
