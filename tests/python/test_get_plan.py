"""Gets through a shape's plan (vineyard.data.tensor.numpy_plan, and for
trees of any number of blobs vineyard.data.arrow.arrow_plan and
vineyard.data.dataframe.dataframe_plan): the
second get of a tree shape (its number from v6d_get_object_shaped) makes its
value without parsing the tree, and must return exactly what the parse and
resolver return."""

from __future__ import annotations

import ctypes

import numpy as np
import pandas as pd
import pytest
import vineyard
from vineyard import _ffi
from vineyard import client as client_module

# (value, whether the second and third gets of its shape go through a plan)
VALUES = [
    (np.arange(10, dtype=np.uint8), True),
    (np.arange(12, dtype=np.float64).reshape(3, 4), True),
    (np.arange(24, dtype=np.int32).reshape(2, 3, 4), True),
    (np.array(5, dtype=np.int16), True),
    (np.array([1 + 2j, 3 - 4j], dtype=np.complex128), True),
    (np.array([True, False, True]), True),
    (np.arange(8, dtype=">u4"), True),  # big-endian: its dtype text differs from native
    (np.array(["a", "bc"]), True),  # fixed-width unicode is a plain dtype
    (np.zeros(0, dtype=np.float32), False),  # empty: the resolver's zeros
    (np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3)), False),  # upstream's F layout: a copy
    (np.array([{"a": 1}, None], dtype=object), False),  # pickled
]


def _count_plans(monkeypatch, maker: str) -> list[int]:
    """Counts the values the plans of ``maker`` (numpy_plan, arrow_plan or dataframe_plan, as
    the client module calls it) returned: the plan functions are wrapped, and
    the plans made so far forgotten."""
    used: list[int] = []
    made = getattr(client_module, maker)

    def counting(*tree_args):
        plan = made(*tree_args)
        if plan is None:
            return None

        def wrapped(*get_args):
            out = plan(*get_args)
            if out is not None:
                used.append(1)
            return out

        return wrapped

    monkeypatch.setattr(client_module, maker, counting)
    monkeypatch.setattr(client_module, "_plans", {})
    monkeypatch.setattr(client_module, "_text_plans", {})
    return used


def _plans_used(monkeypatch) -> list[int]:
    return _count_plans(monkeypatch, "numpy_plan")


@pytest.mark.parametrize(("value", "plannable"), VALUES, ids=[f"{v.dtype.str}{list(v.shape)}" for v, _ in VALUES])
def test_a_planned_get_equals_the_parsed_one(client, vineyard_socket, monkeypatch, value, plannable):
    used = _plans_used(monkeypatch)
    ids = [client.put(value) for _ in range(3)]
    with vineyard.connect(vineyard_socket) as other:  # first gets of each object
        got = [other.get(i) for i in ids]
        parsed = got[0]  # the shape's first get: parsed and resolved
        assert len(used) == (2 if plannable else 0)
        for g in got:
            assert type(g) is np.ndarray
            assert (g.dtype, g.shape, g.strides) == (parsed.dtype, parsed.shape, parsed.strides)
            assert g.flags.writeable == parsed.flags.writeable
            assert g.flags.c_contiguous == parsed.flags.c_contiguous
            assert g.flags.f_contiguous == parsed.flags.f_contiguous
            assert g.dtype == value.dtype and g.shape == value.shape
            np.testing.assert_array_equal(g, value)
        del got, parsed
    client.delete(ids)


MAKERS = ["numpy_plan", "arrow_plan", "dataframe_plan"]


def _value_of(maker: str, i: int):
    """The i-th of values of one tree shape that ``maker``'s plans get."""
    if maker == "numpy_plan":
        return np.full(1000, i, dtype=np.int64)
    if maker == "arrow_plan":
        return _arrow_values(i)[0]
    return _frame(i)


def _assert_same(got, want) -> None:
    if isinstance(want, np.ndarray):
        np.testing.assert_array_equal(got, want)
    elif isinstance(want, pd.DataFrame):
        pd.testing.assert_frame_equal(got, want, check_flags=True)
    else:
        assert got.equals(want)


@pytest.mark.parametrize("maker", MAKERS)
def test_a_plan_keeps_the_object_pinned(client, vineyard_socket, monkeypatch, maker):
    used = _count_plans(monkeypatch, maker)
    values = [_value_of(maker, i) for i in range(2)]
    ids = [client.put(v) for v in values]
    with vineyard.connect(vineyard_socket) as other:
        other.get(ids[0])
        got = other.get(ids[1])
        assert used == [1]
        client.delete(ids[1])  # hidden at once, its memory kept while the value lives
        for _ in range(50):  # new puts would reuse freed memory
            client.put(_value_of(maker, 7))
        _assert_same(got, values[1])


@pytest.mark.parametrize("maker", MAKERS)
def test_a_new_resolver_takes_over_from_the_plan(client, vineyard_socket, monkeypatch, maker):
    used = _count_plans(monkeypatch, maker)
    values = [_value_of(maker, i) for i in range(3)]
    typename = {"numpy_plan": "vineyard::Tensor<int64>", "arrow_plan": "vineyard::Table",
                "dataframe_plan": "vineyard::DataFrame"}[maker]
    ids = [client.put(v) for v in values]
    with vineyard.connect(vineyard_socket) as other:
        other.get(ids[0])
        other.get(ids[1])
        assert used == [1]
        monkeypatch.setattr("vineyard.data.registry._resolvers", dict(vineyard.data.registry._resolvers))
        vineyard.register_resolver(typename, lambda session, tree, pin: "mine")
        try:
            assert other.get(ids[2]) == "mine"
        finally:
            vineyard.data.registry._by_typename.clear()
        assert used == [1]


def test_a_tensor_with_another_member_object_gets_no_plan(client, vineyard_socket, monkeypatch):
    # Same shape, hence the same members: with a second member object the one
    # blob a get pins need not be the buffer, so such trees are always parsed.
    used = _plans_used(monkeypatch)
    ids = []
    for i in range(3):
        meta = client.get_meta(client.put(np.full(16, i, dtype=np.int32)))
        extra = client.create_metadata(vineyard.ObjectMeta({"typename": "my::Extra", "value_": 7}))
        ids.append(client.create_metadata(_tensor_with(meta, extra)).id)
    with vineyard.connect(vineyard_socket) as other:
        for i, oid in enumerate(ids):
            np.testing.assert_array_equal(other.get(oid), np.full(16, i, dtype=np.int32))
    assert used == []


def _tensor_with(meta, extra):
    """A tensor tree like meta's, with one more member object."""
    out = vineyard.ObjectMeta()
    for key, value in meta.items():
        if isinstance(value, vineyard.ObjectMeta):
            out.add_member(key, value)
        else:
            out[key] = value
    out.add_member("extra_", extra)
    return out


def _shaped_args(json, cap, n, ids, datas, sizes, nblobs, shape):
    """v6d_get_object_shaped's arguments after (client, id, flags), but err."""
    return [json, cap, ctypes.byref(n), len(ids), ids, datas, sizes, ctypes.byref(nblobs), shape]


def _shape_of(client, oid):
    buf = ctypes.create_string_buffer(4096)
    n, nblobs, shape = ctypes.c_size_t(), ctypes.c_size_t(), ctypes.c_uint64()
    ids, datas, sizes = (ctypes.c_uint64 * 4)(), (ctypes.c_void_p * 4)(), (ctypes.c_uint64 * 4)()
    args = _shaped_args(buf, 4096, n, ids, datas, sizes, nblobs, ctypes.byref(shape))
    _ffi.call("v6d_get_object_shaped", client._session.handle(), int(oid), 0, *args)
    _ffi.call("v6d_release", client._session.handle(), int(oid))
    return shape.value


def test_shape_numbers_follow_the_tree_text_but_ids_and_signatures(client):
    a, b = client.put(np.arange(6, dtype=np.int64)), client.put(np.arange(6, dtype=np.int64) * 2)
    other_shape = client.put(np.arange(7, dtype=np.int64))
    other_dtype = client.put(np.arange(6, dtype=np.int32))
    numbers = [_shape_of(client, oid) for oid in (a, b, other_shape, other_dtype)]
    assert numbers[0] == numbers[1] and numbers[0] > 0
    assert len(set(numbers[1:])) == 3


def test_a_get_without_room_for_the_shape_fails_and_holds_nothing(client):
    oid = client.put(np.arange(3))
    buf = ctypes.create_string_buffer(4096)
    n, nblobs = ctypes.c_size_t(), ctypes.c_size_t()
    ids, datas, sizes = (ctypes.c_uint64 * 4)(), (ctypes.c_void_p * 4)(), (ctypes.c_uint64 * 4)()
    args = _shaped_args(buf, 4096, n, ids, datas, sizes, nblobs, None)  # no shape
    with pytest.raises(vineyard.errors.InvalidException, match="shape must not be NULL"):
        _ffi.call("v6d_get_object_shaped", client._session.handle(), int(oid), 0, *args)
    with pytest.raises(vineyard.errors.ObjectNotExistsException):  # nothing is held
        _ffi.call("v6d_release", client._session.handle(), int(oid))


def _arrow_values(i: int) -> list:
    pa = pytest.importorskip("pyarrow")
    columns = {f"c{j}": np.arange(100, dtype=np.float64) * (i + 1) + j for j in range(24)}  # a tree of ~24 KiB
    columns["s"] = [f"row {k} of {i}" for k in range(100)]
    table = pa.table(columns)
    return [table, table.to_batches()[0], table.column("s"), pa.array(np.arange(5) + i)]


@pytest.mark.parametrize("kind", ["Table", "RecordBatch", "ChunkedArray", "Array"])
def test_a_planned_arrow_get_equals_the_parsed_one(client, vineyard_socket, monkeypatch, kind):
    used = _count_plans(monkeypatch, "arrow_plan")
    index = ["Table", "RecordBatch", "ChunkedArray", "Array"].index(kind)
    values = [_arrow_values(i)[index] for i in range(3)]  # one shape, other values
    ids = [client.put(v) for v in values]
    with vineyard.connect(vineyard_socket) as other:
        for _ in range(2):
            for oid, value in zip(ids, values):
                got = other.get(oid)
                assert type(got) is type(value) and got.equals(value)
    assert len(used) == 5  # every get but the shape's first
    client.delete(ids)


def _frame(i: int, rows: int = 100) -> pd.DataFrame:
    """Frames of one shape (dtypes, labels, rows) and other values."""
    return pd.DataFrame({
        "f": np.arange(rows, dtype=np.float64) * (i + 1),
        "i": np.arange(rows, dtype=np.int32) + i,
        "b": (np.arange(rows) + i) % 3 == 0,
        "t": pd.date_range("2020", periods=rows, freq="s") + pd.Timedelta(seconds=i),
        7: np.full(rows, i, dtype=np.uint8),
    })


FRAMES = {
    "plain": (_frame, True),
    "no-duplicates": (lambda i: _frame(i).set_flags(allows_duplicate_labels=False), True),
    "columns-named": (lambda i: _frame(i).rename_axis("cols", axis=1), True),
    "index": (lambda i: _frame(i).set_index("i"), False),
    "attrs": (lambda i: _with_attrs(_frame(i)), False),
    "string-column": (lambda i: _frame(i).assign(s=[f"r{k}" for k in range(100)]), False),
    "multiindex-columns": (lambda i: _frame(i).set_axis(pd.MultiIndex.from_tuples(
        [("a", 1), ("a", 2), ("b", 1), ("b", 2), ("c", 1)]), axis=1), False),
    "empty": (lambda i: _frame(i, rows=0), False),
}


def _with_attrs(df: pd.DataFrame) -> pd.DataFrame:
    df.attrs["source"] = "test"
    return df


@pytest.mark.parametrize("name", list(FRAMES))
def test_a_planned_frame_get_equals_the_parsed_one(client, vineyard_socket, monkeypatch, name):
    used = _count_plans(monkeypatch, "dataframe_plan")
    make, plannable = FRAMES[name]
    values = [make(i) for i in range(3)]  # one shape, other values
    ids = [client.put(v) for v in values]
    with vineyard.connect(vineyard_socket) as other:
        for _ in range(2):
            for oid, value in zip(ids, values):
                got = other.get(oid)
                pd.testing.assert_frame_equal(got, value, check_flags=True)
                assert got.attrs == value.attrs
    assert len(used) == (5 if plannable else 0)  # every get but the shape's first
    client.delete(ids)


def test_a_planned_frame_copies_on_write(client, vineyard_socket, monkeypatch):
    used = _count_plans(monkeypatch, "dataframe_plan")
    ids = [client.put(_frame(i)) for i in range(2)]
    with vineyard.connect(vineyard_socket) as other:
        other.get(ids[0])
        got = other.get(ids[1])
        assert used == [1]
        got.iloc[0, 0] = -5.0  # copies the block; the store keeps its bytes
        got.columns.name = "mine"
        assert got.iloc[0, 0] == -5.0
        again = other.get(ids[1])
        pd.testing.assert_frame_equal(again, _frame(1))
        assert again.columns.name is None


def test_shape_numbers_agree_across_paths_and_daemons(client, vineyard_socket, monkeypatch):
    """The daemon numbers shapes (its directory records and get_data replies
    carry the numbers); libv6d turns them into the process's numbers, so a
    get from the directory, one by round trip and one from another daemon
    give one shape one number, while two fresh daemons, which number their
    first shapes alike, never give two shapes one number."""
    from vineyard.deploy import start_vineyardd

    a = client.put(np.arange(6, dtype=np.int64))
    client.get(a)  # the daemon has it: the directory answers the next get
    first = _shape_of(client, a)
    monkeypatch.setenv("V6D_ACCEL", "-directory")
    plain = vineyard.connect(vineyard_socket)
    try:
        assert _shape_of(plain, a) == first  # by round trip: get_data's number
    finally:
        plain.close()
    monkeypatch.delenv("V6D_ACCEL")
    with start_vineyardd(size="64Mi") as one, start_vineyardd(size="64Mi") as two:
        # Puts by one connection, gets by another: not answered from one's
        # own puts (whose numbers libv6d cuts from the text), but by the
        # daemon's numbers.
        c1, c2, r1, r2 = (vineyard.connect(s) for s in (one, two, one, two))
        try:
            x = c1.put(np.arange(9, dtype=np.float32))  # each daemon's first object, of two shapes
            y = c2.put(np.arange(5, dtype=np.uint8))
            sx, sy = _shape_of(r1, x), _shape_of(r2, y)
            assert 0 not in (sx, sy) and sx != sy
            assert _shape_of(r2, c2.put(np.arange(6, dtype=np.int64) * 3)) == first  # one shape, one number
        finally:
            for c in (c1, c2, r1, r2):
                c.close()
