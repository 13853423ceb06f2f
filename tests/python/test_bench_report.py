"""The benchmark report (benchmarks/harness/report.py) on made-up results: targets,
Markdown, JSON and the chart, without running anything. `make bench-smoke` runs the
harness itself."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from harness import report
from harness.plan import MODES, Figure, Selection, system_figures
from harness.results import OK, SKIPPED, Result
from harness.stats import percentile, summarize
from harness.units import parse_size, size_key

US = 1e-6
MACHINE = {"cpu": "Test CPU", "cores": 2, "ram_bytes": 1 << 34, "kernel": "6.0", "commit": "abc1234",
           "versions": {"python": "3.11", "go": "go1.26", "numpy": "2.4", "pandas": "3.1", "pyarrow": "26"},
           "date": "2026-01-01 00:00 UTC", "argv": ["benchmarks/run.py", "--quick"], "load_before": [0.1, 0.1, 0.1],
           "load_after": [0.2, 0.2, 0.2]}


def _r(fid: str, system: str, seconds: float, kind: str = "latency", nbytes: int = 0, group: str = "small",
       status: str = OK, reason: str = "") -> Result:
    samples = [seconds * f for f in (0.9, 1.0, 1.1)] if status == OK else []
    return Result(Figure(fid, f"title of {fid}", kind, nbytes, group), system, status, samples, reason)


def _results() -> list[Result]:
    return [
        _r("rtt.python", "baseline", 15 * US, group="baseline"),
        _r("rtt.c", "baseline", 10 * US, group="baseline"),
        _r("memcpy.warm.64MiB", "baseline", 0.005, "bandwidth", 64 << 20, "baseline"),
        _r("c.cycle1.8B", "ours", 30 * US, nbytes=8, group="c"),
        _r("get.8B", "ours", 20 * US, nbytes=8),
        _r("get.8B", "ray", 100 * US, nbytes=8),
        _r("get.8B", "upstream", 0, nbytes=8, status=SKIPPED, reason="pip install failed"),
        _r("put.8B", "ours", 60 * US, nbytes=8),
        _r("get.1KiB", "ours", 20 * US, nbytes=1024),
        _r("get.64MiB", "ours", 30 * US, nbytes=64 << 20, group="large"),
        _r("put.warm.64MiB", "ours", 0.01, "bandwidth", 64 << 20, "large"),
        _r("pandas.get", "ours", 0.001, group="frames"),
        _r("conc.2p.rate", "ours", 5000.0, "rate", 1024, "concurrency"),
    ]


def test_targets_are_ratios_of_this_run():
    by_name = {t["target"]: t for t in report.targets(_results())}
    get_rtt = by_name["get 8 B, Python: ≤ 2× the Python socket round trip"]
    assert get_rtt["ratio"] == pytest.approx(20 / 15) and get_rtt["ok"] is True
    assert by_name["get 8 B, Python: ≥ 3× faster than Ray"]["ratio"] == pytest.approx(5.0)
    skipped = by_name["get 8 B, Python: ≥ 3× faster than upstream Vineyard"]
    assert skipped["ok"] is None and "pip install failed" in skipped["measured"]
    assert by_name["put 8 B, Python: ≤ 3× the Python socket round trip"]["ok"] is False  # 60 / 15 = 4
    warm = by_name["put 64 MiB into a warm arena: ≥ 0.8× NumPy memcpy bandwidth"]
    assert warm["ratio"] == pytest.approx(0.5) and warm["ok"] is False
    assert by_name["C: create + seal + get 8 B ≤ 2 C socket round trips"]["ratio"] == pytest.approx(3.0)
    large = [t for t in by_name if t.startswith("get 64 MiB within 2×")]
    assert large and by_name[large[0]]["ok"] is True


def test_report_files_round_trip(tmp_path):
    doc = report.document(MACHINE, "quick", {"ours": {"status": OK, "version": "0.1.0"},
                                             "upstream": {"status": SKIPPED, "reason": "pip install failed"}},
                          _results())
    notes = report.write(doc, tmp_path)
    assert report.self_check(tmp_path) == []
    md = (tmp_path / "latest.md").read_text()
    assert "| get 8 B, Python: ≥ 3× faster than Ray | ray 100 µs / ours 20 µs | 5.00× | ≥ 3× | ✓ |" in md
    assert "upstream Vineyard: skipped (pip install failed)" in md
    assert "100 µs (5×)" in md  # a peer cell: its value, and how many times better ours is
    assert "5,000 ops/s" in md
    saved = json.loads((tmp_path / "latest.json").read_text())
    ok = [d for d in saved["results"] if d["status"] == OK]
    assert all(d["p10"] <= d["median"] <= d["p90"] for d in ok)
    bw = next(d for d in ok if d["figure"] == "put.warm.64MiB")
    assert bw["unit"] == "B/s" and bw["median"] == pytest.approx((64 << 20) / 0.01)
    if notes:  # matplotlib missing: the run says so and skips only the chart
        assert "matplotlib" in notes[0]
    else:
        assert (tmp_path / "latest.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_self_check_catches_an_edited_report(tmp_path):
    doc = report.document(MACHINE, "quick", {}, _results())
    report.write(doc, tmp_path)
    (tmp_path / "latest.md").write_text("# nothing\n")
    assert report.self_check(tmp_path)


def test_units_stats_and_selection():
    assert parse_size("64Mi") == 64 << 20 and parse_size("1GiB") == 1 << 30 and parse_size("2G") == 2 * 10**9
    assert size_key(8) == "8B" and size_key(1 << 30) == "1GiB"
    assert percentile([1, 2, 3, 4, 5], 50) == 3 and summarize([1.0, 3.0])["median"] == 2.0
    sel = Selection(["get.*", "ray"])
    assert sel.wants("get.8B", "ours") and sel.wants("put.8B", "ray") and not sel.wants("put.8B", "ours")
    ids = [f.id for f in system_figures(MODES["quick"])]
    assert ids.index("put.cold.1MiB") == 0, "the cold series must run first, on a fresh store"
    assert len(ids) == len(set(ids))
