"""pandas Series as ``vineyard::Series`` (docs/protocol.md, "pandas
objects"): ``name``, members ``index_`` (an Index object) and ``value_`` (an
array by dtype, see :mod:`vineyard.data.arrays`), ``attrs_``,
``allows_duplicate_labels_``."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._types import ObjectMeta
from . import labels
from .arrays import build_array, build_index, resolve_array, resolve_index, values_of
from .base import build_pickle
from .batch import BlobBatch
from .ndframe import decode_ndframe, encode_ndframe
from .registry import register_builder, register_resolver

__all__ = ["build_series", "register", "resolve_series"]

SERIES = "vineyard::Series"


def build_series(session: Any, series: Any, **kw: Any) -> ObjectMeta:
    """Builder of ``client.put(series)``: one round trip for the blobs (plus
    two per Arrow-backed array), and the tree created by the caller."""

    if type(series).__module__.partition(".")[0] != "pandas":
        return build_pickle(session, series)  # a subclass: keep its type
    batch = BlobBatch()
    with batch.building(session):
        meta = ObjectMeta({"typename": SERIES, "name": labels.encode_field(series.name)})
        meta.add_member("index_", build_index(session, series.index, batch))
        value = build_array(session, values_of(series), batch)
        meta.add_member("value_", value)
        meta.nbytes = value.nbytes
        encode_ndframe(meta, series)
        batch.commit(session, meta)
    return meta


def resolve_series(session: Any, tree: dict[str, Any], pin: Any) -> Any:
    """A Series over the stored values, without a copy for NumPy-backed,
    masked and categorical values; writable (the first write copies)."""
    import pandas as pd


    values = resolve_array(session, tree["value_"], pin)
    index = resolve_index(session, tree["index_"], pin)
    dtype = values.dtype if isinstance(values, np.ndarray) else None  # object stays object
    series = pd.Series(values, index=index, dtype=dtype, name=labels.decode_field(tree.get("name", "null")),
                       copy=False)
    return decode_ndframe(series, tree, pin)


def register() -> None:
    for qualname in ("pandas.Series", "pandas.core.series.Series"):
        register_builder(qualname, build_series)
    register_resolver(SERIES, resolve_series)
