"""Arrow data, zero-copy through the Arrow C data interface.

Put copies every buffer once into the shared arena (two round trips, however
many columns and chunks); get returns pyarrow objects whose buffers *are* the
shared memory (one round trip). Types: ``pyarrow.Array`` (every Arrow type:
numeric, bool, strings and binaries incl. views, decimals, temporal, list,
struct, map, union, dictionary, run-end encoded), ``ChunkedArray``,
``RecordBatch``, ``Table``, and anything exposing the Arrow PyCapsule
interface (``__arrow_c_stream__`` / ``__arrow_c_array__``): a polars
DataFrame or Series, a duckdb result, a nanoarrow array... A polars
DataFrame (Series) comes back as a polars DataFrame (Series) when polars is
importable, built straight from the shared buffers; everything else as
pyarrow.

:meth:`vineyard.Client.get_object` of an Arrow object returns an
:class:`ArrowObject`, which implements the PyCapsule interface itself, so
``pa.table(obj)``, ``pl.DataFrame(obj)`` or duckdb read the shared memory
without pyarrow in between.

Nothing here imports pyarrow (or polars) until a value needs it.
"""

from __future__ import annotations

import ctypes
import json
from ctypes import POINTER, c_char_p, c_int64, c_size_t, c_void_p
from typing import Any

from .. import _ffi
from .._bindings import ARROW_CHUNKED, ARROW_RECORD_BATCH
from .._objects import Object, register_object_type
from .._types import ObjectID
from .registry import register_builder, register_protocol_builder, register_resolver, resolver_of
from .upstream_arrow import is_upstream_arrow, resolve_schema, resolve_upstream_arrow

__all__ = [
    "ARROW_TYPENAMES", "ArrowArray", "ArrowArrayStream", "ArrowObject", "ArrowSchema", "arrow_exports",
    "is_arrow_typename", "put_arrow", "register", "resolve_arrow",
]


# The typenames of Arrow objects (docs/protocol.md, "Arrow objects"): a
# typename is Arrow if it starts with one of these.
ARROW_TYPENAMES = (
    "vineyard::NullArray", "vineyard::BooleanArray", "vineyard::NumericArray<", "vineyard::DecimalArray<",
    "vineyard::TemporalArray<", "vineyard::IntervalArray<", "vineyard::BaseBinaryArray<",
    "vineyard::BinaryViewArray<", "vineyard::FixedSizeBinaryArray", "vineyard::ListArray",
    "vineyard::LargeListArray", "vineyard::ListViewArray", "vineyard::LargeListViewArray",
    "vineyard::FixedSizeListArray", "vineyard::MapArray", "vineyard::StructArray", "vineyard::UnionArray",
    "vineyard::RunEndEncodedArray", "vineyard::DictionaryArray<", "vineyard::RecordBatch", "vineyard::Table",
    "vineyard::ChunkedArray",
)

_TABLE, _BATCH, _CHUNKED_ARRAY = "vineyard::Table", "vineyard::RecordBatch", "vineyard::ChunkedArray"
_PRODUCER = "producer_"


def is_arrow_typename(typename: str) -> bool:
    """Reports whether objects of ``typename`` are Arrow objects."""
    return typename.startswith(ARROW_TYPENAMES)


# ---- the C structs ----------------------------------------------------------

_release_fn = ctypes.CFUNCTYPE(None, c_void_p)  # calls release without the GIL


class ArrowSchema(ctypes.Structure):
    """``struct ArrowSchema`` of the Arrow C data interface."""

    _fields_ = [("format", c_char_p), ("name", c_char_p), ("metadata", c_void_p), ("flags", c_int64),
                ("n_children", c_int64), ("children", c_void_p), ("dictionary", c_void_p),
                ("release", c_void_p), ("private_data", c_void_p)]


class ArrowArray(ctypes.Structure):
    """``struct ArrowArray`` of the Arrow C data interface."""

    _fields_ = [("length", c_int64), ("null_count", c_int64), ("offset", c_int64), ("n_buffers", c_int64),
                ("n_children", c_int64), ("buffers", POINTER(c_void_p)), ("children", c_void_p),
                ("dictionary", c_void_p), ("release", c_void_p), ("private_data", c_void_p)]


class ArrowArrayStream(ctypes.Structure):
    """``struct ArrowArrayStream`` of the Arrow C stream interface."""

    _fields_ = [("get_schema", c_void_p), ("get_next", c_void_p), ("get_last_error", c_void_p),
                ("release", c_void_p), ("private_data", c_void_p)]


def _release(ptr: int, struct: type[ctypes.Structure]) -> None:
    """Calls the release callback of the struct at ``ptr`` if it is set."""
    fn = struct.from_address(ptr).release
    if fn:
        _release_fn(fn)(ptr)


# ---- PyCapsules, in pure ctypes ---------------------------------------------

_libc = ctypes.CDLL(None)
_libc.calloc.restype, _libc.calloc.argtypes = c_void_p, [c_size_t, c_size_t]
_libc.free.restype, _libc.free.argtypes = None, [c_void_p]
_libc.strdup.restype, _libc.strdup.argtypes = c_void_p, [c_char_p]

_capsule_destructor = ctypes.CFUNCTYPE(None, c_void_p)
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype, _capsule_new.argtypes = ctypes.py_object, [c_void_p, c_void_p, _capsule_destructor]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = c_void_p, [ctypes.py_object, c_char_p]
# The destructor gets the dying capsule: never turn it into a py_object (that
# resurrects it and the destructor runs twice). A raw prototype takes it as a
# plain pointer.
_capsule_pointer_raw = ctypes.PYFUNCTYPE(c_void_p, c_void_p, c_void_p)(("PyCapsule_GetPointer", ctypes.pythonapi))


def _make_kind(name: bytes, struct: type[ctypes.Structure]) -> tuple[int, Any]:
    # The name and the destructor must outlive every capsule, also at
    # interpreter exit when module globals are cleared: the name is malloc'ed
    # and never freed, the destructor's refcount raised and never dropped.
    cname = _libc.strdup(name)

    def destroy(capsule: int) -> None:
        ptr = _capsule_pointer_raw(capsule, cname)
        if ptr:
            _release(ptr, struct)  # a consumer that moved the struct set release NULL
            _libc.free(ptr)

    fn = _capsule_destructor(destroy)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(fn))
    return cname, fn


_SCHEMA = _make_kind(b"arrow_schema", ArrowSchema)
_ARRAY = _make_kind(b"arrow_array", ArrowArray)
_STREAM = _make_kind(b"arrow_array_stream", ArrowArrayStream)


def _alloc(struct: type[ctypes.Structure]) -> int:
    ptr = _libc.calloc(1, ctypes.sizeof(struct))
    if not ptr:
        raise MemoryError
    return ptr


def _capsule(kind: tuple[int, Any], ptr: int) -> Any:
    """Wraps the calloc'ed struct at ptr in a capsule that owns it."""
    try:
        return _capsule_new(ptr, kind[0], kind[1])
    except BaseException:
        _libc.free(ptr)
        raise


def _pointer(capsule: Any, name: bytes) -> int:
    ptr = _capsule_pointer(capsule, name)
    if not ptr:
        raise TypeError(f"not an {name.decode()} capsule")
    return ptr


def arrow_exports() -> int:
    """The number of Arrow structs libv6d exported that are not released yet
    (``v6d_arrow_exports``): for leak checks."""

    return int(_ffi.lib().v6d_arrow_exports())


# ---- exports from a metadata tree (no round trip) ---------------------------

def _tree_json(tree: dict[str, Any], pin: Any = None) -> bytes:
    """The JSON of tree: the bytes the get received when tree is its root."""
    root = getattr(pin, "root", None)
    if root is not None and (root[0] is tree or ("id" in tree and root[0].get("id") == tree["id"])):
        return root[1]
    return json.dumps(tree, separators=(",", ":")).encode()


def _export_stream(session: Any, body: bytes, handle: int | None = None) -> int:
    """A calloc'ed ArrowArrayStream over the object of tree ``body``."""
    if _ffi.forked_child():
        raise _ffi.forked_refusal("an Arrow object (exported by libv6d)")
    ptr = _alloc(ArrowArrayStream)
    try:
        _ffi.call("v6d_arrow_stream_from_meta", handle if handle is not None else session.handle(), body, len(body),
              ptr)
    except BaseException:
        _libc.free(ptr)
        raise
    return ptr


def _export_array(session: Any, body: bytes, handle: int | None = None) -> tuple[int, int]:
    """A calloc'ed (ArrowSchema, ArrowArray) pair over the object of ``body``."""
    if _ffi.forked_child():
        raise _ffi.forked_refusal("an Arrow object (exported by libv6d)")
    sptr, aptr = _alloc(ArrowSchema), _alloc(ArrowArray)
    try:
        _ffi.call("v6d_arrow_array_from_meta", handle if handle is not None else session.handle(), body, len(body),
              aptr, sptr)
    except BaseException:
        _libc.free(sptr)
        _libc.free(aptr)
        raise
    return sptr, aptr


class _StreamHolder:
    """Hands one stream capsule to a consumer that takes the protocol."""

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        capsule, self._capsule = self._capsule, None
        if capsule is None:
            raise RuntimeError("vineyard: this Arrow stream was consumed already")
        return capsule


def resolve_arrow(session: Any, tree: dict[str, Any], pin: Any = None) -> Any:
    """Returns the pyarrow object (Array, ChunkedArray, RecordBatch, Table)
    of an Arrow tree whose blobs this connection holds: the tree
    ``client.get_object`` got, or any Arrow member subtree of it. No round
    trip; the buffers are the shared memory, held until the result (and
    everything sharing its buffers) is garbage collected. A tree put from a
    polars DataFrame or Series resolves to polars when polars is importable.
    """
    if is_upstream_arrow(tree):  # written by upstream's package
        return resolve_upstream_arrow(session, tree, pin)
    return _resolve_body(session, str(tree.get("typename", "")), tree.get(_PRODUCER), _tree_json(tree, pin))


def arrow_plan(tree: dict[str, Any]) -> Any:
    """A get of every later tree of ``tree``'s shape (its shape number, see
    v6d_get_object_shaped) from its text, without parsing it in Python:
    ``plan(session, raw, pin)`` is what :func:`resolve_arrow` returns for such a
    tree, given the text the get returned (libv6d reads the text, as it does
    for every Arrow get), or None where the plan does not apply. None when
    ``tree`` is not an Arrow tree of ours whose resolver is
    :func:`resolve_arrow`.

    Within one shape everything but the ids and signatures is the same text:
    the typename, the producer and the layout (ours or upstream's) are those
    of ``tree``. Each call still checks that :func:`resolve_arrow` is the
    resolver registered for the typename. Parsing the tree was half of a
    table's get (70 µs of 134 for 10 columns)."""
    typename = tree.get("typename")
    if not isinstance(typename, str) or resolver_of(typename) is not resolve_arrow or is_upstream_arrow(tree):
        return None
    producer = tree.get(_PRODUCER)

    def plan(session: Any, raw: bytes, pin: Any) -> Any:
        if resolver_of(typename) is not resolve_arrow:
            return None
        return _resolve_body(session, typename, producer, raw)

    return plan


def _resolve_body(session: Any, typename: str, producer: Any, body: bytes) -> Any:
    """resolve_arrow of a tree of ours, given its typename, producer and text."""
    if producer in ("polars.DataFrame", "polars.Series"):
        try:
            import polars as pl
        except ImportError:
            pass
        else:
            stream = _StreamHolder(_capsule(_STREAM, _export_stream(session, body)))
            return pl.DataFrame(stream) if producer == "polars.DataFrame" else pl.Series(stream)
    import pyarrow as pa  # type: ignore[import-untyped]

    if typename in (_TABLE, _CHUNKED_ARRAY):
        capsule = _capsule(_STREAM, _export_stream(session, body))
        if typename == _TABLE:
            return pa.RecordBatchReader._import_from_c_capsule(capsule).read_all()
        return pa.ChunkedArray._import_from_c_capsule(capsule)
    sptr, aptr = _export_array(session, body)
    schema, array = _capsule(_SCHEMA, sptr), _capsule(_ARRAY, aptr)
    if typename == _BATCH:
        return pa.RecordBatch._import_from_c_capsule(schema, array)
    return pa.Array._import_from_c_capsule(schema, array)


class ArrowObject(Object):
    """An Arrow object got with :meth:`vineyard.Client.get_object`: its
    metadata, and the Arrow PyCapsule interface over the shared buffers, so
    that ``pa.table(obj)``, ``pa.array(obj)``, ``pl.DataFrame(obj)`` or
    duckdb read them without a copy (and without pyarrow). Each call exports
    afresh, without a round trip; ``requested_schema`` is ignored (the data
    is given as stored)."""

    def _body(self) -> tuple[bytes, int]:
        pin = self._pin
        if pin is None:
            raise RuntimeError("vineyard: this Object holds no data (got without a pin)")
        return _tree_json(self.meta._tree, pin), pin.conn.handle

    def __arrow_c_schema__(self) -> Any:
        body, handle = self._body()
        stream = _export_stream(None, body, handle)
        try:
            sptr = _alloc(ArrowSchema)
            s = ArrowArrayStream.from_address(stream)
            rc = ctypes.CFUNCTYPE(ctypes.c_int, c_void_p, c_void_p)(s.get_schema)(stream, sptr)
            if rc != 0:
                _libc.free(sptr)
                raise OSError(rc, "vineyard: cannot export the Arrow schema")
            return _capsule(_SCHEMA, sptr)
        finally:
            _release(stream, ArrowArrayStream)
            _libc.free(stream)

    def __arrow_c_array__(self, requested_schema: Any = None) -> tuple[Any, Any]:
        body, handle = self._body()
        sptr, aptr = _export_array(None, body, handle)
        return _capsule(_SCHEMA, sptr), _capsule(_ARRAY, aptr)

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        body, handle = self._body()
        return _capsule(_STREAM, _export_stream(None, body, handle))


# ---- put --------------------------------------------------------------------

def _qualname(value: Any) -> str:
    klass = type(value)
    return f"{klass.__module__}.{klass.__qualname__}"


def _kind(value: Any) -> tuple[str, int, str | None]:
    """How to put ``value``: ("stream" | "array", flags, producer)."""
    name = _qualname(value)
    if name.startswith("pyarrow."):
        import pyarrow as pa  # type: ignore[import-untyped]

        if isinstance(value, (pa.Table, pa.RecordBatchReader)):
            return "stream", 0, None
        if isinstance(value, pa.ChunkedArray):
            return "stream", ARROW_CHUNKED, None
        if isinstance(value, pa.RecordBatch):
            return "array", ARROW_RECORD_BATCH, None
        if isinstance(value, pa.Array):
            return "array", 0, None
    if name.startswith("polars.") and hasattr(value, "__arrow_c_stream__"):
        import polars as pl

        if isinstance(value, pl.DataFrame):
            return "stream", 0, "polars.DataFrame"
        if isinstance(value, pl.Series):
            return "stream", ARROW_CHUNKED, "polars.Series"
    if hasattr(value, "__arrow_c_stream__"):
        return "stream", 0, None
    if hasattr(value, "__arrow_c_array__"):
        return "array", 0, None
    raise TypeError(f"vineyard: {name} is not Arrow data (it has neither __arrow_c_stream__ nor __arrow_c_array__)")


def put_arrow(session: Any, obj: Any) -> ObjectID:
    """Stores ``obj`` (a pyarrow Array, ChunkedArray, RecordBatch, Table or
    RecordBatchReader, or any object exposing ``__arrow_c_stream__`` or
    ``__arrow_c_array__``) and returns its id. Every buffer is copied once;
    two round trips. A stream of struct arrays is stored as a Table, of any
    other type as a ChunkedArray; a pyarrow RecordBatch as a RecordBatch."""
    how, flags, producer = _kind(obj)
    extra = json.dumps({_PRODUCER: producer}).encode() if producer else None
    out = ctypes.c_uint64()
    if how == "stream":
        capsule = obj.__arrow_c_stream__()
        _ffi.call("v6d_put_arrow_stream", session.handle(), _pointer(capsule, b"arrow_array_stream"), flags, extra,
              ctypes.byref(out))
    else:
        schema, array = obj.__arrow_c_array__()
        _ffi.call("v6d_put_arrow_array", session.handle(), _pointer(array, b"arrow_array"),
              _pointer(schema, b"arrow_schema"), flags, extra, ctypes.byref(out))
    return ObjectID(out.value)


def _build(session: Any, value: Any, **kw: Any) -> ObjectID:
    return put_arrow(session, value)


def _accepts(value: Any) -> bool:
    return hasattr(value, "__arrow_c_stream__") or hasattr(value, "__arrow_c_array__")


def register() -> None:
    for qualname in ("pyarrow.lib.Array", "pyarrow.lib.ChunkedArray", "pyarrow.lib.RecordBatch",
                     "pyarrow.lib.Table", "pyarrow.lib.RecordBatchReader"):
        register_builder(qualname, _build)
    register_protocol_builder(_accepts, _build)
    for prefix in ARROW_TYPENAMES:
        register_resolver(prefix, resolve_arrow)
        register_object_type(prefix, ArrowObject)
    for typename in ("vineyard::LargeStringArray", "vineyard::LargeBinaryArray"):  # upstream's only
        register_resolver(typename, resolve_arrow)
    register_resolver("vineyard::SchemaProxy", resolve_schema)
