"""The fixture of the cluster suite: etcd and three daemons (cluster_helpers)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import Cluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    workdir = tempfile.mkdtemp(prefix="v6d-cluster-", dir="/tmp")
    c = Cluster(workdir)
    try:
        yield c
    finally:
        statuses = c.close()
        bad = {log: (st, Path(log).read_text()[-2000:]) for log, st in statuses.items() if st != 0}
        shutil.rmtree(workdir, ignore_errors=True)
    # A daemon whose store invariants broke has stopped with status 3.
    assert not bad, f"daemons did not stop cleanly: {bad}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test of the suite shows the end of each daemon's log (lease
    losses, etcd errors): the work directory is gone once the module ends."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    cluster = getattr(item, "funcargs", {}).get("cluster")
    if report.failed and call.when == "call" and isinstance(cluster, Cluster):
        for d in cluster.daemons:
            try:
                text = Path(d.log).read_text(errors="replace")[-3000:]
            except OSError as e:
                text = f"(unreadable: {e})"
            report.sections.append((f"vineyardd {Path(d.log).stem}: end of its log", text))
