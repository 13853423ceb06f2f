"""The pytest plugin of tests/upstream/run.py: writes one JSON line per event
to the file named by V6D_UPSTREAM_RESULTS, as it happens, so that the runner
knows what finished even when it has to kill a file that hangs.

Lines: {"start": nodeid}, {"id": nodeid, "outcome": passed|failed|skipped,
"why": short text}, and {"id": file, "outcome": "failed", "why": ...} for a
file that fails to import (collection error)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

_outcomes: dict[str, str] = {}


def _write(record: dict[str, Any]) -> None:
    path = os.environ.get("V6D_UPSTREAM_RESULTS")
    if not path:
        return
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def _why(report: Any) -> str:
    if report.outcome == "skipped" and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return f"{crash.message.splitlines()[0] if crash.message else ''}"[:300]
    return str(report.longrepr or "").strip().splitlines()[-1][:300] if report.longrepr else ""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Shorter timeouts for listed tests known to hang (V6D_UPSTREAM_TIMEOUTS:
    # JSON {node id: seconds}, from the list's "[timeout=N]" entries).
    timeouts = json.loads(os.environ.get("V6D_UPSTREAM_TIMEOUTS") or "{}")
    for item in items:
        if item.nodeid in timeouts:
            item.add_marker(pytest.mark.timeout(timeouts[item.nodeid]))


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    _write({"start": nodeid})


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # A test is failed if any phase failed, skipped if its setup skipped,
    # passed if its call passed; written once, after its teardown.
    prev = _outcomes.get(report.nodeid)
    if report.failed:
        _outcomes[report.nodeid] = "failed"
        _write({"id": report.nodeid, "phase": report.when, "outcome": "failed", "why": _why(report)})
    elif report.skipped and prev is None:
        _outcomes[report.nodeid] = "skipped"
        _write({"id": report.nodeid, "phase": report.when, "outcome": "skipped", "why": _why(report)})
    elif report.when == "call" and report.passed and prev is None:
        _outcomes[report.nodeid] = "passed"
        _write({"id": report.nodeid, "phase": report.when, "outcome": "passed", "why": ""})


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _write({"id": report.nodeid, "phase": "collect", "outcome": "failed", "why": _why(report)})
