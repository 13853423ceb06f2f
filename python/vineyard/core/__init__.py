"""Upstream Vineyard's ``vineyard.core`` names, as a thin layer over
:mod:`vineyard.data`'s registry (there is one registry: these contexts are
views of it, not a second implementation).

- :data:`default_builder_context` / :data:`default_resolver_context`: the
  process-wide registry; ``register(type_or_typename, fn)`` adds to it.
- :func:`builder_context` / :func:`resolver_context`: a ``with`` block whose
  registrations take precedence over the registry and end with the block
  (process-wide while the block runs, not per thread).

Functions registered here take upstream's signatures:
``builder(client, value, builder_context, **kw)`` returning an ObjectID or
ObjectMeta, and ``resolver(obj, resolver_context, **kw)`` taking a
:class:`vineyard.Object`. Functions registered with
:func:`vineyard.register_builder` / :func:`vineyard.register_resolver` keep
ours (``fn(session, value, **kw)`` / ``fn(session, tree, pin)``).
"""

from __future__ import annotations

from .builder import BuilderContext, builder_context, default_builder_context
from .resolver import ResolverContext, default_resolver_context, resolver_context

__all__ = ["BuilderContext", "ResolverContext", "builder_context", "default_builder_context",
           "default_resolver_context", "resolver_context"]
