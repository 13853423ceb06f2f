"""Upstream's resolver contexts over :mod:`vineyard.data.registry`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any, Callable

from .._objects import object_type
from .._types import ObjectMeta
from ..data import registry

UpstreamResolver = Callable[..., Any]


class ResolverContext:
    """Resolvers by typename (its longest registered prefix wins, so
    ``"vineyard::Tensor"`` takes every ``vineyard::Tensor<T>``). The default
    context writes to the registry; a scoped one (:func:`resolver_context`)
    to its own table, looked up first while its block runs."""

    def __init__(self, table: dict[str, Any] | None = None) -> None:
        self._table = table  # None: the process-wide registry

    def register(self, typename: str, fn: UpstreamResolver) -> None:
        """Registers upstream's ``fn(obj, resolver, **kw)`` for ``typename``:
        it gets a :class:`vineyard.Object` whose blobs stay pinned while it
        lives, and as ``kw`` the keywords given to ``client.get``."""
        def adapted(session: Any, tree: dict[str, Any], pin: Any) -> Any:
            meta = ObjectMeta(tree)
            return fn(object_type(meta.typename)(meta, pin), _Running(self, session, pin), **registry.get_kwargs.get())

        if self._table is None:
            registry.register_resolver(typename, adapted)
        else:
            self._table[typename] = adapted


class _Running:
    """The context a resolver gets: ``run(obj)`` resolves a member (through
    the same get's session), ``register`` goes to the context."""

    def __init__(self, ctx: ResolverContext, session: Any, pin: Any) -> None:
        self._ctx, self._session, self._pin = ctx, session, pin

    def register(self, typename: str, fn: UpstreamResolver) -> None:
        self._ctx.register(typename, fn)

    def run(self, obj: Any, **kw: Any) -> Any:
        """The value of ``obj`` (a :class:`vineyard.Object` of this get)."""
        return registry.resolve(self._session, obj.meta._tree, getattr(obj, "_pin", None) or self._pin)

    __call__ = run


default_resolver_context = ResolverContext()


@contextlib.contextmanager
def resolver_context(resolvers: Mapping[str, UpstreamResolver] | None = None,
                     base: ResolverContext | None = None) -> Iterator[ResolverContext]:
    """A scope of resolvers: ``resolvers`` and whatever the block registers
    on the context it yields apply to every get until the block ends.
    ``base`` is accepted for upstream's signature (the registry is always
    the base)."""
    table: dict[str, Any] = {}
    ctx = ResolverContext(table)
    for typename, fn in (resolvers or {}).items():
        ctx.register(typename, fn)
    registry._resolver_scopes.append(table)
    try:
        yield ctx
    finally:
        registry._resolver_scopes.remove(table)
