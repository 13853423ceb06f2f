"""A remote client over TCP (vineyard.connect(host, port)) against the real
daemon: every value type round-trips, as writable copies; the shared secret
is enforced."""

from __future__ import annotations

import pickle
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import vineyard
from vineyard.deploy import start_vineyardd


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def rpc_daemon() -> Iterator[tuple[str, int]]:
    port = free_port()
    with start_vineyardd(size="256Mi", args=["--rpc-socket-port", str(port)]) as sock:
        yield sock, port


@pytest.fixture
def remote(rpc_daemon: tuple[str, int]) -> Iterator[Any]:
    c = vineyard.connect("127.0.0.1", rpc_daemon[1])
    yield c
    c.close()


class Point:
    def __init__(self, x: Any, y: Any) -> None:
        self.x, self.y = x, y


def test_connect_forms(rpc_daemon: tuple[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    sock, port = rpc_daemon
    ep = f"127.0.0.1:{port}"
    for c in (vineyard.connect("127.0.0.1", port), vineyard.connect(host="127.0.0.1", port=str(port)),
              vineyard.connect(endpoint=ep), vineyard.connect(endpoint=("127.0.0.1", port))):
        assert c.is_rpc and not c.is_ipc and c.rpc_endpoint == ep, c
        assert c.status.instance_id == c.instance_id
        c.close()
    monkeypatch.delenv("VINEYARD_IPC_SOCKET", raising=False)
    monkeypatch.setenv("VINEYARD_RPC_ENDPOINT", ep)
    with vineyard.connect() as c:
        assert c.is_rpc
        assert any(inst["rpc_endpoint"] == ep for inst in c.meta.values())
    with vineyard.connect(sock) as c:
        assert c.is_ipc and not c.is_rpc
    with pytest.raises(ValueError):
        vineyard.connect(host="127.0.0.1")
    with pytest.raises(ConnectionError):
        vineyard.connect("127.0.0.1", 1)


@pytest.mark.parametrize("size", [10, 100_000, 20 << 20])
def test_numpy_both_ways(remote: Any, rpc_daemon: tuple[str, int], size: int) -> None:
    a = np.arange(size, dtype=np.int32).reshape(-1, 2) if size % 2 == 0 else np.arange(size)
    oid = remote.put(a)
    got = remote.get(oid)
    np.testing.assert_array_equal(got, a)
    assert got.flags.writeable  # a private copy
    got[0] = -1
    assert not remote.is_shared_memory(got)
    with vineyard.connect(rpc_daemon[0]) as ipc:  # the store holds the bytes put over TCP
        np.testing.assert_array_equal(ipc.get(oid), a)
        oid2 = ipc.put(a * 2)
    np.testing.assert_array_equal(remote.get(oid2), a * 2)


def test_every_value_type(remote: Any) -> None:
    df = pd.DataFrame({"i": np.arange(1000), "f": np.linspace(0, 1, 1000), "s": [f"x{i}" for i in range(1000)],
                       "c": pd.Categorical(["a", "b"] * 500)})
    values: list[Any] = [
        df,
        df["f"],
        pa.table({"a": pa.array(range(100_000)), "b": pa.array([str(i) for i in range(100_000)])}),
        pa.array([1.5, None, 3.0]),
        b"bytes over tcp" * 10_000,
        bytearray(b"small"),
        {"arr": np.ones((300, 300)), "label": "pickled", "n": 3},
        Point(np.arange(10), [1, 2]),
        42, 2.5, "text", [1, "two", np.arange(3)],
    ]
    for v in values:
        got = remote.get(remote.put(v))
        if isinstance(v, pd.DataFrame):
            pd.testing.assert_frame_equal(got, v)
        elif isinstance(v, pd.Series):
            pd.testing.assert_series_equal(got, v)
        elif isinstance(v, (pa.Table, pa.Array)):
            assert got.equals(v)
        elif isinstance(v, (bytes, bytearray)):
            assert bytes(got) == bytes(v)
        elif isinstance(v, dict):
            np.testing.assert_array_equal(got["arr"], v["arr"])
            assert got["label"] == "pickled" and got["n"] == 3
        elif isinstance(v, Point):
            np.testing.assert_array_equal(got.x, v.x)
            assert got.y == v.y
        elif isinstance(v, list):
            assert got[:2] == v[:2]
            np.testing.assert_array_equal(got[2], v[2])
        else:
            assert got == v
    assert pickle.loads(pickle.dumps(3)) == 3


def test_blobs_names_delete(remote: Any) -> None:
    b = remote.create_blob(1 << 20)
    b.copy(0, b"hello")
    bid = b.seal()
    blob = remote.get_blob(bid)
    assert bytes(blob[:5]) == b"hello" and len(blob) == 1 << 20
    oid = remote.put(np.arange(5))
    remote.persist(oid)
    remote.put_name(oid, "rpc-name")
    assert remote.get_name("rpc-name") == oid
    np.testing.assert_array_equal(remote.get(name="rpc-name"), np.arange(5))
    assert oid in remote.list_objects("vineyard::Tensor*", limit=0)
    remote.delete(oid)
    assert not remote.exists(oid)


def test_secret(tmp_path: Path) -> None:
    port = free_port()
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    with start_vineyardd(size="64Mi", args=["--rpc-socket-port", str(port), "--rpc-auth-file", str(secret)]):
        for wrong in (None, "", "s3cre", "s3cret2"):
            with pytest.raises(ConnectionError, match="secret"):
                vineyard.connect("127.0.0.1", port, password=wrong)
        with vineyard.connect("127.0.0.1", port, password="s3cret") as c:
            np.testing.assert_array_equal(c.get(c.put(np.arange(7))), np.arange(7))


def test_remote_blobs_cross_the_tcp_connection(remote: Any, rpc_daemon: tuple[str, int]) -> None:
    # upstream's RemoteBlobBuilder / create_remote_blob / get_remote_blob
    payload = b"abcdefgh1234567890uvwxyz"
    builder = vineyard.RemoteBlobBuilder(len(payload))
    assert len(builder) == builder.size == len(payload) and bytes(builder.buffer) == bytes(len(payload))
    builder.copy(0, payload)
    builder[0] = ord("A")
    meta = remote.create_remote_blob(builder)
    assert isinstance(meta, vineyard.ObjectMeta) and meta.id.is_blob and meta.typename == "vineyard::Blob"
    want = b"A" + payload[1:]
    with vineyard.connect(rpc_daemon[0]) as local:  # the daemon holds it: an IPC view reads it
        assert bytes(local.get_blob(meta.id)) == want
        sealed = local.create_blob(4)
        sealed.copy(0, b"wxyz")
        blob = sealed.seal(local)
        got = remote.get_remote_blob(blob.id)
        assert isinstance(got, vineyard.RemoteBlob) and got.id == blob.id and got.size == 4
        assert got.instance_id == remote.instance_id == remote.remote_instance_id
        assert memoryview(got) == memoryview(blob) == memoryview(b"wxyz") == got.buffer
    back = remote.get_remote_blob(meta.id)
    assert bytes(back) == want and not back.is_empty
    # wrap (no copy until sent), several at once, and the empty blob
    big = np.random.default_rng(1).integers(0, 255, 3 << 20, dtype=np.uint8).tobytes()
    metas = remote.create_remote_blob([vineyard.RemoteBlobBuilder.wrap(big), vineyard.RemoteBlobBuilder(0)])
    assert [m.id.is_blob for m in metas] == [True, True]
    blobs = remote.get_remote_blobs([m.id for m in metas])
    assert bytes(blobs[0]) == big and blobs[1].is_empty
    aborted = vineyard.RemoteBlobBuilder(8)
    aborted.abort()
    with pytest.raises(ValueError, match="aborted"):
        aborted.copy(0, b"x")
    with pytest.raises(ValueError, match="exceeds"):
        vineyard.RemoteBlobBuilder(2).copy(1, b"xy")
