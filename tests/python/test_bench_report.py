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
        _r("c.get.8B", "ours", 1.5 * US, nbytes=8, group="c"),
        _r("get.8B", "ours", 20 * US, nbytes=8),
        _r("get.8B", "ray", 100 * US, nbytes=8),
        _r("get.8B", "upstream", 0, nbytes=8, status=SKIPPED, reason="pip install failed"),
        _r("get.8B", "shm", 12 * US, nbytes=8),
        _r("put.8B", "ours", 60 * US, nbytes=8),
        _r("put.8B", "ray", 600 * US, nbytes=8),
        _r("get.1KiB", "ours", 20 * US, nbytes=1024),
        _r("get.64MiB", "ours", 30 * US, nbytes=64 << 20, group="large"),
        _r("put.cold.64MiB", "ours", 0.006, "bandwidth", 64 << 20, "large"),
        _r("put.warm.64MiB", "ours", 0.01, "bandwidth", 64 << 20, "large"),
        _r("pandas.get", "ours", 0.001, group="frames"),
        _r("conc.1p.rate", "ours", 4000.0, "rate", 1024, "concurrency"),
        _r("conc.2p.rate", "ours", 5000.0, "rate", 1024, "concurrency"),
        _r("conc.2p.rate", "ray", 800.0, "rate", 1024, "concurrency"),
        _r("conc.1p.xrate", "ours", 3000.0, "rate", 1024, "concurrency"),
        _r("conc.2p.xrate", "ours", 4500.0, "rate", 1024, "concurrency"),
    ]


def test_targets_are_ratios_of_this_run():
    by_name = {t["target"]: t for t in report.targets(_results())}

    def check(name: str, ratio: float, ok: bool) -> None:
        assert by_name[name]["ratio"] == pytest.approx(ratio), name
        assert by_name[name]["ok"] is ok, name

    check("get 8 B, Python: ≤ 1× the Python socket round trip", 20 / 15, False)
    check("get 8 B, Python: ≥ 10× faster than Ray", 5.0, False)
    check("get 8 B, Python: within 2× of a shared_memory attach", 20 / 12, True)
    skipped = by_name["get 8 B, Python: ≥ 10× faster than upstream Vineyard"]
    assert skipped["ok"] is None and "pip install failed" in skipped["measured"]
    assert by_name["get 1 KiB, Python: within 2× of a shared_memory attach"]["measured"] == "shm: not run"
    check("get 8 B, C: ≤ 0.2× the C socket round trip", 0.15, True)
    check("get 64 MiB within 1.2× the time of a get of 8 B (the issue asks 1 GiB; this run's largest size)",
          1.5, False)
    check("put 8 B, Python: ≤ 2× the Python socket round trip", 4.0, False)
    check("put 8 B, Python: ≥ 5× faster than Ray", 10.0, True)
    check("put 64 MiB into a cold store: ≥ 0.7× a warm NumPy memcpy", 0.005 / 0.006, True)
    check("put 64 MiB into a warm store: ≥ 0.8× a warm NumPy memcpy", 0.5, False)
    check("put + get, own objects: 2 clients ≥ 1.4× one client's rate", 1.25, False)
    check("put + get, objects another process put: 2 clients ≥ 1.4× one client's rate", 1.5, True)
    check("put + get, 2 clients: ≥ 5× Ray's rate", 5000 / 800, True)
    not_run = by_name["put + get, 1 client: ≥ 5× Ray's rate"]
    assert not_run["ok"] is None and not_run["measured"] == "ray: not run"
    assert not any("4 clients" in name for name in by_name), "no target for a client count not measured"
    assert not any(t["ok"] for t in report.targets([r for r in _results() if r.figure.id != "rtt.python"])
                   if "Python socket round trip" in t["target"]), "no floor, no pass"


def test_cpu_and_medium_put_targets():
    """Issue 37's: medium warm puts against a warm memcpy, the daemon's CPU per small
    put, and the 4-client rate against what the CPUs allow at the CPU per op."""
    extra = [
        _r("memcpy.warm.1MiB", "baseline", 40 * US, "bandwidth", 1 << 20, "baseline"),
        _r("put.warm.1MiB", "ours", 80 * US, "bandwidth", 1 << 20, "large"),
        _r("put.8B.cpu.daemon", "ours", 4 * US, nbytes=8, group="cpu"),
        _r("put.8B.cpu.client", "ours", 9 * US, nbytes=8, group="cpu"),
        _r("conc.4p.rate", "ours", 50000.0, "rate", 1024, "concurrency"),
        _r("conc.4p.cpu.client", "ours", 25 * US, nbytes=1024, group="cpu"),
        _r("conc.4p.cpu.daemon", "ours", 15 * US, nbytes=1024, group="cpu"),
    ]
    by_name = {t["target"]: t for t in report.targets(_results() + extra, cores=2)}
    medium = by_name["put 1 MiB into a warm store: ≥ 0.6× a warm NumPy memcpy"]
    assert medium["ratio"] == pytest.approx(0.5) and medium["ok"] is False
    daemon = by_name["put 8 B, Python: daemon CPU per put ≤ 3 µs"]
    assert daemon["ratio"] == pytest.approx(4 / 3) and daemon["ok"] is False
    bound = by_name["put + get, 4 clients: ≥ 0.9× the rate 2 CPUs allow at the measured CPU per put + get"]
    assert bound["ratio"] == pytest.approx(50000 / (2 / 40e-6)) and bound["ok"] is True
    assert not any("CPUs allow" in t["target"] for t in report.targets(_results() + extra)), "no cores, no bound"


def test_report_files_round_trip(tmp_path):
    doc = report.document(MACHINE, "quick", {"ours": {"status": OK, "version": "0.1.0"},
                                             "upstream": {"status": SKIPPED, "reason": "pip install failed"}},
                          _results())
    notes = report.write(doc, tmp_path)
    assert report.self_check(tmp_path) == []
    md = (tmp_path / "latest.md").read_text()
    assert "## Targets (issue 15)" in md
    assert "| get 8 B, Python: ≥ 10× faster than Ray | ray 100 µs / ours 20 µs | 5.00× | ≥ 10× | ✗ |" in md
    assert "| put 8 B, Python: ≥ 5× faster than Ray | ray 600 µs / ours 60 µs | 10.00× | ≥ 5× | ✓ |" in md
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
    assert {"conc.1p.xrate", "conc.2p.xrate", "conc.4p.xrate"} <= set(ids), "cross-process gets are measured"
    assert {"put.8B.cpu.daemon", "conc.4p.cpu.client", "conc.4p.cpu.daemon"} <= set(ids), "CPU per op is reported"
