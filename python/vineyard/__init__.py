"""vineyard: zero-copy sharing of immutable data between processes.

>>> import vineyard  # importing never loads libv6d (fork safety)
"""

from __future__ import annotations

from typing import Any

from . import io as io  # the stream resolvers register at import
from ._objects import Blob, Object
from ._remote import RemoteBlob, RemoteBlobBuilder
from ._session import BlobBuilder
from ._types import ObjectID, ObjectMeta
from ._version import __version__ as __version__
from .client import Client, InstanceStatus, connect
from .data import register_builder, register_resolver
from .deploy import init, shutdown
from .errors import *
from .errors import ForkError, VineyardException

# Upstream's client classes: one class serves both transports here
# (Client.is_ipc / Client.is_rpc).
IPCClient = Client
RPCClient = Client

__all__ = [
    "Blob", "BlobBuilder", "Client", "ForkError", "IPCClient", "InstanceStatus", "Object", "ObjectID", "ObjectMeta",
    "RPCClient", "RemoteBlob", "RemoteBlobBuilder", "VineyardException", "connect", "get", "init", "put",
    "register_builder", "register_resolver", "shutdown",
]

# Upstream's top-level names of its submodules, loaded on first use
# (importing vineyard stays light): name -> (module, attribute).
_LAZY = {
    "BuilderContext": ("vineyard.core", "BuilderContext"),
    "ResolverContext": ("vineyard.core", "ResolverContext"),
    "builder_context": ("vineyard.core", "builder_context"),
    "resolver_context": ("vineyard.core", "resolver_context"),
    "default_builder_context": ("vineyard.core", "default_builder_context"),
    "default_resolver_context": ("vineyard.core", "default_resolver_context"),
    "register_builtin_types": ("vineyard.data", "register_builtin_types"),
    "try_init": ("vineyard.deploy.local", "try_init"),
    "get_current_socket": ("vineyard.deploy.local", "get_current_socket"),
}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'vineyard' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(where[0]), where[1])


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
