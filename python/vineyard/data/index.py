"""pandas Index objects (docs/protocol.md, "pandas objects"):

- ``vineyard::RangeIndex``: ``start_``, ``stop_``, ``step_``, ``name``; no blob;
- ``vineyard::MultiIndex``: ``names_``, ``nlevels_``, members ``levels_-<i>``
  (Index objects) and ``codes_-<i>`` (tensors);
- ``vineyard::Index``: ``name``, ``value_type_``, ``freq_`` (DatetimeIndex,
  TimedeltaIndex), and its values either as a member ``value_`` (an array by
  dtype, see :mod:`vineyard.data.arrays`) or, for up to ``INLINE_MAX`` object
  or string labels (typically column labels), inline as ``values_``: the JSON
  text of the labels (:mod:`vineyard.data.labels`), so that they cost no
  blob and no Arrow round trip.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from .._types import ObjectMeta
from . import arrays, labels
from .base import build_pickle
from .batch import BlobBatch
from .registry import register_builder, register_resolver

__all__ = ["build_index", "register", "resolve_index"]

INDEX = "vineyard::Index"
RANGE_INDEX = "vineyard::RangeIndex"
MULTI_INDEX = "vineyard::MultiIndex"

INLINE_MAX = 4096


def build_index(session: Any, index: Any, batch: BlobBatch) -> ObjectMeta:
    """The tree of ``index``, its blobs recorded in ``batch``."""
    import pandas as pd


    if isinstance(index, pd.RangeIndex):
        return ObjectMeta({"typename": RANGE_INDEX, "start_": index.start, "stop_": index.stop,
                           "step_": index.step, "name": labels.encode_field(index.name)})
    if isinstance(index, pd.MultiIndex):
        meta = ObjectMeta({"typename": MULTI_INDEX, "nlevels_": index.nlevels,
                           "names_": json.dumps([labels.encode(n) for n in index.names])})
        if index.sortorder is not None:
            meta["sortorder_"] = int(index.sortorder)
        for i, (level, codes) in enumerate(zip(index.levels, index.codes)):
            meta.add_member(f"levels_-{i}", build_index(session, level, batch))
            meta.add_member(f"codes_-{i}", arrays.tensor_array(batch, codes))
        return meta
    meta = ObjectMeta({"typename": INDEX, "name": labels.encode_field(index.name),
                       "value_type_": str(index.dtype)})
    if isinstance(index, (pd.DatetimeIndex, pd.TimedeltaIndex)) and index.freq is not None:
        meta["freq_"] = labels.encode_field(_freq_key(index.freq))
    if not _inline(meta, index):
        meta.add_member("value_", arrays.build_array(session, arrays.values_of(index), batch))
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


def _inline_values(tree: dict[str, Any], name: Any) -> Any:
    import pandas as pd

    values = json.loads(tree["values_"])
    if tree["kind_"] == "string":
        na = pd.NA if tree["na_value_"] == "NA" else np.nan
        return pd.Index(values, dtype=pd.StringDtype(tree["storage_"], na_value=na), name=name)
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
    if typename == RANGE_INDEX:
        return pd.RangeIndex(int(tree["start_"]), int(tree["stop_"]), int(tree["step_"]),
                             name=labels.decode_field(tree["name"]))
    if typename == MULTI_INDEX:
        n = int(tree["nlevels_"])
        return pd.MultiIndex(levels=[resolve_index(session, tree[f"levels_-{i}"], pin) for i in range(n)],
                             codes=[arrays.resolve_array(session, tree[f"codes_-{i}"], pin) for i in range(n)],
                             names=[labels.decode(v) for v in json.loads(tree["names_"])],
                             sortorder=tree.get("sortorder_"), verify_integrity=False)
    name = labels.decode_field(tree.get("name", "null"))
    if "values_" in tree:
        return _inline_values(tree, name)
    values = arrays.resolve_array(session, tree["value_"], pin)
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
    for qualname in ("pandas.Index", "pandas.core.indexes.base.Index"):
        register_builder(qualname, build_pandas_index)
    for typename in (INDEX, RANGE_INDEX, MULTI_INDEX):
        register_resolver(typename, resolve_index)
