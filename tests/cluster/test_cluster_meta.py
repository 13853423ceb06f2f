"""Three real daemons sharing metadata through a real etcd (docs/cluster.md):
persisted objects, names and the instance list are seen from every daemon;
a name race has one winner; deletes propagate; a killed daemon's instance
and objects go after its lease; etcd stopped and restarted.

The tests share one cluster (module fixture) and run in file order: the
etcd restart is last.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import vineyard
from cluster_helpers import Cluster, wait_until
from vineyard.errors import EtcdErrorException, ObjectExistsException, ObjectNotExistsException


def test_instances(cluster: Cluster) -> None:
    clients = [d.connect() for d in (cluster.a, cluster.b, cluster.c)]
    idl = [c.instance_id for c in clients]
    assert len(set(idl)) == 3, idl
    for c in clients:
        meta = c.meta
        assert sorted(meta) == sorted(idl)
        for d, iid in zip((cluster.a, cluster.b, cluster.c), idl, strict=True):
            entry = meta[iid]
            assert entry["instance_id"] == iid
            assert entry["ipc_socket"] == d.socket
            assert isinstance(entry["hostid"], int)
            # The TCP listener's port as bound (the daemons ask for a free one).
            assert int(entry["rpc_endpoint"].rsplit(":", 1)[1]) > 0, entry
            for key in ("hostname", "nodename", "rpc_endpoint", "timestamp"):
                assert key in entry
        assert c.status.instance_id == c.instance_id


def test_persist_on_a_seen_on_b_and_c(cluster: Cluster) -> None:
    a, b, c = (d.connect() for d in (cluster.a, cluster.b, cluster.c))
    value = np.arange(12, dtype=np.int64).reshape(3, 4)
    oid = a.put(value, persist=True, name="persisted_on_a")
    tree_a = a.get_meta(oid)
    assert tree_a.instance_id == a.instance_id
    for other in (b, c):
        # No wait: a daemon that does not know an id catches up with etcd first.
        meta = other.get_meta(oid)
        assert meta.typename == tree_a.typename
        assert meta.instance_id == a.instance_id
        assert meta["shape_"] == tree_a["shape_"]
        assert other.exists(oid)
        assert other.get_name("persisted_on_a") == oid
        assert other.list_names("persisted_on_*") == {"persisted_on_a": oid}
        listed = {m.id for m in other.list_metadatas("vineyard::Tensor*", limit=0)}
        assert oid in listed
    # A transient object stays where it was made.
    transient = a.put(np.zeros(3))
    assert not b.exists(transient)
    with pytest.raises(ObjectNotExistsException):
        b.get_meta(transient)


def _race(clients: dict[vineyard.Client, vineyard.ObjectID], name: str) -> dict[vineyard.Client, BaseException]:
    """Both clients put_name at once, each for its own object; returns the
    errors by client."""
    errors: dict[vineyard.Client, BaseException] = {}
    go = threading.Barrier(len(clients))

    def claim(client: vineyard.Client) -> None:
        go.wait()
        try:
            client.put_name(clients[client], name)
        except BaseException as e:  # noqa: BLE001 - reported by the caller
            errors[client] = e

    threads = [threading.Thread(target=claim, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_name_race_has_one_winner(cluster: Cluster) -> None:
    a, b, c = (d.connect() for d in (cluster.a, cluster.b, cluster.c))
    for round_ in range(10):
        name = f"raced_{round_}"
        ids = {a: a.put(np.full(2, 1), persist=True), b: b.put(np.full(2, 2), persist=True)}
        errors = _race(ids, name)
        # Both may succeed when one saw the other's name and moved it (allowed,
        # as upstream's put_name); a loser of a true race gets ObjectExists.
        for e in errors.values():
            assert isinstance(e, ObjectExistsException), repr(e)
            assert "taken" in str(e)
        assert len(errors) < 2
        final = a.get_name(name)
        assert final in ids.values()
        assert b.get_name(name) == final
        assert c.get_name(name) == final


def test_global_object_of_partitions_on_several_instances(cluster: Cluster) -> None:
    a, b, c = (d.connect() for d in (cluster.a, cluster.b, cluster.c))
    part_a = a.put(np.arange(4), persist=True)
    part_b = b.put(np.arange(3) * 10, persist=True)
    meta = vineyard.ObjectMeta(global_=True)
    meta["typename"] = "vineyard::GlobalTensor"
    meta["partitions_-size"] = 2
    meta.add_member("partitions_-0", part_a)
    meta.add_member("partitions_-1", part_b)  # persisted on b a moment ago
    g = c.create_metadata(meta)
    assert g.isglobal
    c.persist(g.id)
    for client in (a, b, c):
        tree = client.get_meta(g.id)
        assert tree.isglobal
        assert tree["partitions_-0"].id == part_a
        assert tree["partitions_-1"].instance_id == b.instance_id
    # Getting it returns the partitions on the client's instance, as upstream.
    [on_a] = a.get(g.id)
    np.testing.assert_array_equal(on_a, np.arange(4))
    [on_b] = b.get(g.id)
    np.testing.assert_array_equal(on_b, np.arange(3) * 10)
    assert c.get(g.id) == []
    # put(..., global_=True) of the partitions' ids does the same, and picks
    # the typename from theirs.
    g2 = c.put([part_a, part_b], global_=True)
    assert b.get_meta(g2).typename == "vineyard::GlobalTensor"
    assert b.if_persist(g2)
    [again] = b.get(g2)
    np.testing.assert_array_equal(again, np.arange(3) * 10)
    with pytest.raises(TypeError):
        c.put(np.arange(3), global_=True)
    # A global object of a partition that no instance persisted is refused.
    bad = vineyard.ObjectMeta(global_=True)
    bad["typename"] = "vineyard::GlobalTensor"
    bad.add_member("partitions_-0", b.put(np.arange(2)))  # transient on b
    with pytest.raises(ObjectNotExistsException):
        a.create_metadata(bad)


def test_delete_propagates(cluster: Cluster) -> None:
    a, b, c = (d.connect() for d in (cluster.a, cluster.b, cluster.c))
    oid = a.put(np.arange(5), persist=True)
    assert b.get_meta(oid).id == oid
    assert c.exists(oid)
    a.delete(oid)
    assert not a.exists(oid)
    for other in (b, c):
        wait_until("the delete to reach another daemon", lambda o=other: not o.exists(oid))
        with pytest.raises(ObjectNotExistsException):
            other.get_meta(oid)


def test_sync_meta_sees_what_another_instance_just_persisted_and_deleted(cluster: Cluster) -> None:
    # Upstream's Client.sync_meta: the daemon catches up with etcd before it
    # returns, so the next list on b sees a's persist, and then a's delete.
    a, b = cluster.a.connect(), cluster.b.connect()
    oid = a.put(np.arange(7))
    a.persist(oid)
    b.sync_meta()
    assert oid in [m.id for m in b.list_metadatas("vineyard::Tensor*", limit=100000)]
    a.delete(oid)
    b.sync_meta()
    assert oid not in [m.id for m in b.list_metadatas("vineyard::Tensor*", limit=100000)]
    a.close()
    b.close()


def test_killed_daemon_disappears_after_its_lease(cluster: Cluster) -> None:
    d = cluster.start_daemon("doomed")
    doomed = d.connect()
    iid = doomed.instance_id
    oid = doomed.put(np.arange(3), persist=True, name="of_the_doomed")
    a = cluster.a.connect()
    assert a.get_meta(oid).instance_id == iid
    assert iid in a.meta
    doomed.close()
    d.kill()
    # Nothing revoked the lease: etcd deletes its keys when the TTL passes.
    wait_until("the killed instance to leave client.meta", lambda: iid not in a.meta)
    wait_until("the killed instance's object to disappear", lambda: not a.exists(oid))
    with pytest.raises(ObjectNotExistsException):
        a.get_name("of_the_doomed")
    assert iid not in cluster.b.connect().meta


def test_etcd_stopped_and_restarted(cluster: Cluster) -> None:
    a, b = cluster.a.connect(), cluster.b.connect()
    before = a.put(np.arange(4), persist=True, name="before_outage")
    doomed = a.put(np.arange(5), persist=True, name="deleted_in_outage")
    assert b.get_name("before_outage") == before
    assert b.exists(doomed)
    cluster.etcd.stop()
    try:
        # The delete of a persisted object (and of its name) succeeds and is
        # queued for etcd; a drop_name fails with EtcdError, nothing changed.
        a.delete(doomed)
        assert not a.exists(doomed)
        with pytest.raises(EtcdErrorException):
            a.drop_name("before_outage")
        assert a.status.meta_pending == 2
        # Local, transient put/get keep working.
        local = a.put(np.arange(100.0))
        np.testing.assert_array_equal(a.get(local), np.arange(100.0))
        assert a.get_meta(before).id == before  # known here: no etcd needed
        # Cluster operations fail with EtcdError naming the endpoint.
        for op in (lambda: a.persist(local), lambda: a.list_names("*"), lambda: a.meta,
                   lambda: a.put(np.arange(2), persist=True)):
            with pytest.raises(EtcdErrorException) as info:
                op()
            assert cluster.etcd.endpoint in str(info.value)
        assert not a.if_persist(local)  # the failed persist changed nothing
        # An id this daemon does not know: not found, and the error says that
        # etcd could not be consulted (it may exist on another instance).
        with pytest.raises(ObjectNotExistsException) as missing:
            a.get_meta(vineyard.ObjectID(0x0123456789ABCDE))
        assert "could not catch up with etcd" in str(missing.value)
    finally:
        cluster.etcd.start()
    # Back: the daemons reconnect and resume their watch.
    def persisted() -> bool:
        a.persist(local)
        return True

    wait_until("persist to work again", persisted)
    # b reconnects on its own (within about a second); then its watch,
    # resumed from its last revision, brings what a wrote.
    assert wait_until("b to see the object a persisted", lambda: b.exists(local))
    assert b.get_meta(local).instance_id == a.instance_id
    assert b.get_name("before_outage") == before
    # The queued delete reached etcd, so b too.
    wait_until("the delete made during the outage to reach b", lambda: not b.exists(doomed))
    with pytest.raises(ObjectNotExistsException):
        b.get_name("deleted_in_outage")
    assert a.status.meta_pending == 0
    after = b.put(np.arange(3), persist=True, name="after_outage")
    assert a.get_name("after_outage") == after
    assert a.get_meta(after).instance_id == b.instance_id
    assert sorted(a.meta) == sorted(b.meta)

