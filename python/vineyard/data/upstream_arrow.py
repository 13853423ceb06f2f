"""Reading the Arrow objects upstream Vineyard's Python package writes
(docs/protocol.md, "Layouts shared with upstream"): per-type members instead
of our ``buffers_-<i>`` and ``format_``.

| typename | fields | members |
|---|---|---|
| ``vineyard::NumericArray<T>`` (T an Arrow type name) | ``length_``, ``null_count_``, ``offset_`` | ``buffer_``, ``null_bitmap_`` |
| ``vineyard::BooleanArray`` | as above | ``buffer_``, ``null_bitmap_`` |
| ``vineyard::FixedSizeBinaryArray`` | as above, ``byte_width_`` | ``buffer_``, ``null_bitmap_`` |
| ``vineyard::BaseBinaryArray<arrow::LargeStringArray>`` (and ``...LargeBinaryArray>``) | as above | ``buffer_offsets_`` (int64), ``buffer_data_``, ``null_bitmap_`` |
| ``vineyard::NullArray`` | ``length_`` | none |
| ``vineyard::LargeListArray`` | as above | ``buffer_offsets_``, ``null_bitmap_``, ``values_`` (an array) |
| ``vineyard::SchemaProxy`` | ``schema_binary_``: JSON ``{"bytes": [...]}`` of the IPC schema | or ``buffer_`` |
| ``vineyard::RecordBatch`` | ``__columns_-size`` | ``schema_`` (SchemaProxy), ``__columns_-<i>`` |
| ``vineyard::Table`` | ``batch_num_`` | ``schema_``, ``partitions_-<i>`` (record batches) |
| ``vineyard::PickleBuffer`` (a column or list values) | ``size_`` | ``buffer_``: the pickle of an array upstream has no layout for (struct, 32-bit binary) |

Buffers are the shared memory (``pyarrow.foreign_buffer`` over the blobs,
kept alive by the get's pin), as for our own layout. A tree that does not
fit is a ``ValueError`` naming the object, its typename and what is missing.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .._types import ObjectID

__all__ = ["is_upstream_arrow", "resolve_upstream_arrow"]

_EMPTY_BLOB = 1 << 63
_NUMERIC = re.compile(r"vineyard::NumericArray<([^>]+)>")
_STRING = ("vineyard::BaseBinaryArray<arrow::LargeStringArray>", "vineyard::LargeStringArray")
_BINARY = ("vineyard::BaseBinaryArray<arrow::LargeBinaryArray>", "vineyard::LargeBinaryArray")
# upstream writes str(pyarrow type); these differ from pyarrow's aliases
_ALIASES = {"double": "float64", "float": "float32", "halffloat": "float16", "int": "int32"}


def is_upstream_arrow(tree: dict[str, Any]) -> bool:
    """Reports whether an Arrow tree is in upstream's layout (ours always
    has ``format_`` on array nodes and no SchemaProxy)."""
    typename = str(tree.get("typename", ""))
    if typename == "vineyard::Table":
        first = tree.get("partitions_-0")
        if isinstance(first, dict):
            return is_upstream_arrow(first)
    if typename in ("vineyard::RecordBatch", "vineyard::Table"):
        # ours may carry a SchemaProxy too (for upstream's reader), but its
        # columns have format_
        schema, first = tree.get("schema_"), tree.get("__columns_-0")
        return (isinstance(schema, dict) and schema.get("typename") == "vineyard::SchemaProxy"
                and not (isinstance(first, dict) and "format_" in first))
    return "format_" not in tree and ("buffer_" in tree or "buffer_offsets_" in tree
                                      or typename == "vineyard::NullArray")


def _fail(tree: dict[str, Any], what: str) -> ValueError:
    return ValueError(f"vineyard: object {tree.get('id')} ({tree.get('typename')}): {what}")


def _buffer(session: Any, tree: dict[str, Any], key: str, pin: Any) -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]

    member = tree.get(key)
    if not isinstance(member, dict) or "id" not in member:
        raise _fail(tree, f"member {key} is missing")
    bid = int(ObjectID(member["id"]))
    if bid == _EMPTY_BLOB:
        return None
    address, size = session.blob_pointer(bid)
    return pa.foreign_buffer(address, size, base=pin)


def _ints(tree: dict[str, Any], *keys: str) -> list[int]:
    try:
        return [int(tree[k]) for k in keys]
    except KeyError as e:
        raise _fail(tree, f"field {e.args[0]} is missing") from None


def resolve_upstream_arrow(session: Any, tree: dict[str, Any], pin: Any) -> Any:
    """The pyarrow object of an upstream Arrow tree (see the module doc)."""
    import pyarrow as pa

    typename = str(tree.get("typename", ""))
    if typename == "vineyard::Table":
        n = _ints(tree, "batch_num_")[0]
        schema = _schema(session, tree["schema_"], pin)
        batches = [resolve_upstream_arrow(session, tree[f"partitions_-{i}"], pin) for i in range(n)]
        return pa.Table.from_batches(batches, schema=schema)
    if typename == "vineyard::RecordBatch":
        n = _ints(tree, "__columns_-size")[0]
        schema = _schema(session, tree["schema_"], pin)
        columns = [resolve_upstream_arrow(session, tree[f"__columns_-{i}"], pin) for i in range(n)]
        return pa.RecordBatch.from_arrays(columns, schema=schema)
    if typename == "vineyard::PickleBuffer":
        # an array upstream has no layout for (a struct, a 32-bit binary
        # array): its client pickles it, in a batch as alone
        from .registry import resolve

        value = resolve(session, tree, pin)
        if not isinstance(value, pa.Array):
            raise _fail(tree, f"a pickled {type(value).__name__} where an Arrow array was expected")
        return value
    if typename == "vineyard::NullArray":
        length = _ints(tree, "length_")[0]
        return pa.Array.from_buffers(pa.null(), length, [None], length, 0)
    length, nulls, offset = _ints(tree, "length_", "null_count_", "offset_")
    validity = _buffer(session, tree, "null_bitmap_", pin)
    if nulls and validity is None:
        raise _fail(tree, f"{nulls} nulls but no null_bitmap_")
    numeric = _NUMERIC.fullmatch(typename)
    if numeric or typename in ("vineyard::BooleanArray", "vineyard::FixedSizeBinaryArray"):
        if numeric:
            name = numeric.group(1)
            try:
                dtype = pa.type_for_alias(_ALIASES.get(name, name))
            except ValueError:
                raise _fail(tree, f"unknown Arrow type {name!r}") from None
        elif typename == "vineyard::BooleanArray":
            dtype = pa.bool_()
        else:
            dtype = pa.binary(_ints(tree, "byte_width_")[0])
        return _checked(tree, lambda: pa.Array.from_buffers(
            dtype, length, [validity, _buffer(session, tree, "buffer_", pin)], nulls, offset))
    if typename in _STRING or typename in _BINARY:
        dtype = pa.large_string() if typename in _STRING else pa.large_binary()
        bufs = [validity, _buffer(session, tree, "buffer_offsets_", pin), _buffer(session, tree, "buffer_data_", pin)]
        return _checked(tree, lambda: pa.Array.from_buffers(dtype, length, bufs, nulls, offset))
    if typename == "vineyard::LargeListArray":
        if not isinstance(tree.get("values_"), dict):
            raise _fail(tree, "member values_ is missing")
        values = resolve_upstream_arrow(session, tree["values_"], pin)
        bufs = [validity, _buffer(session, tree, "buffer_offsets_", pin)]
        return _checked(tree, lambda: pa.Array.from_buffers(pa.large_list(values.type), length, bufs, nulls,
                                                            offset, [values]))
    raise _fail(tree, "not an Arrow layout upstream writes")


def _checked(tree: dict[str, Any], make: Any) -> Any:
    """The array ``make`` builds, fully validated: buffers too short for the
    tree are an error, never a read past a blob."""
    try:
        array = make()
        array.validate(full=True)
    except Exception as e:
        raise _fail(tree, f"buffers do not fit: {e}") from e
    return array


def _schema(session: Any, tree: Any, pin: Any) -> Any:
    import pyarrow as pa

    if not isinstance(tree, dict):
        raise TypeError("vineyard: schema_ is not a SchemaProxy object")
    if "schema_binary_" in tree:
        data = json.loads(tree["schema_binary_"])
        if not isinstance(data, dict) or "bytes" not in data:
            raise _fail(tree, "schema_binary_ has no bytes")
        buf = pa.py_buffer(bytearray(data["bytes"]))
    else:
        buf = _buffer(session, tree, "buffer_", pin)
    return pa.ipc.read_schema(buf)


def resolve_schema(session: Any, tree: dict[str, Any], pin: Any) -> Any:
    """Resolver of ``vineyard::SchemaProxy``: a pyarrow Schema."""
    return _schema(session, tree, pin)
