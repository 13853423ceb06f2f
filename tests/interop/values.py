"""The values of the interop suite, importable by both interpreters (ours and
upstream's venv): ``VALUES`` maps a kind to a function making the value,
``check(kind, got)`` raises AssertionError unless ``got`` equals it.

Each kind is a type upstream's Python package stores (issue 13, item 4)."""

from __future__ import annotations

import fractions
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float32", "float64", "complex128"]


def _array(dtype: str) -> Any:
    return (np.arange(24) % 7).astype(dtype).reshape(4, 6)


VALUES: dict[str, Callable[[], Any]] = {}
for _dt in _DTYPES:
    VALUES[f"numpy-{_dt}-C"] = lambda dt=_dt: _array(dt)
    VALUES[f"numpy-{_dt}-F"] = lambda dt=_dt: np.asfortranarray(_array(dt))
VALUES["numpy-float64-strided"] = lambda: np.arange(48.0).reshape(6, 8)[::2, 1::3]
VALUES["numpy-1d"] = lambda: np.arange(100, dtype="int64")
VALUES["numpy-str"] = lambda: np.array(["a", "bc", "", "déf"])
VALUES["bytes"] = lambda: b"hello vineyard\x00\xff"
VALUES["bytes-large"] = lambda: bytes(range(256)) * 1024
VALUES["str"] = lambda: "a string"
VALUES["int"] = lambda: 42
VALUES["float"] = lambda: 2.5
VALUES["bool"] = lambda: True
VALUES["tuple"] = lambda: (1, "two", 3.0)
VALUES["list"] = lambda: [1, 2, 3]
VALUES["dict"] = lambda: {"a": 1, "b": [1, 2]}
VALUES["pickled"] = lambda: fractions.Fraction(3, 7)
VALUES["df-numeric"] = lambda: pd.DataFrame({"a": np.arange(5), "b": np.arange(5) * 0.5})
VALUES["df-named-index"] = lambda: pd.DataFrame({"a": np.arange(3)}, index=pd.Index([10, 20, 30], name="k"))
VALUES["df-range-index"] = lambda: pd.DataFrame({"a": [1.5, 2.5]}, index=pd.RangeIndex(5, 9, 2, name="r"))
VALUES["df-sparse"] = lambda: pd.DataFrame({"s": pd.arrays.SparseArray([0.0, 0.0, 1.5, 0.0])})
VALUES["df-string-index"] = lambda: pd.DataFrame({"a": np.arange(3.0)}, index=pd.Index(["x", "y", "z"]))
VALUES["df-multiindex"] = lambda: pd.DataFrame(
    {"a": np.arange(4)}, index=pd.MultiIndex.from_tuples([(1, "a"), (1, "b"), (2, "a"), (2, "b")]))
VALUES["df-datetime"] = lambda: pd.DataFrame({"t": pd.date_range("2020-01-01", periods=4, freq="D")})
VALUES["df-string"] = lambda: pd.DataFrame({"s": ["a", "b", "c"]})
VALUES["df-categorical"] = lambda: pd.DataFrame({"c": pd.Categorical(["x", "y", "x"])})
VALUES["numpy-datetime64"] = lambda: np.array(["2020-01-01", "2021-06-30"], dtype="datetime64[ns]")
VALUES["numpy-empty"] = lambda: np.zeros((0, 3))
VALUES["series-datetime"] = lambda: pd.Series(pd.date_range("2020-01-01", periods=3, freq="D"), name="t")
VALUES["series-named-index"] = lambda: pd.Series([1.5, 2.5], index=pd.Index([7, 9], name="k"))
VALUES["index-datetime"] = lambda: pd.DatetimeIndex(["2020-01-01", "2020-01-03"], name="d")
VALUES["series-string"] = lambda: pd.Series(["a", "b", None], name="s")
VALUES["df-nullable-int"] = lambda: pd.DataFrame({"n": pd.array([1, None, 3], dtype="Int64")})
VALUES["df-bool"] = lambda: pd.DataFrame({"b": [True, False, True], "f": [0.5, 1.5, 2.5]})
VALUES["numpy-object"] = lambda: np.array([1, "a", None], dtype=object)
VALUES["nested-list"] = lambda: [[1, 2], (3, "x")]
VALUES["none"] = lambda: None
VALUES["series"] = lambda: pd.Series(np.arange(4.0), name="s")
VALUES["index"] = lambda: pd.Index([1, 2, 3], name="i")
VALUES["arrow-int"] = lambda: pa.array([1, 2, None, 4])
VALUES["arrow-float"] = lambda: pa.array([1.5, None, 3.5])
VALUES["arrow-bool"] = lambda: pa.array([True, None, False])
VALUES["arrow-int32"] = lambda: pa.array([1, None, 3], type=pa.int32())
VALUES["arrow-string"] = lambda: pa.array(["a", None, "ccc"])
VALUES["arrow-large-string"] = lambda: pa.array(["a", "bb", None], type=pa.large_string())
VALUES["arrow-list"] = lambda: pa.array([[1, 2], [], None, [3]])
VALUES["arrow-string-sliced"] = lambda: pa.array(["a", None, "ccc", "dd"]).slice(1)
VALUES["arrow-list-of-strings"] = lambda: pa.array([["a", None], [], None, ["ccc"]])
VALUES["arrow-table-strings-lists"] = lambda: pa.Table.from_batches(
    [pa.record_batch({"s": ["x", None], "l": pa.array([[1], None], type=pa.list_(pa.int32()))}),
     pa.record_batch({"s": ["z", "w"], "l": pa.array([[], [2, 3]], type=pa.list_(pa.int32()))})])
VALUES["arrow-large-binary"] = lambda: pa.array([b"a", None, b"\x00\xff"], type=pa.large_binary())
VALUES["arrow-binary"] = lambda: pa.array([b"a", None, b"\x00\xff"])
VALUES["arrow-fixed-binary"] = lambda: pa.array([b"ab", None, b"cd"], type=pa.binary(2))
VALUES["arrow-null"] = lambda: pa.nulls(3)
VALUES["arrow-recordbatch-struct"] = lambda: pa.record_batch({"a": [1, 2], "s": [{"x": 1}, {"x": 2}]})
VALUES["arrow-struct"] = lambda: pa.array([{"x": 1, "y": "a"}, {"x": 2, "y": "b"}])
VALUES["arrow-recordbatch"] = lambda: pa.record_batch({"a": [1, 2, 3], "b": ["x", "y", "z"]})
VALUES["arrow-recordbatch-large-string"] = lambda: pa.record_batch(
    {"a": pa.array([1, None, 3], type=pa.int32()), "s": pa.array(["x", None, "z"], type=pa.large_string()),
     "t": [True, False, True]})
VALUES["arrow-table"] = lambda: pa.table({"a": [1, 2, 3], "b": [0.5, 1.5, 2.5]})


def _plain(value: Any) -> Any:
    """Lists and tuples, nested, as lists."""
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def check(kind: str, got: Any, lenient: bool = False) -> None:
    """``lenient`` (upstream's reader): a DataFrame or Series is compared by its data
    (labels and values), not by how pandas holds it: upstream's reader makes
    blocks pandas 3 no longer types (datetime columns as plain arrays)."""
    want = VALUES[kind]()
    if lenient and isinstance(want, pd.Series):
        assert got.name == want.name, (got.name, want.name)
        assert list(got.index) == list(want.index), (got.index, want.index)
        # missing values as missing: upstream's reader gives None where pandas 3 has NaN
        assert [None if pd.isna(v) else v for v in np.asarray(got)] == \
            [None if pd.isna(v) else v for v in np.asarray(want)], (got, want)
        return
    if lenient and isinstance(want, pd.DataFrame):
        assert list(got.columns) == list(want.columns), (got.columns, want.columns)
        assert list(got.index) == list(want.index), (got.index, want.index)
        for col in want.columns:
            assert list(np.asarray(got[col])) == list(np.asarray(want[col])), (got[col], want[col])
        return
    if isinstance(want, np.ndarray):
        got = np.asarray(got)
        assert got.dtype == want.dtype or want.dtype.kind == "U", (got.dtype, want.dtype)
        assert got.shape == want.shape, (got.shape, want.shape)
        assert (got == want).all(), (got, want)
    elif isinstance(want, bytes):
        assert bytes(got) == want
    elif isinstance(want, (list, tuple)):
        assert _plain(got) == _plain(want), (got, want)  # upstream gives tuples for lists
    elif isinstance(want, pd.DataFrame) and isinstance(want.index, pd.MultiIndex) and \
            not isinstance(got.index, pd.MultiIndex):
        # upstream stores a MultiIndex as an Index of tuples (Tensor<object>)
        # and its own reader gives that back: the same labels, one level.
        assert list(got.index) == list(want.index), (got.index, want.index)
        pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True), check_dtype=False)
    elif isinstance(want, pd.DataFrame):
        pd.testing.assert_frame_equal(got, want, check_dtype=False, check_index_type=False)
    elif isinstance(want, pd.Series):
        # upstream stores string values as an object array (pickled): ours
        # reads them back as that, object dtype
        pd.testing.assert_series_equal(got, want, check_dtype=not isinstance(want.dtype, pd.StringDtype))
    elif isinstance(want, pd.Index):
        pd.testing.assert_index_equal(got, want)
    elif isinstance(want, (pa.Array, pa.ChunkedArray)):
        got_list = got.to_pylist() if hasattr(got, "to_pylist") else list(got)
        assert got_list == want.to_pylist(), (got_list, want.to_pylist())
    elif isinstance(want, (pa.RecordBatch, pa.Table)):
        assert got.to_pydict() == want.to_pydict(), (got.to_pydict(), want.to_pydict())
    elif isinstance(want, dict):
        assert set(got) == set(want), (got, want)
        for key, value in want.items():
            assert np.array_equal(np.asarray(got[key]), np.asarray(value)), (key, got[key], value)
    elif isinstance(want, bool):  # upstream's reader gives Scalar<int> type_ bool back as an int
        assert got == want and isinstance(got, int), (got, want)
    else:
        assert type(got) is type(want) and got == want, (got, want)


# Ours only (no upstream counterpart): upstream's reader must not match them,
# and ours must keep reading them.
OURS_ONLY: dict[str, Callable[[], Any]] = {
    "zero-copy-pickle": lambda: {"a": np.arange(1000.0), "b": "x"},
}
VALUES.update(OURS_ONLY)

