"""One-dimensional pandas arrays — the values of a column, a Series or an
Index — stored by dtype (docs/protocol.md, "pandas objects"):

- NumPy dtypes (numbers, bool, ``datetime64``, ``timedelta64``): a
  ``vineyard::Tensor<T>``; a ``DatetimeTZDtype`` adds the zone as ``tz_``;
- masked nullable dtypes (``Int64``, ``boolean``, ``Float64``, ...):
  ``vineyard::pandas::MaskedArray<dtype>``, a values tensor and a mask tensor;
- categoricals: ``vineyard::pandas::Categorical``, a codes tensor and the
  categories as an Index object;
- pandas string dtypes, ``pd.ArrowDtype`` and object arrays of only
  str/None/NaN: an Arrow object (``vineyard.data.arrow.put_arrow``) inside
  ``vineyard::pandas::ArrowArray``, which says how to turn it back (``kind_``);
  a single string array goes inside upstream's ``vineyard::Tensor<std::string>``
  instead (member ``buffer_``), so that upstream's reader takes it too;
- sparse arrays: upstream's ``vineyard::SparseArray<dtype>``, an
  ``sp_index`` tensor of positions and an ``sp_values`` tensor;
- anything else (other object arrays, Period, Interval, other extension
  arrays): ``vineyard::PickleBuffer``.

On get, tensors come back as read-only views of the store and the masked and
categorical arrays are built over such views, without a copy; Arrow-backed
arrays wrap the zero-copy Arrow object, except object arrays of strings, whose
Python objects are made by a copy by nature.

pandas Index objects live here too (an Index is such an array with a name,
and a categorical's categories are an Index):

- a ``RangeIndex``: ``vineyard::Index`` with ``start_``, ``stop_``, ``step_``
  (what ours read) and, for upstream's reader, ``value_type_`` ``int64`` and
  ``value_`` the ``vineyard::PickleBuffer`` of the ``range`` (a few bytes);
- a ``MultiIndex``: ``vineyard::Index`` with ``names_``, ``nlevels_``, members
  ``levels_-<i>`` (Index objects) and ``codes_-<i>`` (tensors), what ours read
  without a copy, and, for upstream's reader (which gives an Index of tuples,
  as for its own), ``value_type_`` ``object`` and ``value_`` the
  ``vineyard::PickleBuffer`` of the MultiIndex;
- ``vineyard::Index``: ``name``, ``value_type_``, ``freq_`` (DatetimeIndex,
  TimedeltaIndex), and its values either as a member ``value_`` (an array by
  dtype, as above) or, for up to ``INLINE_MAX`` object or string labels
  (typically column labels), inline as ``values_``: the JSON text of the
  labels (:mod:`vineyard.data.labels`), so that they cost no blob and no
  Arrow round trip.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import pickle
from typing import Any

import numpy as np

from .._types import ObjectMeta
from . import labels
from .arrow import put_arrow, resolve_arrow
from .base import PICKLE, build_pickle, pickle_tree
from .batch import BlobBatch
from .registry import register_builder, register_resolver, resolve
from .tensor import resolve_numpy, tensor_meta

__all__ = ["build_array", "build_index", "register", "resolve_array", "resolve_index", "tensor_array", "values_of"]

MASKED = "vineyard::pandas::MaskedArray"
CATEGORICAL = "vineyard::pandas::Categorical"
ARROW = "vineyard::pandas::ArrowArray"
SPARSE = "vineyard::SparseArray"  # upstream's
STRING_TENSOR = "vineyard::Tensor<std::string>"  # with kind_: an Arrow-backed array of strings


def values_of(obj: Any) -> Any:
    """The 1-D values of a Series or an Index without a copy: a NumPy array
    for NumPy dtypes, else the ExtensionArray."""
    import pandas as pd

    values = obj.array
    if type(values) is pd.arrays.NumpyExtensionArray or isinstance(values.dtype, np.dtype):
        return np.asarray(values)  # naive datetimes and timedeltas too
    return values


def tensor_array(batch: BlobBatch, arr: Any) -> ObjectMeta:
    """The ``vineyard::Tensor`` tree of ``arr``, its blob recorded in ``batch``."""

    meta = tensor_meta(arr)
    batch.add(meta, "buffer_", arr)
    return meta


def build_array(session: Any, values: Any, batch: BlobBatch) -> ObjectMeta:
    """The tree of ``values`` (a 1-D NumPy or extension array), its blobs
    recorded in ``batch``; Arrow-backed values are stored at once."""
    import pandas as pd

    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise ValueError(f"vineyard: expected a 1-D array, got shape {values.shape}")
        return _object_array(session, values, batch) if values.dtype.hasobject else tensor_array(batch, values)
    dtype = values.dtype
    if isinstance(dtype, np.dtype):
        return build_array(session, np.asarray(values), batch)
    if isinstance(dtype, pd.DatetimeTZDtype):
        meta = tensor_array(batch, values.asi8.view(f"M8[{dtype.unit}]"))
        meta["tz_"] = labels.encode_field(_tz_key(dtype))
        return meta
    if isinstance(values, (pd.arrays.IntegerArray, pd.arrays.FloatingArray, pd.arrays.BooleanArray)):
        meta = ObjectMeta({"typename": f"{MASKED}<{dtype.name}>", "dtype_": dtype.name})
        meta.add_member("values_", tensor_array(batch, values._data))
        meta.add_member("mask_", tensor_array(batch, values._mask))
        meta.nbytes = values._data.nbytes + values._mask.nbytes
        return meta
    if isinstance(values, pd.arrays.SparseArray):
        # upstream's layout: its sp_index (an IntIndex) and sp_values
        sp_index = values.sp_index.to_int_index()
        meta = ObjectMeta({"typename": f"{SPARSE}<{dtype.name}>", "value_type_": dtype.name,
                           "sp_index_name": "IntIndex", "sp_index_size": int(sp_index.length)})
        meta.add_member("sp_index", tensor_array(batch, sp_index.indices))
        meta.add_member("sp_values", tensor_array(batch, values.sp_values))
        meta.nbytes = sp_index.indices.nbytes + values.sp_values.nbytes
        return meta
    if isinstance(dtype, pd.CategoricalDtype):

        meta = ObjectMeta({"typename": CATEGORICAL, "ordered_": bool(dtype.ordered)})
        meta.add_member("codes_", tensor_array(batch, values.codes))
        meta.add_member("categories_", build_index(session, dtype.categories, batch))
        meta.nbytes = values.codes.nbytes
        return meta
    if isinstance(dtype, pd.StringDtype) and _arrow_available():
        return _arrow(session, batch, values.__arrow_array__(), {"kind_": "string", "storage_": dtype.storage,
                                                                "na_value_": _na_name(dtype.na_value)})
    if isinstance(dtype, pd.ArrowDtype) and _arrow_available():
        return _arrow(session, batch, values.__arrow_array__(), {"kind_": "arrow"})
    return _pickle(batch, values)


def _arrow_available() -> bool:
    """Whether Arrow objects can be stored: pyarrow is installed (pandas
    works without it) and so is vineyard's Arrow layer; else Arrow-backed and
    string columns are pickled."""
    global _ARROW
    if _ARROW is None:
        _ARROW = all(importlib.util.find_spec(m) is not None for m in ("pyarrow", "vineyard.data.arrow"))
    return _ARROW


_ARROW: bool | None = None


def _tz_key(dtype: Any) -> Any:
    """The zone's name when it names the same zone, else the zone object."""
    import pandas as pd

    name = str(dtype.tz)
    try:
        same = pd.DatetimeTZDtype(dtype.unit, name)
    except (KeyError, TypeError, ValueError):  # not a name pandas knows (ZoneInfoNotFoundError is a KeyError)
        return dtype.tz
    return name if same == dtype and type(same.tz) is type(dtype.tz) else dtype.tz


def _na_name(na: Any) -> str:
    import pandas as pd

    return "NA" if na is pd.NA else "nan"


def _pickle(batch: BlobBatch, value: Any) -> ObjectMeta:
    meta, parts = pickle_tree(value)
    for key, part in parts:
        batch.add(meta, key, part)
    return meta


def _arrow(session: Any, batch: BlobBatch, arrow: Any, fields: dict[str, Any]) -> ObjectMeta:
    import pyarrow as pa

    if isinstance(arrow, pa.ChunkedArray) and arrow.num_chunks == 1:
        arrow = arrow.chunk(0)
    if isinstance(arrow, pa.Array) and arrow.type in (pa.string(), pa.large_string()):
        # upstream's string tensor (its reader gives an object array); ours
        # reads kind_ and the Arrow array zero-copy
        meta = ObjectMeta({"typename": STRING_TENSOR, "shape_": json.dumps([len(arrow)]), "order_": '"C"',
                           "partition_index_": "[]", "value_type_": "string", "value_type_meta_": "str", **fields})
        key = "buffer_"
    else:
        meta, key = ObjectMeta({"typename": ARROW, **fields}), "value_"
    oid = put_arrow(session, arrow)
    batch.created.append(int(oid))
    meta.add_member(key, oid)
    meta.nbytes = int(arrow.nbytes)
    return meta


def _object_array(session: Any, arr: Any, batch: BlobBatch) -> ObjectMeta:
    """Strings with missing values all None or all NaN go to Arrow; any
    other object array is pickled."""
    import pandas as pd

    if not _arrow_available() or pd.api.types.infer_dtype(arr, skipna=True) not in ("string", "empty"):
        return _pickle(batch, arr)
    missing = arr[pd.isna(arr)]
    if all(m is None for m in missing):
        kind = "None"
    elif all(isinstance(m, float) for m in missing):  # NaN: pd.NA and NaT are not floats
        kind = "nan"
    else:
        return _pickle(batch, arr)
    import pyarrow as pa

    return _arrow(session, batch, pa.array(arr, type=pa.large_string(), from_pandas=True),
                  {"kind_": "object", "na_value_": kind})


def resolve_array(session: Any, tree: dict[str, Any], pin: Any) -> Any:
    """The array of a tree :func:`build_array` made: a read-only NumPy view or
    an extension array over such views (Arrow-backed: over Arrow's)."""
    import pandas as pd


    typename = str(tree.get("typename", ""))
    if typename == ARROW or (typename == STRING_TENSOR and "kind_" in tree):
        return _resolve_arrow_array(session, tree, pin)
    if typename.startswith("vineyard::Tensor"):
        arr = resolve_numpy(session, tree, pin)
        if "tz_" not in tree:
            return arr
        key = labels.decode_field(tree["tz_"])
        dtype = pd.DatetimeTZDtype(arr.dtype.name[11:-1], key)  # "datetime64[ns]" -> "ns"
        return pd.arrays.DatetimeArray._simple_new(arr, dtype=dtype)  # no public zero-copy constructor
    if typename.startswith(SPARSE + "<"):
        return _resolve_sparse(session, tree, pin)
    if typename.startswith(MASKED):
        values = resolve_numpy(session, tree["values_"], pin)
        mask = resolve_numpy(session, tree["mask_"], pin)
        klass = pd.api.types.pandas_dtype(tree["dtype_"]).construct_array_type()
        return klass(values, mask, copy=False)
    if typename == CATEGORICAL:

        codes = resolve_numpy(session, tree["codes_"], pin)
        categories = resolve_index(session, tree["categories_"], pin)
        dtype = pd.CategoricalDtype(categories, ordered=bool(tree["ordered_"]))
        return pd.Categorical.from_codes(codes, dtype=dtype, validate=False)
    return resolve(session, tree, pin)  # a pickled array, or a value some other builder stored


def _resolve_sparse(session: Any, tree: dict[str, Any], pin: Any) -> Any:
    """A SparseArray over the stored values and indices (upstream's layout)."""
    import pandas as pd
    from pandas._libs.sparse import IntIndex

    if tree.get("sp_index_name") != "IntIndex":
        raise ValueError(f"vineyard: object {tree.get('id')} ({tree.get('typename')}): sp_index_name "
                         f"{tree.get('sp_index_name')!r} is not IntIndex")
    indices = resolve_numpy(session, tree["sp_index"], pin)
    sp_index = IntIndex(int(tree["sp_index_size"]), np.asarray(indices, dtype=np.int32))
    sp_values = resolve_numpy(session, tree["sp_values"], pin)
    dtype = pd.api.types.pandas_dtype(tree["value_type_"])
    if not isinstance(dtype, pd.SparseDtype) or dtype.subtype != sp_values.dtype:
        raise ValueError(f"vineyard: object {tree.get('id')} ({tree.get('typename')}): value_type_ "
                         f"{tree['value_type_']!r} does not fit values of {sp_values.dtype}")
    return pd.arrays.SparseArray._simple_new(sp_values, sp_index, dtype)  # no copy (pandas internals)


def _resolve_arrow_array(session: Any, tree: dict[str, Any], pin: Any) -> Any:
    import pandas as pd
    import pyarrow as pa


    arrow = resolve_arrow(session, tree["value_" if "value_" in tree else "buffer_"], pin)
    if not isinstance(arrow, pa.ChunkedArray):
        arrow = pa.chunked_array([arrow])
    kind = tree["kind_"]
    na_value = tree.get("na_value_")
    if kind == "arrow":
        return pd.arrays.ArrowExtensionArray(arrow)
    if kind == "string":
        dtype = pd.StringDtype(tree["storage_"], na_value=pd.NA if na_value == "NA" else np.nan)
        if dtype.storage == "pyarrow":
            return pd.arrays.ArrowStringArray(arrow, dtype=dtype)
        return pd.array(arrow.to_numpy(zero_copy_only=False), dtype=dtype)
    out = np.array(arrow.to_numpy(zero_copy_only=False), dtype=object)  # Python strings: a copy
    if na_value == "nan" and arrow.null_count:
        out[arrow.is_null().to_numpy(zero_copy_only=False)] = np.nan
    return out



# ---- Index objects ----------------------------------------------------------

INDEX = "vineyard::Index"
# Typenames of our RangeIndex and MultiIndex before they carried upstream's
# value_ (read, never written).
RANGE_INDEX = "vineyard::RangeIndex"
MULTI_INDEX = "vineyard::MultiIndex"

INLINE_MAX = 4096


def build_index(session: Any, index: Any, batch: BlobBatch) -> ObjectMeta:
    """The tree of ``index``, its blobs recorded in ``batch``."""
    import pandas as pd


    if isinstance(index, pd.RangeIndex):
        meta = ObjectMeta({"typename": INDEX, "start_": index.start, "stop_": index.stop, "step_": index.step,
                           "name": labels.encode_field(index.name), "value_type_": "int64"})
        meta.add_member("value_", _in_band_pickle(batch, range(index.start, index.stop, index.step)))
        return meta
    if isinstance(index, pd.MultiIndex):
        meta = ObjectMeta({"typename": INDEX, "nlevels_": index.nlevels, "name": "null", "value_type_": "object",
                           "names_": json.dumps([labels.encode(n) for n in index.names])})
        if index.sortorder is not None:
            meta["sortorder_"] = int(index.sortorder)
        for i, (level, codes) in enumerate(zip(index.levels, index.codes)):
            meta.add_member(f"levels_-{i}", build_index(session, level, batch))
            meta.add_member(f"codes_-{i}", tensor_array(batch, codes))
        meta.add_member("value_", _in_band_pickle(batch, index))
        return meta
    meta = ObjectMeta({"typename": INDEX, "name": labels.encode_field(index.name),
                       "value_type_": str(index.dtype)})
    if isinstance(index, (pd.DatetimeIndex, pd.TimedeltaIndex)) and index.freq is not None:
        meta["freq_"] = labels.encode_field(_freq_key(index.freq))
    if not _inline(meta, index):
        meta.add_member("value_", build_array(session, values_of(index), batch))
    return meta


def _in_band_pickle(batch: BlobBatch, value: Any) -> ObjectMeta:
    """Upstream's ``vineyard::PickleBuffer`` of ``value``: one stream, no
    out-of-band buffer, so upstream's reader can take it."""
    data = pickle.dumps(value, protocol=5)
    meta = ObjectMeta({"typename": PICKLE, "size_": len(data)})
    batch.add(meta, "buffer_", memoryview(data))
    return meta


def _freq_key(freq: Any) -> Any:
    """The offset's string when it parses back to the same offset."""
    from pandas.tseries.frequencies import to_offset

    try:
        same = to_offset(freq.freqstr)
    except (TypeError, ValueError):
        return freq
    return freq.freqstr if same == freq and type(same) is type(freq) else freq


def _inline(meta: ObjectMeta, index: Any) -> bool:
    """Stores a short object or string index in ``meta`` itself."""
    import pandas as pd

    if len(index) > INLINE_MAX:
        return False
    dtype = index.dtype
    if isinstance(dtype, pd.StringDtype):
        meta["kind_"] = "string"
        meta["storage_"] = dtype.storage
        meta["na_value_"] = "NA" if dtype.na_value is pd.NA else "nan"
        meta["values_"] = json.dumps([v if isinstance(v, str) else None for v in index])
        return True
    if dtype == np.dtype(object):
        meta["kind_"] = "object"
        meta["values_"] = json.dumps([labels.encode(v) for v in index])
        return True
    return False


def _inline_values(tree: dict[str, Any]) -> Any:
    """The Index of a tree whose labels are inline (``values_``). Its fields
    say it whole, so one Index is made per distinct text (a frame's columns
    are the same for every frame of a shape: making them was a third of a
    DataFrame get) and each get has a view of it: an Index's data is
    immutable, but its ``name`` can be set, and the view's is its own.
    Labels or a name that were pickled (objects JSON cannot say, which may
    be mutable) are made anew for each get, never shared."""
    key = (tree["values_"], tree["kind_"], tree.get("na_value_"), tree.get("storage_"), tree.get("name", "null"))
    if all(type(k) is str and '"pickle"' not in k for k in (key[0], key[4])):
        return _inline_index(*key).view()
    return _inline_index.__wrapped__(*key)


@functools.lru_cache(maxsize=256)
def _inline_index(values_text: str, kind: str, na_value: Any, storage: Any, name_text: Any) -> Any:
    import pandas as pd

    values = json.loads(values_text)
    name = labels.decode_field(name_text)
    if kind == "string":
        na = pd.NA if na_value == "NA" else np.nan
        return pd.Index(values, dtype=pd.StringDtype(storage, na_value=na), name=name)
    arr = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):  # item by item: a tuple label must stay one item
        arr[i] = labels.decode(v)
    return pd.Index(arr, dtype=object, name=name, copy=False, tupleize_cols=False)


def _with_freq(index: Any, freq: Any) -> Any:
    """``index`` (a DatetimeIndex or TimedeltaIndex) with the frequency it had
    when stored, without the O(n) check of the public constructor (100 ms for
    10M values)."""
    from pandas.tseries.frequencies import to_offset

    offset = to_offset(freq)
    if hasattr(index, "_with_freq"):
        return index._with_freq(offset)  # pandas internals: sets the frequency as is
    return type(index)(index, freq=offset, name=index.name, copy=False)


def resolve_index(session: Any, tree: dict[str, Any], pin: Any) -> Any:
    """The Index of a tree :func:`build_index` made; numeric values are
    read-only views of the store."""
    import pandas as pd


    typename = str(tree.get("typename", ""))
    if typename == RANGE_INDEX or (typename == INDEX and "start_" in tree):
        return pd.RangeIndex(int(tree["start_"]), int(tree["stop_"]), int(tree["step_"]),
                             name=labels.decode_field(tree["name"]))
    if typename == MULTI_INDEX or (typename == INDEX and "nlevels_" in tree):
        n = int(tree["nlevels_"])
        return pd.MultiIndex(levels=[resolve_index(session, tree[f"levels_-{i}"], pin) for i in range(n)],
                             codes=[resolve_array(session, tree[f"codes_-{i}"], pin) for i in range(n)],
                             names=[labels.decode(v) for v in json.loads(tree["names_"])],
                             sortorder=tree.get("sortorder_"), verify_integrity=False)
    if "values_" in tree:
        return _inline_values(tree)
    name = labels.decode_field(tree.get("name", "null"))
    values = resolve_array(session, tree["value_"], pin)
    if "freq_" in tree:
        return _with_freq(pd.Index(values, name=name, copy=False), labels.decode_field(tree["freq_"]))
    if isinstance(values, np.ndarray) and values.dtype == object:
        return pd.Index(values, dtype=object, name=name, copy=False, tupleize_cols=False)
    return pd.Index(values, name=name, copy=False)


def build_pandas_index(session: Any, index: Any, **kw: Any) -> ObjectMeta:
    """Builder of ``client.put(index)``."""
    if type(index).__module__.partition(".")[0] != "pandas":

        return build_pickle(session, index)  # a subclass: keep its type
    batch = BlobBatch()
    with batch.building(session):
        meta = build_index(session, index, batch)
        batch.commit(session, meta)
    return meta


def register() -> None:
    for typename in (MASKED, CATEGORICAL, ARROW, SPARSE):
        register_resolver(typename, resolve_array)
    for qualname in ("pandas.Index", "pandas.core.indexes.base.Index"):
        register_builder(qualname, build_pandas_index)
    for typename in (INDEX, RANGE_INDEX, MULTI_INDEX):
        register_resolver(typename, resolve_index)
