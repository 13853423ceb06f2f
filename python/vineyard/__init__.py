"""vineyard: zero-copy sharing of immutable data between processes.

>>> import vineyard  # importing never loads libv6d (fork safety)
"""

from __future__ import annotations

from typing import Any

from . import io as io  # the stream resolvers register at import
from ._objects import Blob, Object
from ._session import BlobBuilder
from ._types import ObjectID, ObjectMeta
from ._version import __version__ as __version__
from .client import Client, InstanceStatus, connect
from .data import register_builder, register_resolver
from .deploy import init, shutdown
from .errors import *
from .errors import ForkError, VineyardException

__all__ = [
    "Blob", "BlobBuilder", "Client", "ForkError", "InstanceStatus", "Object", "ObjectID", "ObjectMeta",
    "VineyardException", "connect", "get", "init", "put", "register_builder", "register_resolver",
    "shutdown",
]


def put(value: Any, builder: Any = None, persist: bool = False, name: str | None = None, **kw: Any) -> ObjectID:
    """Puts ``value`` through a fresh connection to VINEYARD_IPC_SOCKET; see
    :meth:`Client.put` for the types, keywords and rules."""
    with connect() as client:
        return client.put(value, builder, persist, name, **kw)


def get(object_id: Any = None, name: str | None = None, resolver: Any = None, fetch: bool = False, **kw: Any) -> Any:
    """Gets a value through a connection to VINEYARD_IPC_SOCKET (kept alive
    by the value's views); see :meth:`Client.get` for the types, keywords
    and the zero-copy, read-only rules."""
    return connect().get(object_id, name, resolver, fetch, **kw)
