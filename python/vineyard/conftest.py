"""pytest fixtures with the names and options of upstream Vineyard's
``vineyard.conftest``, so that tests written for upstream run unchanged.

Load it as a plugin (``pytest -p vineyard.conftest``) or import fixtures from
it (``from vineyard.conftest import vineyard_client``). Options:

- ``--vineyard-ipc-socket PATH`` / ``--vineyard-ipc-sockets P1,P2``: the
  daemons' UNIX sockets (fixtures ``vineyard_ipc_socket``,
  ``vineyard_ipc_sockets``, ``vineyard_client``: a client of the first);
- ``--vineyard-endpoint HOST:PORT`` / ``--vineyard-endpoints``: their TCP
  listeners (``vineyard_endpoint``, ``vineyard_endpoints``,
  ``vineyard_rpc_client``);
- the data and service options upstream's IO tests read (``--test-dataset``,
  ``--test-dataset-tmp``, ``--with-hdfs``, ``--hdfs-endpoint``,
  ``--hive-endpoint``, ``--oss-config``, ``--with-migration``,
  ``--vineyard-spark-jar-path``), each a fixture of the same name; tests
  marked ``skip_without_hdfs`` / ``skip_without_migration`` skip unless
  ``--with-hdfs`` / ``--with-migration`` is given.

A fixture whose option is not given is None (a test that uses it fails on
it, as upstream's). Every test without a ``timeout`` mark gets 600 s when
pytest-timeout is installed, unless its ``--timeout`` is given.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from .client import Client, connect

_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("--vineyard-ipc-socket", {"default": None, "help": "UNIX socket of the vineyardd the tests use"}),
    ("--vineyard-endpoint", {"default": None, "help": "RPC endpoint (host:port) of that vineyardd"}),
    ("--vineyard-ipc-sockets", {"default": None, "help": "UNIX sockets of several vineyardds, comma-separated"}),
    ("--vineyard-endpoints", {"default": None, "help": "RPC endpoints of several vineyardds, comma-separated"}),
    ("--test-dataset", {"default": os.path.expandvars("$VINEYARD_DATA_DIR"), "help": "directory of test data"}),
    ("--test-dataset-tmp", {"default": os.path.expandvars("$TMPDIR"), "help": "temporary directory of the tests"}),
    ("--with-hdfs", {"action": "store_true", "default": False, "help": "run the tests that need HDFS"}),
    ("--hdfs-endpoint", {"default": "hdfs://127.0.0.1:9000", "help": "HDFS of the HDFS tests"}),
    ("--hive-endpoint", {"default": "hive://127.0.0.1:9000", "help": "hiveserver2 of the Hive tests"}),
    ("--oss-config", {"default": os.path.expandvars("$OSS_CONFIG_DIR"), "help": "OSS login configuration"}),
    ("--with-migration", {"action": "store_true", "default": False, "help": "run the object migration tests"}),
    ("--vineyard-spark-jar-path", {"default": os.path.expandvars("$VINEYARD_SPARK_PATH"),
                                   "help": "jar of the vineyard-spark tests"}),
]


def pytest_addoption(parser: pytest.Parser) -> None:
    for flag, kw in _OPTIONS:
        parser.addoption(flag, **{"action": "store", **kw})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "skip_without_hdfs(): skip unless --with-hdfs")
    config.addinivalue_line("markers", "skip_without_migration(): skip unless --with-migration")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("skip_without_hdfs") and not item.config.option.with_hdfs:
        pytest.skip("needs HDFS (--with-hdfs)")
    if item.get_closest_marker("skip_without_migration") and not item.config.option.with_migration:
        pytest.skip("needs object migration (--with-migration)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("timeout", None):  # pytest-timeout's --timeout given: it rules
        return
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(600))


def _split(value: str | None) -> list[str] | None:
    return value.split(",") if value else None


def _option(request: pytest.FixtureRequest, name: str) -> Any:
    return getattr(request.config.option, name)


@pytest.fixture(scope="session")
def vineyard_ipc_sockets(request: pytest.FixtureRequest) -> list[str] | None:
    """Every daemon's UNIX socket (--vineyard-ipc-sockets, else the one of
    --vineyard-ipc-socket), or None."""
    many = _split(_option(request, "vineyard_ipc_sockets"))
    one = _option(request, "vineyard_ipc_socket")
    return many or ([one] if one else None)


@pytest.fixture(scope="session")
def vineyard_endpoints(request: pytest.FixtureRequest) -> list[str] | None:
    """Every daemon's RPC endpoint, like :func:`vineyard_ipc_sockets`."""
    many = _split(_option(request, "vineyard_endpoints"))
    one = _option(request, "vineyard_endpoint")
    return many or ([one] if one else None)


@pytest.fixture(scope="session")
def vineyard_ipc_socket(request: pytest.FixtureRequest) -> str | None:
    """The daemon's UNIX socket (else the first of --vineyard-ipc-sockets)."""
    many = _split(_option(request, "vineyard_ipc_sockets"))
    return _option(request, "vineyard_ipc_socket") or (many[0] if many else None)


@pytest.fixture(scope="session")
def vineyard_endpoint(request: pytest.FixtureRequest) -> str | None:
    """The daemon's RPC endpoint (else the first of --vineyard-endpoints)."""
    many = _split(_option(request, "vineyard_endpoints"))
    return _option(request, "vineyard_endpoint") or (many[0] if many else None)


@pytest.fixture(scope="session")
def vineyard_client(request: pytest.FixtureRequest) -> Client | None:
    """A client of --vineyard-ipc-socket's daemon, shared by the session."""
    socket = _option(request, "vineyard_ipc_socket")
    return connect(socket) if socket else None


@pytest.fixture(scope="session")
def vineyard_rpc_client(request: pytest.FixtureRequest) -> Client | None:
    """A TCP client of --vineyard-endpoint's daemon, shared by the session."""
    endpoint = _option(request, "vineyard_endpoint")
    return connect(endpoint=endpoint) if endpoint else None


def _option_fixture(name: str, doc: str) -> Any:
    def fixture(request: pytest.FixtureRequest) -> Any:
        return _option(request, name)

    fixture.__name__ = name
    fixture.__doc__ = doc
    return pytest.fixture(scope="session", name=name)(fixture)


test_dataset = _option_fixture("test_dataset", "--test-dataset")
test_dataset_tmp = _option_fixture("test_dataset_tmp", "--test-dataset-tmp")
with_hdfs = _option_fixture("with_hdfs", "--with-hdfs")
hdfs_endpoint = _option_fixture("hdfs_endpoint", "--hdfs-endpoint")
hive_endpoint = _option_fixture("hive_endpoint", "--hive-endpoint")
oss_config = _option_fixture("oss_config", "--oss-config")
with_migration = _option_fixture("with_migration", "--with-migration")
vineyard_spark_jar_path = _option_fixture("vineyard_spark_jar_path", "--vineyard-spark-jar-path")
