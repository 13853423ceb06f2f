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
