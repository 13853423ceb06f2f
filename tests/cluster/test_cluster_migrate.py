"""Migration between real daemons (docs/cluster-data-plane.md, "Migration"):
B gets A's persisted array with fetch=True; the bytes are equal, the copy is
B's own, a second migrate returns the same copy, and the copy migrates on to
C. The faults are tested in Go (internal/server/migrate_test.go)."""

from __future__ import annotations

import numpy as np
from cluster_helpers import Cluster


def test_migrate_between_daemons(cluster: Cluster) -> None:
    a, b, c = (d.connect() for d in (cluster.a, cluster.b, cluster.c))
    value = np.arange(300_000, dtype=np.float64).reshape(1000, 300)
    oid = a.put(value, persist=True)
    assert a.migrate(oid) == oid  # local: itself

    got = b.get(oid, fetch=True)
    np.testing.assert_array_equal(got, value)
    copy = b.migrate(oid)
    assert copy != oid
    assert b.get_meta(copy).instance_id == b.instance_id
    assert b.get_meta(copy)["signature"] == a.get_meta(oid)["signature"]
    assert b.migrate(oid) == copy  # the copy made before

    b.persist(copy)
    np.testing.assert_array_equal(c.get(copy, fetch=True), value)
