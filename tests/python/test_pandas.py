"""pandas DataFrame, Series and Index against the real daemon: exact round
trips for every dtype and index kind, zero-copy gets, safe writes, lifetime."""

from __future__ import annotations

import datetime
import gc
import multiprocessing as mp
import pickle
import subprocess
import sys
import textwrap
import time
import zoneinfo

import numpy as np
import pandas as pd
import pandas.testing as tm
import pyarrow as pa
import pytest
import vineyard

N = 6


def _frame_columns() -> dict[str, object]:
    """One column of every kind the store handles (N rows)."""
    cols: dict[str, object] = {}
    for dtype in ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
                  "float32", "float64", "complex64", "complex128", "bool", ">i8"]:
        cols[dtype] = (np.arange(N) % 3).astype(dtype)
    for unit in ["s", "ms", "us", "ns"]:
        cols[f"M8[{unit}]"] = np.arange(N).astype(f"M8[{unit}]")
        cols[f"m8[{unit}]"] = np.arange(N).astype(f"m8[{unit}]")
    cols["NaT"] = pd.Series([pd.Timestamp("2020-01-01"), pd.NaT] * (N // 2))
    cols["tz-utc"] = pd.date_range("2020-01-01", periods=N, tz="UTC")
    cols["tz-paris-ns"] = pd.date_range("2021-03-27", periods=N, freq="6h", tz="Europe/Paris", unit="ns")
    cols["tz-fixed"] = pd.date_range("2020", periods=N, tz=datetime.timezone(datetime.timedelta(hours=-3)))
    cols["tz-zoneinfo"] = pd.date_range("2020", periods=N, tz=zoneinfo.ZoneInfo("Asia/Tokyo"))
    cols["cat"] = pd.Categorical(["b", "a", None, "b", "c", "a"])
    cols["cat-ordered-int"] = pd.Categorical([3, 1, 2, 3, 1, 2], categories=[3, 2, 1], ordered=True)
    cols["cat-unused"] = pd.Categorical(["x"] * N, categories=["x", "y", "z"])
    for dtype in ["Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64", "Float32", "Float64"]:
        cols[dtype] = pd.array([1, None, 3, 0, None, 6], dtype=dtype)
    cols["boolean"] = pd.array([True, None, False, True, None, False], dtype="boolean")
    cols["period"] = pd.period_range("2020-01", periods=N, freq="M")
    cols["interval"] = pd.arrays.IntervalArray.from_breaks(np.arange(N + 1))
    cols["sparse"] = pd.arrays.SparseArray([0, 0, 1, 0, 2, 0])
    cols["object-mixed"] = pd.Series([1, "a", None, 2.5, (1, 2), b"x"], dtype=object)
    return cols


def _arrow_columns() -> dict[str, object]:
    """Columns stored as Arrow objects (vineyard.data.arrow)."""
    strings = ["a", None, "ccc", "", "é", "z" * 100]
    return {
        "str": pd.Series(strings),  # pandas 3's default: pyarrow storage, NaN as missing
        "string[python]": pd.Series(strings, dtype=pd.StringDtype("python")),
        "string[pyarrow]": pd.Series(strings, dtype=pd.StringDtype("pyarrow")),
        "str[python,nan]": pd.Series(strings, dtype=pd.StringDtype("python", na_value=np.nan)),
        "object-str-none": pd.Series(strings, dtype=object),
        "object-str-nan": pd.Series(["a", np.nan, "b", np.nan, "c", "d"], dtype=object),
        "object-all-none": pd.Series([None] * N, dtype=object),
        "int32[pyarrow]": pd.Series([1, None, 3, 4, 5, 6], dtype="int32[pyarrow]"),
        "list[pyarrow]": pd.Series([[1], [], None, [2, 3], [4], [5]], dtype=pd.ArrowDtype(pa.list_(pa.int64()))),
    }


def _roundtrip(client, value):
    return client.get(client.put(value))


def _blob_ranges(client, oid) -> list[tuple[int, int]]:
    """(start, end) addresses of every blob of an object, as mapped here."""
    ids: list[vineyard.ObjectID] = []

    def walk(tree):
        for key in tree:
            value = tree[key]
            if isinstance(value, vineyard.ObjectMeta):
                if value.typename == "vineyard::Blob":
                    ids.append(value.id)
                else:
                    walk(value)

    walk(client.get_meta(oid))
    return [(b.address, b.address + len(b)) for b in client.get_blobs(ids)]


def _inside(address: int, ranges: list[tuple[int, int]]) -> bool:
    return any(start <= address < end for start, end in ranges)


@pytest.mark.parametrize("name", list(_frame_columns()))
def test_series_and_column_roundtrip_every_dtype(client, name):
    values = _frame_columns()[name]
    series = pd.Series(values, name=name)
    tm.assert_series_equal(_roundtrip(client, series), series)
    df = pd.DataFrame({name: values, "after": np.arange(N)}, index=pd.RangeIndex(10, 10 + N, name="r"))
    tm.assert_frame_equal(_roundtrip(client, df), df)


@pytest.mark.parametrize("name", list(_arrow_columns()))
def test_arrow_backed_roundtrip(client, name):
    series = _arrow_columns()[name]
    series.name = name
    got = _roundtrip(client, series)
    tm.assert_series_equal(got, series)
    assert [type(v) for v in got] == [type(v) for v in series]  # None stays None, NaN stays NaN
    df = pd.DataFrame({name: series, "n": np.arange(N)})
    tm.assert_frame_equal(_roundtrip(client, df), df)


def test_frame_with_every_dtype(client):
    df = pd.DataFrame({**_frame_columns(), **_arrow_columns()})
    df.attrs = {"source": "test", "when": pd.Timestamp("2020")}
    got = _roundtrip(client, df)
    tm.assert_frame_equal(got, df)
    assert got.attrs == df.attrs


def _indexes() -> dict[str, pd.Index]:
    return {
        "range": pd.RangeIndex(0, N),
        "range-step-name": pd.RangeIndex(100, 100 - 3 * N, -3, name="r"),
        "range-empty": pd.RangeIndex(0, 0),
        "int64": pd.Index([5, 3, 3, 9, -1, 0], name="i"),
        "uint64": pd.Index(np.array([2**64 - 1, 0, 1, 2, 3, 4], dtype="uint64")),
        "int8": pd.Index(np.arange(N, dtype="int8")),
        "float64-nan": pd.Index([1.5, np.nan, 2.0, -0.0, np.inf, 3.0], name=("a", 1)),
        "float32": pd.Index(np.arange(N, dtype="float32")),
        "bool": pd.Index([True, False] * 3),
        "complex": pd.Index(np.arange(N) * 1j),
        "str": pd.Index(["a", "b", None, "d", "e", "f"], name="s"),
        "string[python]": pd.Index(["a", "b", None, "d", "e", "f"], dtype=pd.StringDtype("python")),
        "string[pyarrow]": pd.Index(["a", "b", None, "d", "e", "f"], dtype=pd.StringDtype("pyarrow")),
        "object-mixed": pd.Index([1, "a", 2.5, None, (1, 2), pd.Timestamp("2020")], dtype=object,
                                 tupleize_cols=False),
        "object-str": pd.Index(["a", "b", "c"], dtype=object),
        "object-empty": pd.Index([], dtype=object),
        "datetime-freq": pd.date_range("2020-01-01", periods=N, freq="D", name="day"),
        "datetime-no-freq": pd.DatetimeIndex(["2020-01-03", "2020-01-01", "NaT"]),
        "datetime-tz-freq": pd.date_range("2020-03-28", periods=N, freq="h", tz="Europe/Paris"),
        "datetime-business": pd.bdate_range("2020-01-01", periods=N),
        "datetime-custom-freq": pd.date_range("2020-01-01", periods=N, freq=pd.offsets.CustomBusinessDay(
            holidays=["2020-01-02"])),
        "timedelta-freq": pd.timedelta_range("1s", periods=N, freq="250ms", name="td"),
        "categorical": pd.CategoricalIndex(["x", "y", "x", "z", "y", "x"], categories=["z", "y", "x"],
                                           ordered=True, name="c"),
        "period": pd.period_range("2020Q1", periods=N, freq="Q", name="q"),
        "interval": pd.interval_range(0, N, closed="left"),
        "nullable": pd.Index(pd.array([1, None, 3, 4, 5, 6], dtype="Int32")),
        "multi": pd.MultiIndex.from_product([["a", "b"], [1, 2, 3]], names=["k", None]),
        "multi-unused-levels": pd.MultiIndex.from_product([["a", "b"], [1, 2, 3]])[:4],
        "multi-mixed-names": pd.MultiIndex.from_arrays(
            [pd.date_range("2020", periods=N, tz="UTC"), [1.5] * N, pd.Categorical(list("abcabc"))],
            names=[("t", 0), 1, None]),
        "multi-sortorder": pd.MultiIndex.from_arrays([[1, 1, 2, 2, 3, 3], list("ababab")], sortorder=1),
        "multi-with-nan": pd.MultiIndex.from_arrays([["a", None, "b", "a", "b", None], [1, 2, 3, 4, 5, 6]]),
        "big-str": pd.Index([f"label-{i}" for i in range(10_000)]),
        "big-object-tuples": pd.Index([(i, "x") for i in range(10_000)], tupleize_cols=False),
        "big-object-str": pd.Index([f"o{i}" for i in range(10_000)], dtype=object),
    }


@pytest.mark.parametrize("name", list(_indexes()))
def test_index_roundtrip(client, name):
    index = _indexes()[name]
    got = _roundtrip(client, index)
    tm.assert_index_equal(got, index, exact=True, check_exact=True)
    if isinstance(index, (pd.DatetimeIndex, pd.TimedeltaIndex)):
        assert got.freq == index.freq
    if isinstance(index, pd.MultiIndex):
        assert got.sortorder == index.sortorder
        for a, b in zip(got.levels, index.levels):
            tm.assert_index_equal(a, b, exact=True)
    n = len(index)
    df = pd.DataFrame({"v": np.arange(n)}, index=index)
    tm.assert_frame_equal(_roundtrip(client, df), df, check_freq=True)
    if n <= 100:  # as column labels too
        cols = pd.DataFrame(np.arange(2 * n).reshape(2, n), columns=index)
        tm.assert_frame_equal(_roundtrip(client, cols), cols)


@pytest.mark.parametrize("df", [
    pd.DataFrame(),
    pd.DataFrame(index=pd.Index([3, 1, 2], name="k")),
    pd.DataFrame(columns=["a", "b"]),
    pd.DataFrame({"f": np.array([], "f8"), "s": pd.Series([], dtype=str), "i": pd.array([], dtype="Int8"),
                  "c": pd.Categorical([]), "t": pd.DatetimeIndex([], tz="UTC")}),
    pd.DataFrame([[1, 2.0, "x"], [3, 4.0, "y"]], columns=["a", "a", "a"]),
    pd.DataFrame({"a": [1, 2, 3]}, index=["x", "x", "y"]),
    pd.DataFrame([[1, 2, 3, 4, 5, 6, 7, 8, 9]], columns=pd.Index(
        [1, "a", 2.5, None, ("t", 1), pd.Timestamp("2020"), np.nan, True, 2**70], dtype=object,
        tupleize_cols=False)),
    pd.DataFrame(np.arange(12).reshape(3, 4), columns=pd.MultiIndex.from_product([["a", "b"], [1, 2]],
                                                                                  names=["x", ("y", 2)])),
    pd.DataFrame({1: [1.0], 2.5: [2.0], None: [3.0], (1, 2): [4.0]}),
    pd.DataFrame({"a": [1]}).set_flags(allows_duplicate_labels=False),
], ids=["empty", "no-columns", "no-rows", "no-rows-dtypes", "duplicate-columns", "non-unique-index",
        "mixed-labels", "multiindex-columns", "hashable-labels", "flags"])
def test_frame_shapes_and_labels(client, df):
    got = _roundtrip(client, df)
    tm.assert_frame_equal(got, df, check_flags=True)
    assert [type(label) for label in got.columns] == [type(label) for label in df.columns]


@pytest.mark.parametrize("name", [None, 0, 1.5, np.nan, ("a", 1), pd.Timestamp("2020", tz="UTC"), True, "", 2**80,
                                  frozenset({1})])
def test_names_of_any_hashable_type(client, name):
    series = pd.Series([1, 2], name=name, index=pd.Index(["a", "b"], name=name))
    got = _roundtrip(client, series)
    tm.assert_series_equal(got, series)
    assert type(got.name) is type(name) and type(got.index.name) is type(name)


def test_reads_frames_upstream_vineyard_wrote(client):
    """Upstream's Python client stores columns_ as a JSON list, a JSON-text
    name, the index as an Index over a tensor, and also __values_-key-<i>."""
    upstream = vineyard.ObjectMeta({"typename": "vineyard::DataFrame", "columns_": '["a", 1]',
                                    "__values_-key-0": '"a"', "__values_-key-1": "1", "__values_-size": 2,
                                    "partition_index_row_": 0, "partition_index_column_": 0, "row_batch_index_": 0})
    upstream.add_member("__values_-value-0", client.put(np.arange(3.0)))
    upstream.add_member("__values_-value-1", client.put(np.arange(3)))
    index = vineyard.ObjectMeta({"typename": "vineyard::Index", "name": '"k"', "value_type_": "int64"})
    index.add_member("value_", client.put(np.array([7, 8, 9])))
    upstream.add_member("index_", index)
    got = client.get(client.create_metadata(upstream).id)
    tm.assert_frame_equal(got, pd.DataFrame({"a": np.arange(3.0), 1: np.arange(3)},
                                            index=pd.Index([7, 8, 9], name="k"), columns=pd.Index(["a", 1])))


def test_a_column_longer_than_its_blob_is_an_error(client):
    tree = client.get_meta(client.put(pd.DataFrame({"a": np.arange(4.0)})))
    bad = vineyard.ObjectMeta({k: tree[k] for k in ("typename", "__values_-size")})
    bad.add_member("columns_index_", tree["columns_index_"].id)
    bad.add_member("index_", vineyard.ObjectMeta({"typename": "vineyard::RangeIndex", "start_": 0,
                                                  "stop_": 1 << 20, "step_": 1, "name": "null"}))
    column = vineyard.ObjectMeta({k: tree["__values_-value-0"][k] for k in
                                  ("typename", "order_", "value_type_", "value_type_meta_")})
    column["shape_"] = "[1048576]"  # the blob holds 4 values
    column.add_member("buffer_", tree["__values_-value-0"]["buffer_"].id)
    bad.add_member("__values_-value-0", column)
    with pytest.raises(ValueError, match="needs more than its blob"):
        client.get(client.create_metadata(bad).id)


def test_works_without_the_pandas_internals_used_for_speed(client, monkeypatch):
    from pandas.core.indexes.datetimelike import DatetimeTimedeltaMixin

    monkeypatch.delattr(pd.DataFrame, "_iter_column_arrays")
    monkeypatch.delattr(DatetimeTimedeltaMixin, "_with_freq")
    df = pd.DataFrame(_frame_columns())
    df.index = pd.date_range("2020", periods=N, freq="D")
    got = _roundtrip(client, df)
    tm.assert_frame_equal(got, df, check_freq=True)
    assert got.index.freq == df.index.freq


def test_attrs_roundtrip(client):
    series = pd.Series([1.0])
    series.attrs = {"unit": "m", "scale": np.float64(2.5), "nested": {"a": [1, 2]}}
    assert _roundtrip(client, series).attrs == series.attrs


def test_subclasses_keep_their_type(client):
    got = _roundtrip(client, _SubFrame({"a": [1, 2]}))
    assert type(got) is _SubFrame
    tm.assert_frame_equal(got, _SubFrame({"a": [1, 2]}))


class _SubFrame(pd.DataFrame):
    @property
    def _constructor(self):
        return _SubFrame


def test_gets_share_no_mutable_part_of_their_labels(client):
    """Column labels said inline are made once per text and shared as
    views: what one got frame changes in its columns (the name) reaches no
    other get, and labels that were pickled are never shared."""
    ids = [client.put(pd.DataFrame({"a": [1.0], "b": [2.0]})) for _ in range(2)]
    first = client.get(ids[0])
    first.columns.name = "changed"
    second, again = client.get(ids[1]), client.get(ids[0])
    assert second.columns.name is None and again.columns.name is None
    assert list(second.columns) == ["a", "b"] and list(again.columns) == ["a", "b"]
    pickled = pd.DataFrame({_Label("x"): [1.0]})
    one, two = (client.get(client.put(pickled)) for _ in range(2))
    assert one.columns[0] == two.columns[0] and one.columns[0] is not two.columns[0]
    one.columns[0].text = "mutated"
    assert two.columns[0].text == "x"


class _Label:
    """A hashable column label JSON cannot say (stored pickled), and mutable."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Label) and other.text == self.text

    def __hash__(self) -> int:
        return hash(("_Label", self.text))


def _store_views(column: pd.Series) -> list[tuple[tuple[str, ...], np.ndarray]]:
    """The NumPy arrays a got column must be views of, with the member path
    (below the column's tree) of the tensor each must view."""
    dtype, array = column.dtype, column.array
    if isinstance(dtype, np.dtype) and dtype != object:
        return [((), column.to_numpy())]
    if isinstance(dtype, pd.DatetimeTZDtype):
        return [((), array.asi8)]
    if isinstance(dtype, pd.CategoricalDtype):
        return [(("codes_",), array.codes)]
    if isinstance(array, (pd.arrays.IntegerArray, pd.arrays.FloatingArray, pd.arrays.BooleanArray)):
        return [(("values_",), array._data), (("mask_",), array._mask)]
    return []


def _assert_views_of_the_store(client, oid, got: pd.DataFrame) -> set[str]:
    """Asserts that each NumPy array behind a column of ``got`` starts at its
    blob in the store and is read-only; returns the names of those columns."""
    meta = client.get_meta(oid)
    checked = set()
    for i, (name, column) in enumerate(got.items()):
        for path, values in _store_views(column):
            tensor = meta[f"__values_-value-{i}"]
            for key in path:
                tensor = tensor[key]
            assert values.ctypes.data == client.get_blob(tensor["buffer_"].id).address, name
            assert not values.flags.writeable, name
            checked.add(name)
    return checked


def test_numeric_columns_are_views_of_the_store(client):
    df = pd.DataFrame(_frame_columns())
    oid = client.put(df)
    got = client.get(oid)
    checked = _assert_views_of_the_store(client, oid, got)
    assert checked == set(df.columns) - {"period", "interval", "sparse", "object-mixed"}  # those are pickled
    assert np.shares_memory(got["float64"].to_numpy(), got.iloc[:, list(df).index("float64")].to_numpy())


def test_arrow_backed_columns_are_views_of_the_store(client):
    pytest.importorskip("vineyard.data.arrow", reason="the Arrow layer (branch arrow) is not merged yet")
    df = pd.DataFrame({"s": pd.Series(["a", None, "bc"] * 1000), "a": pd.Series([1, None, 3] * 1000,
                                                                              dtype="int64[pyarrow]")})
    oid = client.put(df)
    got = client.get(oid)
    ranges = _blob_ranges(client, oid)
    for name in df:
        arrow = pa.array(got[name].array)
        for chunk in arrow.chunks if isinstance(arrow, pa.ChunkedArray) else [arrow]:
            for buf in chunk.buffers():
                if buf is not None and buf.size:
                    assert _inside(buf.address, ranges), name


@pytest.mark.parametrize("index", [pd.Index(np.arange(1000, dtype="int64") * 3, name="k"),
                                   pd.date_range("2020", periods=1000, freq="min", tz="UTC"),
                                   pd.timedelta_range(0, periods=1000, freq="s")], ids=["int", "datetime", "timedelta"])
def test_numeric_index_is_a_view_of_the_store(client, index):
    oid = client.put(index)
    got = client.get(oid)
    values = got.asi8 if hasattr(got, "asi8") else got.to_numpy()
    assert values.ctypes.data == client.get_blob(client.get_meta(oid)["value_"]["buffer_"].id).address
    assert not values.flags.writeable
    tm.assert_index_equal(got, index, exact=True)
    assert getattr(got, "freq", None) == getattr(index, "freq", None)


@pytest.mark.parametrize("rows, creates", [
    (1, ["v6d_put_inline"]),  # small: the bytes go with the tree, one round trip
    (10000, ["v6d_create_buffers", "v6d_create_metadata"]),  # larger: blobs in one round trip, the tree in one
])
def test_round_trips_of_a_put(client, monkeypatch, rows, creates):
    calls: list[str] = []
    call = vineyard._ffi.call

    def counted(name, *args):
        calls.append(name)
        return call(name, *args)

    monkeypatch.setattr(vineyard._ffi, "call", counted)
    df = pd.concat([pd.DataFrame(_frame_columns())] * rows, ignore_index=True)
    df.index = pd.MultiIndex.from_product([range(2 * rows), ["a", "b", "c"]])
    oid = client.put(df)
    monkeypatch.undo()
    assert [c for c in calls if c.startswith(("v6d_create", "v6d_put"))] == creates
    tm.assert_frame_equal(client.get(oid), df)


def _writable_frame() -> pd.DataFrame:
    return pd.DataFrame({"f": np.arange(N, dtype="f8"), "i": np.arange(N), "m": pd.array(range(N), dtype="Int64"),
                         "c": pd.Categorical(list("abcabc")), "t": pd.date_range("2020", periods=N, tz="UTC")})


def test_writes_copy_and_never_reach_the_store(client, vineyard_socket):
    original = _writable_frame()
    oid = client.put(original)
    got = client.get(oid)
    view = got["i"]
    got.iloc[0, 0] = 42.0
    got.loc[1, "m"] = 7
    got.loc[2, "c"] = "a"
    got.loc[3, "t"] = pd.Timestamp("1999", tz="UTC")
    got["f"] += 1
    assert got["f"].tolist() == [43.0, 2, 3, 4, 5, 6] and got.loc[1, "m"] == 7 and got.loc[2, "c"] == "a"
    assert view.iloc[0] == 0
    del got
    gc.collect()
    view.iloc[0] = -5  # a column that outlived its frame is still protected
    assert view.iloc[0] == -5
    series = client.get(client.put(original["i"]))
    series.iloc[1] = 99
    series[series == 4] = 0
    assert series.tolist() == [0, 99, 2, 3, 0, 5]
    tm.assert_frame_equal(client.get(oid), original)
    _check_in_spawned_child(vineyard_socket, oid, _writable_frame)


def _child_check(sock: str, oid: int, expected, q) -> None:
    try:
        client = vineyard.connect(sock)
        got = client.get(oid)
        tm.assert_frame_equal(got, expected())
        q.put((_assert_views_of_the_store(client, oid, got), None))
    except BaseException as e:  # report, so that the parent fails at once
        q.put((set(), repr(e)))
        raise


def _check_in_spawned_child(sock: str, oid, expected) -> None:
    """Asserts that a fresh, spawned process gets ``oid`` equal to what the
    module-level function ``expected`` returns, with every numeric column a
    view of the store."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child_check, args=(sock, int(oid), expected, q))
    p.start()
    views, error = q.get(timeout=120)
    p.join(30)
    assert error is None and p.exitcode == 0, error
    assert views == {name for name, column in expected().items() if _store_views(column)} and views


def _every_column_frame() -> pd.DataFrame:
    df = pd.DataFrame({**_frame_columns(), **_arrow_columns()})
    df.index = pd.date_range("2020", periods=N, name="d")
    return df


def test_spawned_child_gets_the_frame(client, vineyard_socket):
    _check_in_spawned_child(vineyard_socket, client.put(_every_column_frame()), _every_column_frame)


def _wait_for_usage(client, expected: int) -> None:
    deadline = time.monotonic() + 10
    while client.status.memory_usage != expected:
        assert time.monotonic() < deadline, (client.status.memory_usage, expected)
        time.sleep(0.05)


def test_delete_keeps_got_frame_until_dropped(client, vineyard_socket):
    gc.collect()
    before = client.status.memory_usage
    df = pd.DataFrame({"a": np.arange(1 << 20, dtype="f8"), "b": np.arange(1 << 20)})
    with vineyard.connect(vineyard_socket) as writer:  # its references go when it disconnects
        oid = writer.put(df)
    del writer
    _wait_for_usage(client, before + (16 << 20))
    got = client.get(oid)
    column = got["a"]
    client.delete(oid)
    assert not client.exists(oid)
    filler = client.put(np.full(2 << 20, -1.0))  # must not reuse the frame's memory
    assert client.status.memory_usage == before + (32 << 20)
    tm.assert_frame_equal(got, df)
    del got
    gc.collect()
    assert client.status.memory_usage == before + (32 << 20)
    np.testing.assert_array_equal(column.to_numpy(), df["a"].to_numpy())  # held by the column
    del column
    gc.collect()
    assert client.status.memory_usage == before + (16 << 20)
    np.testing.assert_array_equal(client.get(filler), np.full(2 << 20, -1.0))


def test_big_frame_copies_in_chunks(client):
    rows = 3_000_000  # 24 MB per column: the copy is split over threads
    contiguous = pd.DataFrame({"a": np.arange(rows, dtype="f8"), "b": np.arange(rows)[::-1].copy()})
    tm.assert_frame_equal(_roundtrip(client, contiguous), contiguous)
    block = np.arange(rows * 3, dtype="i8").reshape(rows, 3)
    strided = pd.DataFrame(block, copy=False)  # columns are strided views of one block
    assert not strided[0].to_numpy().flags.c_contiguous
    tm.assert_frame_equal(_roundtrip(client, strided), strided)
    array = block[:, 1:]  # a strided 2-D array: stored C-contiguous, copied in slabs of rows
    np.testing.assert_array_equal(_roundtrip(client, array), array)


def test_frames_nested_in_containers(client):
    df = pd.DataFrame({"a": [1, 2]})
    got = _roundtrip(client, [df, {"s": df["a"]}])
    tm.assert_frame_equal(got[0], df)
    tm.assert_series_equal(got[1]["s"], df["a"])


def test_failed_put_leaves_nothing_behind(client, vineyard_socket):
    gc.collect()
    before = client.status.memory_usage
    objects = {m.id for m in client.list_metadatas(limit=0)}
    df = pd.DataFrame({"s": ["a", "b"], "f": [1.0, 2.0], "bad": pd.Series([lambda: 1, 2], dtype=object)})
    with vineyard.connect(vineyard_socket) as writer, pytest.raises((pickle.PicklingError, AttributeError)):
        writer.put(df)  # the Arrow column "s" is stored before "bad" fails
    del writer
    assert {m.id for m in client.list_metadatas(limit=0)} == objects
    _wait_for_usage(client, before)


def test_import_vineyard_does_not_import_pandas(vineyard_socket):
    code = textwrap.dedent(f"""
        import sys, numpy, vineyard
        c = vineyard.connect({vineyard_socket!r})
        c.get(c.put(numpy.arange(3)))
        assert "pandas" not in sys.modules and "pyarrow" not in sys.modules, "imported"
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
