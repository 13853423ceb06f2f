"""Spilling through the C ABI (v6d_evict, v6d_load, v6d_unpin) against a real
daemon started with --spill-path."""

from __future__ import annotations

import subprocess
from pathlib import Path

from vineyard.deploy import start_vineyardd


def test_c_spill(c_programs: Path, tmp_path: Path) -> None:
    with start_vineyardd(size="64Mi", args=["--spill-path", str(tmp_path / "spill")]) as sock:
        r = subprocess.run([str(c_programs / "spill_test"), sock], capture_output=True, text=True, timeout=60,
                           check=False)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "ok"
