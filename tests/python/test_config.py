"""Upstream's conveniences: VINEYARD_CONFIG / connect(config=...), connect()
starting a daemon, and vineyard.deploy.local.start_vineyardd launching etcd."""

from __future__ import annotations

import os

import pytest
import vineyard
from vineyard import _config


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("VINEYARD_IPC_SOCKET", "VINEYARD_RPC_ENDPOINT", "VINEYARD_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def write_config(path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_config_file_names_the_socket(clean_env, tmp_path, vineyard_socket):
    conf = write_config(tmp_path / "vineyard-config.yaml",
                        f"# written by hand\nVineyard:\n  IPCSocket: '{vineyard_socket}'\n  RPCEndpoint: h:1\n")
    for how in ({"config": conf}, {"config": str(tmp_path)}):
        c = vineyard.connect(**how)
        try:
            assert c.ipc_socket == vineyard_socket and c.get(c.put(42)) == 42
        finally:
            c.close()
    clean_env.setenv("VINEYARD_CONFIG", conf)
    c = vineyard.connect()  # VINEYARD_CONFIG set: no daemon started, the configured one used
    try:
        assert c.ipc_socket == vineyard_socket
    finally:
        c.close()
    assert "VINEYARD_IPC_SOCKET" not in os.environ


def test_config_relative_socket_and_subdirectory(clean_env, tmp_path, vineyard_socket):
    sub = tmp_path / "vineyard"
    sub.mkdir()
    os.symlink(vineyard_socket, sub / "v.sock")
    write_config(sub / "vineyard-config.yaml", "Vineyard:\n  IPCSocket: v.sock\n")
    assert _config.parse_configuration(str(tmp_path)) == (str(sub / "v.sock"), None)
    c = vineyard.connect(config=str(tmp_path))
    try:
        assert c.get(c.put("relative")) == "relative"
    finally:
        c.close()


def test_config_missing_socket_falls_to_endpoint(clean_env, tmp_path):
    conf = write_config(tmp_path / "c.yaml", "Vineyard:\n  IPCSocket: /nonexistent/v.sock\n  RPCEndpoint: 127.0.0.1:1\n")
    assert _config.parse_configuration(conf) == (None, "127.0.0.1:1")
    with pytest.raises(ConnectionError, match="127.0.0.1:1"):
        vineyard.connect(config=conf)
    empty = write_config(tmp_path / "e.yaml", "Vineyard:\n  IPCSocket: /nonexistent/v.sock\n")
    with pytest.raises(ConnectionError, match="no configuration names a daemon"):
        vineyard.connect(config=empty)


def test_config_unreadable_is_an_error(clean_env, tmp_path):
    bad = write_config(tmp_path / "bad.yaml", "Vineyard: [1, 2\n")
    with pytest.raises(ValueError, match="bad.yaml"):
        vineyard.connect(config=bad)
    assert _config.parse_configuration(str(tmp_path / "absent.yaml")) == (None, None)


def test_plain_reader_reads_upstreams_shape():
    doc = _config._load_plain('Other: x\nVineyard:\n  IPCSocket: "a b.sock"  # quoted\n  RPCEndpoint: h:9600\n', "f")
    assert doc["Vineyard"] == {"IPCSocket": "a b.sock", "RPCEndpoint": "h:9600"}
    with pytest.raises(ValueError, match="PyYAML"):
        _config._load_plain("Vineyard:\n  - a\n", "f")


def test_connect_with_nothing_starts_a_daemon(clean_env):
    from vineyard.deploy import local

    if _config.config_path(_config.DEFAULT_DIR):
        pytest.skip("this machine has a /var/run vineyard configuration")
    c = vineyard.connect()
    try:
        socket = os.environ["VINEYARD_IPC_SOCKET"]
        assert c.ipc_socket == socket == local.get_current_socket()
        assert c.get(c.put([1, 2])) == [1, 2]
    finally:
        c.close()
        local.shutdown()
    assert not os.path.exists(socket)


@pytest.mark.skipif(not os.environ.get("V6D_ETCD"), reason="needs V6D_ETCD (build/v6d-etcd)")
def test_start_vineyardd_launches_etcd(tmp_path):
    from vineyard.deploy import local

    with local.start_vineyardd(meta="etcd", size="64Mi", socket=str(tmp_path / "a.sock"), rpc=False) as (_, sock, eps):
        assert eps and eps.startswith("http://127.0.0.1:")
        with local.start_vineyardd(meta="etcd", etcd_endpoints=eps, size="64Mi", socket=str(tmp_path / "b.sock"),
                                   rpc=False) as (_, sock_b, _):
            a, b = vineyard.connect(sock), vineyard.connect(sock_b)
            try:
                oid = a.put(7, persist=True)
                assert a.instance_id != b.instance_id
                assert b.get_meta(oid).typename == a.get_meta(oid).typename
            finally:
                a.close()
                b.close()
