"""``multiprocessing.shared_memory`` backed by the store: upstream's
:class:`SharedMemory` and :class:`ShareableList`, with CPython's semantics for
the operations both have.

>>> from vineyard import shared_memory  # importing never loads libv6d

A block is a blob. ``SharedMemory(client, create=True, size=n)`` creates an
unsealed blob whose ``buf`` is writable; :meth:`SharedMemory.freeze` (or
:meth:`~SharedMemory.close`) seals it: from then on the bytes are immutable
and every process can attach it by name, its ``buf`` a read-only view of the
same physical memory. That is the one difference from CPython, whose blocks
stay writable and are visible before anything is sealed: attaching a block
its creator has not frozen yet raises ``ObjectNotSealedException``.

Names: a block created without a name is named by its blob id
(``"o8000…"``, upstream's ``name``); one created with ``name="x"`` (CPython's
form; upstream refuses it) gets that name in the store when it is frozen.
Attaching accepts either. A named block is persisted, so its name works
from every daemon of a cluster (``--meta etcd``): attaching it from another
daemon copies its bytes there once (migrate; that daemon keeps the copy
for later attaches), and an unlink there drops the name and that copy.

The rest is CPython's: ``close()`` releases ``buf`` (``None`` afterwards;
``BufferError`` while something still holds an export of it) and keeps the
block; ``unlink()`` deletes it, while views other processes hold stay valid
until they release them; a second ``unlink()``, or attaching a name that does
not exist, raises ``FileNotFoundError``; creating a name that exists raises
``FileExistsError``; pickling sends the name (and the daemon's socket), so the
receiving process attaches the same block.
"""

from __future__ import annotations

from .shared_memory import (
    ShareableList,
    SharedMemory,
    SharedMemoryExistsError,
    SharedMemoryNotFoundError,
)

__all__ = ["ShareableList", "SharedMemory", "SharedMemoryExistsError", "SharedMemoryNotFoundError"]
