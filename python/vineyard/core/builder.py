"""Upstream's builder contexts over :mod:`vineyard.data.registry`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any, Callable

from ..data import registry

UpstreamBuilder = Callable[..., Any]


class BuilderContext:
    """Builders by Python type (or ``"module.QualName"``). The default
    context writes to the registry; a scoped one (:func:`builder_context`)
    to its own table, looked up first while its block runs."""

    def __init__(self, table: dict[type | str, Any] | None = None) -> None:
        self._table = table  # None: the process-wide registry

    def register(self, pytype: type | str, fn: UpstreamBuilder) -> None:
        """Registers upstream's ``fn(client, value, builder, **kw)`` for ``pytype``."""
        def adapted(session: Any, value: Any, **kw: Any) -> Any:
            return fn(session.client, value, self, **kw)

        if self._table is None:
            registry.register_builder(pytype, adapted)
        else:
            self._table[pytype] = adapted

    def run(self, client: Any, value: Any, **kw: Any) -> Any:
        """Puts ``value`` with ``client`` (its ObjectID), as ``client.put``."""
        return client.put(value, **kw)

    __call__ = run


default_builder_context = BuilderContext()


@contextlib.contextmanager
def builder_context(builders: Mapping[type | str, UpstreamBuilder] | None = None,
                    base: BuilderContext | None = None) -> Iterator[BuilderContext]:
    """A scope of builders: ``builders`` and whatever the block registers on
    the context it yields apply to every put until the block ends. ``base``
    is accepted for upstream's signature (the registry is always the base)."""
    table: dict[type | str, Any] = {}
    ctx = BuilderContext(table)
    for pytype, fn in (builders or {}).items():
        ctx.register(pytype, fn)
    registry._builder_scopes.append(table)
    registry._by_type.clear()
    try:
        yield ctx
    finally:
        registry._builder_scopes.remove(table)
