"""migrate and get(fetch=True) on one daemon: a local object is its own copy,
an unknown id is a clear error. Migration between daemons is tested in Go
(internal/server/migrate_test.go) with a real etcd."""

import numpy as np
import pytest
import vineyard


def test_migrate_local_object_is_itself(client) -> None:
    arr = np.arange(1000, dtype=np.int64)
    oid = client.put(arr)
    assert client.migrate(oid) == oid
    np.testing.assert_array_equal(client.get(oid, fetch=True), arr)


def test_migrate_unknown_object(client) -> None:
    with pytest.raises(vineyard.ObjectNotExistsException):
        client.migrate(vineyard.ObjectID(0x1234))
    with pytest.raises(vineyard.ObjectNotExistsException):
        client.get(vineyard.ObjectID(0x1234), fetch=True)
