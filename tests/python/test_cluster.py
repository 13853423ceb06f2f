"""Two daemons of ours sharing a real etcd (build/v6d-etcd, --meta etcd):
the cluster behaviour upstream's clients rely on (a put the local daemon has
no memory for goes to another instance; a delete through another instance
frees the owner's memory)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import vineyard
from vineyard.deploy import launch

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def etcd(tmp: Path) -> Iterator[str]:
    binary = os.environ.get("V6D_ETCD") or str(ROOT / "build" / "v6d-etcd")
    if not os.access(binary, os.X_OK):
        pytest.skip(f"no {binary} (make build)")
    url_file = tmp / "etcd.url"
    with open(tmp / "etcd.log", "wb") as log:
        proc = subprocess.Popen([binary, "-data-dir", str(tmp / "etcd-data"), "-endpoint-file", str(url_file)],
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not (url_file.exists() and url_file.stat().st_size):
            assert proc.poll() is None and time.monotonic() < deadline, (tmp / "etcd.log").read_text()
            time.sleep(0.05)
        yield url_file.read_text().strip()
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[str], str, Path]]:
    """Two daemons (64 MiB each), their sockets, etcd's URL and a directory."""
    tmp = tmp_path_factory.mktemp("cluster")
    with etcd(tmp) as url, contextlib.ExitStack() as stack:
        flags = ["--meta", "etcd", "--etcd-endpoint", url, "--etcd-prefix", "cluster-test", "--rpc-socket-port", "0"]
        ds = [stack.enter_context(launch("64Mi", str(tmp / f"v{i}.sock"), flags, rpc=True, quiet=True))
              for i in range(2)]
        yield [d.socket for d in ds], url, tmp


def test_a_put_the_daemon_has_no_room_for_goes_to_the_roomiest_instance(cluster) -> None:
    sockets = cluster[0]
    client = vineyard.connect(sockets[0])
    first = client.instance_id
    other = vineyard.connect(sockets[1])
    data = np.ones((1 << 20,))  # 8 MiB
    puts = []
    while client.status.memory_limit - client.status.memory_usage >= data.nbytes:
        puts.append(client.put(data))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        moved = client.put(data)
    assert any("most available memory" in str(w.message) for w in caught), [str(w.message) for w in caught]
    assert client.instance_id == other.instance_id != first  # upstream's client moves there too
    assert client.get_meta(moved).instance_id == other.instance_id
    np.testing.assert_array_equal(other.get(moved), data)
    client.delete(moved)
    with vineyard.connect(sockets[0]) as back:
        back.delete(puts)


def test_a_put_with_no_other_instance_to_go_to_raises(tmp_path) -> None:
    with launch("16Mi", str(tmp_path / "v.sock"), quiet=True) as d, vineyard.connect(d.socket) as client:
        with pytest.raises(vineyard.NotEnoughMemoryException), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            client.put(np.ones(4 << 20))
        assert any("No other vineyard instance" in str(w.message) for w in caught)
        assert client.instance_id == d.instance_id


def test_a_delete_through_another_instance_frees_the_owners_memory(cluster) -> None:
    # upstream's test_remote_deletion: after sync_meta the owner's usage is back
    sockets = cluster[0]
    owner, other = vineyard.connect(sockets[0]), vineyard.connect(sockets[1])
    before = owner.status.memory_usage
    oid = owner.put(np.ones((1, 2, 3, 4, 5)))
    owner.persist(oid)
    assert owner.status.memory_usage != before
    other.get_meta(oid, sync_remote=True)
    other.delete(oid)
    owner.sync_meta()
    assert owner.status.memory_usage == before
    assert not owner.exists(oid)
