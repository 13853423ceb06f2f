"""What Series and DataFrame share: ``attrs``, ``flags``, and making a got
object safe to write.

A got object's NumPy-backed values are read-only views of the store. pandas
(Copy-on-Write) copies a block before its first write when the block's values
are referenced elsewhere; :func:`protect` registers the get's pin (alive while
any view of the object's memory is) as such a reference of every block, so
that a write copies the block instead of failing with "assignment destination
is read-only", and never reaches the store. Blocks derived from these (views,
``df[col]``) share the same references, so they are protected as well.
"""

from __future__ import annotations

from typing import Any

from .._types import ObjectMeta
from . import labels

__all__ = ["decode_ndframe", "encode_ndframe", "protect"]


def encode_ndframe(meta: ObjectMeta, obj: Any) -> None:
    """Stores ``obj.attrs`` (when any) and ``obj.flags`` in ``meta``."""
    if obj.attrs:
        meta["attrs_"] = labels.encode_field(dict(obj.attrs))
    meta["allows_duplicate_labels_"] = bool(obj.flags.allows_duplicate_labels)


def decode_ndframe(obj: Any, tree: dict[str, Any], pin: Any) -> Any:
    """Restores what :func:`encode_ndframe` stored and protects ``obj``."""
    protect(obj, pin)
    if "attrs_" in tree:
        obj.attrs = labels.decode_field(tree["attrs_"])
    if tree.get("allows_duplicate_labels_") is False:
        obj.flags.allows_duplicate_labels = False
    return obj


def protect(obj: Any, pin: Any) -> None:
    """Makes every block of ``obj`` copy itself before a write (see above)."""
    if pin is None:
        return
    try:
        blocks = obj._mgr.blocks
        for block in blocks:
            block.refs.add_index_reference(pin)  # any weakref-able object counts as a reference
    except AttributeError:  # pandas internals changed: a write fails on read-only memory instead
        pass
