"""vineyard: zero-copy sharing of immutable data between processes.

>>> import vineyard  # importing never loads libv6d (fork safety)
"""

from __future__ import annotations

from typing import Any

from ._types import ObjectID, ObjectMeta
from ._version import __version__ as __version__
from .client import Blob, BlobBuilder, Client, InstanceStatus, Object, connect
from .data import register_builder, register_resolver
from .deploy import init, shutdown
from .errors import *
from .errors import ForkError, VineyardException

__all__ = [
    "Blob", "BlobBuilder", "Client", "ForkError", "InstanceStatus", "Object", "ObjectID", "ObjectMeta",
    "VineyardException", "connect", "get", "init", "put", "register_builder", "register_resolver",
    "shutdown",
]


def put(value: Any, persist: bool = False, name: str | None = None, **kw: Any) -> ObjectID:
    """Puts ``value`` through a fresh connection to VINEYARD_IPC_SOCKET."""
    with connect() as client:
        return client.put(value, persist=persist, name=name, **kw)


def get(object_id: Any = None, name: str | None = None, **kw: Any) -> Any:
    """Gets a value through a connection to VINEYARD_IPC_SOCKET."""
    return connect().get(object_id, name=name, **kw)
