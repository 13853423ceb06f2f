"""Upstream's extension module ``vineyard._C`` names the core types; ours
are Python classes of the package, re-exported here under those names so
that ``from vineyard._C import ObjectMeta`` works unchanged. ``IPCClient``
and ``RPCClient`` are both :class:`vineyard.Client` (one class serves both
transports: :attr:`Client.is_ipc` / :attr:`Client.is_rpc`)."""

# ruff: noqa: N999 (upstream's module name)
from __future__ import annotations

from ._objects import Blob, Object
from ._remote import RemoteBlob, RemoteBlobBuilder
from ._session import BlobBuilder
from ._types import ObjectID, ObjectMeta
from .client import Client, InstanceStatus, connect
from .errors import *
from .errors import VineyardException

IPCClient = Client
RPCClient = Client
ClientBase = Client

__all__ = ["Blob", "BlobBuilder", "ClientBase", "IPCClient", "InstanceStatus", "Object", "ObjectID", "ObjectMeta",
           "RPCClient", "RemoteBlob", "RemoteBlobBuilder", "VineyardException", "connect"]
