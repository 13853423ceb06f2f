"""Builders (put) and resolvers (get) per type, and their registry.

A builder ``fn(session, value, **kw)`` stores ``value`` and returns either the
:class:`~vineyard.ObjectID` of an object it created, or an
:class:`~vineyard.ObjectMeta` not created yet: :func:`build` creates that one
(with every blob it references sealed in the same round trip), and a builder of
a composite value embeds it as a member with :func:`build_meta`, so that a
whole tree is created at once. Builders are picked by the first registered
type in ``type(value).__mro__``; a type may be registered by its class or by
its qualified name (``"pandas.core.frame.DataFrame"``), so that registering
never imports the library that defines it.

A resolver ``fn(session, tree, pin)`` turns a metadata tree (a dict, whose
blobs this connection holds while ``pin`` lives) into a value; the longest
registered typename prefix wins.

The ``session`` (:class:`vineyard._session.Session`) is the small context a
builder or resolver works in: ``create_blob``, ``create_metadata``, the blobs
a get pinned (``blob_pointer``), private views; ``session.client`` is the
public client for anything else.

Register your own with :func:`register_builder` / :func:`register_resolver`.
"""

from __future__ import annotations

from .._objects import object_type, register_object_type
from . import arrays, arrow, base, dataframe, dlpack_types, global_objects, series, tensor
from . import torch as torch_types  # never imports torch itself
from .registry import (
    build,
    build_meta,
    register_builder,
    register_protocol_builder,
    register_resolver,
    resolve,
)

__all__ = ["build", "build_meta", "object_type", "register_builder", "register_builtin_types",
           "register_object_type", "register_protocol_builder", "register_resolver", "resolve"]


def register_builtin_types(builder_ctx: object = None, resolver_ctx: object = None) -> None:
    """Upstream's call to register the built-in types on its contexts
    (``register_builtin_types(default_builder_context,
    default_resolver_context)``). Ours are registered when the package is
    imported and the contexts are views of one registry, so there is nothing
    left to do: kept so that upstream's code runs unchanged."""


def _register_builtins() -> None:
    base.register()
    tensor.register()
    torch_types.register()
    arrow.register()
    dlpack_types.register()  # after Arrow's: a value with both protocols is stored as Arrow
    arrays.register()
    series.register()
    dataframe.register()
    global_objects.register()


_register_builtins()
