"""The registries of builders and resolvers, and the dispatch through them
(see :mod:`vineyard.data`)."""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Callable, Union

from .._types import ObjectID, ObjectMeta

__all__ = ["build", "build_meta", "register_builder", "register_protocol_builder", "register_resolver", "resolve"]

Builder = Callable[..., Union[ObjectID, ObjectMeta]]
Resolver = Callable[[Any, dict[str, Any], Any], Any]

_builders: dict[type | str, Builder] = {}
_protocol_builders: list[tuple[Callable[[Any], bool], Builder]] = []
_resolvers: dict[str, Resolver] = {}
_by_type: dict[type, Builder] = {}  # resolved lookups, cleared on every registration
_by_typename: dict[str, Resolver] = {}  # the same for resolvers
# Scoped registrations (vineyard.core's builder_context / resolver_context):
# the innermost scope first, looked up before the registries above, never cached.
_builder_scopes: list[dict[type | str, Builder]] = []
_resolver_scopes: list[dict[str, Resolver]] = []
# The keywords of the running client.get (upstream passes them to resolvers:
# vineyard.contrib.dask's take dask_scheduler...); resolvers registered with
# upstream's signature (vineyard.core) get them as **kw.
get_kwargs: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
    "vineyard_get_kwargs", default=MappingProxyType({}))


def register_builder(pytype: type | str, fn: Builder) -> None:
    """Registers ``fn`` to put values of ``pytype`` (a class, or its
    ``"module.QualName"``) and of its subclasses."""
    _builders[pytype] = fn
    _by_type.clear()


def register_protocol_builder(accepts: Callable[[Any], bool], fn: Builder) -> None:
    """Registers ``fn`` for values no type builder takes but ``accepts(value)``
    does (e.g. objects exposing ``__arrow_c_stream__``); tried in order of
    registration, before the pickle fallback."""
    _protocol_builders.append((accepts, fn))
    _by_type.clear()


def register_resolver(typename_prefix: str, fn: Resolver) -> None:
    """Registers ``fn`` to get objects whose typename starts with the prefix."""
    _resolvers[typename_prefix] = fn
    _by_typename.clear()


def _scoped_builder(klass: type) -> Builder | None:
    for scope in reversed(_builder_scopes):
        for k in klass.__mro__:
            fn = scope.get(k) or scope.get(f"{k.__module__}.{k.__qualname__}")
            if fn is not None:
                return fn
    return None


def _builder_for(value: Any) -> Builder:
    klass = type(value)
    if _builder_scopes:
        fn = _scoped_builder(klass)
        if fn is not None:
            return fn
    fn = _by_type.get(klass)
    if fn is not None:
        return fn
    for k in klass.__mro__:
        fn = _builders.get(k) or _builders.get(f"{k.__module__}.{k.__qualname__}")
        if fn is None or k is object:
            continue
        _by_type[klass] = fn
        return fn
    for accepts, fn in _protocol_builders:
        if accepts(value):
            return fn  # not cached: the protocol is a property of the value
    fn = _builders.get(object)
    if fn is None:
        raise TypeError(f"vineyard: no builder takes a {klass.__qualname__} (and none is registered for object)")
    return fn


def build_meta(session: Any, value: Any, **kw: Any) -> ObjectID | ObjectMeta:
    """Runs the builder of ``value``: an ObjectID, or an ObjectMeta to embed
    as a member (created together with its parent)."""
    return _builder_for(value)(session, value, **kw)


def build(session: Any, value: Any, **kw: Any) -> ObjectID:
    """Stores ``value`` and returns its id."""
    out = build_meta(session, value, **kw)
    if isinstance(out, ObjectMeta):
        return out.id if out.created else session.create(out)
    return ObjectID(out)


def resolve(session: Any, tree: dict[str, Any], pin: Any) -> Any:
    """Turns a tree into a value with the resolver of its typename, or returns
    its ObjectMeta when no resolver matches."""
    fn = resolver_of(str(tree.get("typename", "")))
    if fn is None:
        return ObjectMeta(tree)
    return fn(session, tree, pin)


def resolver_of(typename: str) -> Any:
    """The resolver of ``typename`` (its longest registered prefix), or None."""
    for scope in reversed(_resolver_scopes):
        best = max((p for p in scope if typename.startswith(p)), key=len, default=None)
        if best is not None:
            return scope[best]
    fn = _by_typename.get(typename)
    if fn is None:
        best = ""
        for prefix in _resolvers:
            if typename.startswith(prefix) and len(prefix) > len(best):
                best = prefix
        if not best:
            return None
        fn = _by_typename[typename] = _resolvers[best]
    return fn


