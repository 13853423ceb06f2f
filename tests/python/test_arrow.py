"""Arrow data through the Arrow C data interface: roundtrips of every type,
zero-copy, lifetime (capsules, releases, delete, close, fork), polars and
duckdb, bad input."""

from __future__ import annotations

import ctypes
import datetime
import decimal
import gc
import json
import multiprocessing as mp
import os
import struct
import subprocess
import sys
import textwrap
import time

import numpy as np
import pyarrow as pa
import pytest
import vineyard
from vineyard.data.arrow import ArrowArray, ArrowArrayStream, ArrowObject, ArrowSchema, arrow_exports


def _ints(n: int = 10) -> list:
    return [None if i % 3 == 1 else i for i in range(n)]


def _arrays() -> dict[str, pa.Array]:
    tz = datetime.timezone(datetime.timedelta(hours=2))
    d = decimal.Decimal
    out = {
        "null": pa.array([None] * 5, pa.null()),
        "bool": pa.array([True, None, False, True, True, False, None, True, True, False]),
        "float16": pa.array(np.array([1.5, 0, -2], np.float16), mask=np.array([False, True, False])),
        "float32": pa.array([1.5, None, -2.25], pa.float32()),
        "float64": pa.array([1.5, None, -2.25, 1e300]),
        "string": pa.array(["a", None, "", "héllo", "x" * 40]),
        "large_string": pa.array(["a", None, "", "héllo"], pa.large_string()),
        "string_view": pa.array(["a", None, "a string longer than twelve", ""], pa.string_view()),
        "binary": pa.array([b"a", None, b"", b"\x00\xff"], pa.binary()),
        "large_binary": pa.array([b"a", None, b"", b"\x00\xff"], pa.large_binary()),
        "binary_view": pa.array([b"a", None, b"bytes longer than twelve"], pa.binary_view()),
        "fixed_size_binary": pa.array([b"abc", None, b"def"], pa.binary(3)),
        "date32": pa.array([datetime.date(2024, 1, 2), None], pa.date32()),
        "date64": pa.array([datetime.date(2024, 1, 2), None], pa.date64()),
        "time32": pa.array([datetime.time(1, 2, 3), None], pa.time32("s")),
        "time64": pa.array([datetime.time(1, 2, 3, 4), None], pa.time64("us")),
        "timestamp_tz": pa.array([datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=tz), None],
                                 pa.timestamp("us", tz="Europe/Paris")),
        "timestamp": pa.array([datetime.datetime(2024, 1, 2, 3, 4, 5), None], pa.timestamp("ns")),
        "duration": pa.array([datetime.timedelta(seconds=5), None], pa.duration("ms")),
        "interval": pa.array([pa.MonthDayNano([1, 2, 3]), None], pa.month_day_nano_interval()),
        "decimal128": pa.array([d("1.5"), None, d("-2.0000000001")], pa.decimal128(38, 10)),
        "decimal256": pa.array([d("1.5"), None, d("-2.125")], pa.decimal256(60, 3)),
        "decimal32": pa.array([d("1.5"), None, d("-2.12")], pa.decimal32(7, 2)),
        "decimal64": pa.array([d("1.5"), None, d("-2.12")], pa.decimal64(15, 2)),
        "list": pa.array([[1, 2], None, [], [3, None]], pa.list_(pa.int64())),
        "large_list": pa.array([["a"], None, [], ["b", None]], pa.large_list(pa.string())),
        "fixed_size_list": pa.array([[1, 2], None, [3, None]], pa.list_(pa.int32(), 2)),
        "list_view": pa.array([[1, 2], None, [], [3]], pa.list_view(pa.int16())),
        "struct": pa.array([{"a": 1, "b": "x"}, None, {"a": None, "b": "y"}, {"a": 4, "b": None}],
                           pa.struct([pa.field("a", pa.int64()),
                                      pa.field("b", pa.string(), metadata={"k": "v"})])),
        "map": pa.array([[("a", 1)], None, [], [("b", None), ("c", 3)]], pa.map_(pa.string(), pa.int32())),
        "dictionary": pa.array(["a", "b", None, "a", "c"]).dictionary_encode(),
        "ordered_dictionary": pa.DictionaryArray.from_arrays(pa.array([0, 1, None, 0], pa.int8()),
                                                             pa.array(["x", "y"]), ordered=True),
        "sparse_union": pa.UnionArray.from_sparse(pa.array([0, 1, 0], pa.int8()),
                                                  [pa.array([1, None, 3]), pa.array(["x", "y", None])]),
        "dense_union": pa.UnionArray.from_dense(pa.array([0, 1, 0, 1], pa.int8()),
                                                pa.array([0, 0, 1, 1], pa.int32()),
                                                [pa.array([1, None]), pa.array(["x", "y"])]),
        "run_end_encoded": pa.RunEndEncodedArray.from_arrays(pa.array([2, 3, 6], pa.int32()),
                                                             pa.array(["a", None, "c"])),
        "nested": pa.array([{"l": [{"m": [("k", [1.5])]}]}, None, {"l": None}],
                           pa.struct([("l", pa.list_(pa.struct([("m", pa.map_(pa.string(),
                                                                                pa.list_(pa.float64())))])))])),
    }
    # Inlined views only, with an empty data buffer (the fuzzer found that one).
    out["string_view_empty_data"] = pa.Array.from_buffers(
        pa.string_view(), 2, [None, pa.py_buffer(struct.pack("<i12si12s", 3, b"abc", 0, b"")), pa.py_buffer(b"")])
    for t in (pa.int8(), pa.uint8(), pa.int16(), pa.uint16(), pa.int32(), pa.uint32(), pa.int64(), pa.uint64()):
        out[str(t)] = pa.array(_ints(), t)
    return out


ARRAYS = _arrays()


def _variants(arr: pa.Array) -> dict[str, pa.Array]:
    out = {"whole": arr, "empty": arr.slice(0, 0)}
    if len(arr) > 2:
        out["sliced"] = arr.slice(1, len(arr) - 2)
    return out


def _buffers(obj) -> list[pa.Buffer]:
    """Every non-empty buffer of an Array/ChunkedArray/RecordBatch/Table, children and dictionaries included."""
    if isinstance(obj, pa.Table):
        return [b for col in obj.columns for b in _buffers(col)]
    if isinstance(obj, pa.RecordBatch):
        return [b for col in obj.columns for b in _buffers(col)]
    if isinstance(obj, pa.ChunkedArray):
        return [b for chunk in obj.chunks for b in _buffers(chunk)]
    out = [b for b in obj.buffers() if b is not None and b.size > 0]
    if isinstance(obj, pa.DictionaryArray):
        out += _buffers(obj.dictionary)
    return out


def _blob_addresses(client, tree: dict) -> set[int]:
    out: set[int] = set()
    for value in tree.values():
        if isinstance(value, dict):
            if value.get("typename") == "vineyard::Blob":
                if int(value.get("length", 0)):
                    out.add(client._session.blob_pointer(int(vineyard.ObjectID(value["id"])))[0])
            else:
                out |= _blob_addresses(client, value)
    return out


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_array_roundtrip_every_type(client, name):
    for variant, arr in _variants(ARRAYS[name]).items():
        got = client.get(client.put(arr))
        assert isinstance(got, pa.Array), variant
        assert got.type == arr.type, (variant, got.type, arr.type)
        assert got.equals(arr), (variant, got, arr)
        got.validate(full=True)


def test_sliced_struct_keeps_its_children_aligned(client):
    arr = ARRAYS["struct"].slice(1, 3)
    got = client.get(client.put(arr))
    assert got.to_pylist() == arr.to_pylist()
    assert got.field(0).to_pylist() == arr.field(0).to_pylist()


def test_chunked_array_several_chunks_and_none(client):
    ca = pa.chunked_array([pa.array([1, None]), pa.array([], pa.int64()), pa.array([3, 4, 5])])
    got = client.get(client.put(ca))
    assert isinstance(got, pa.ChunkedArray) and got.num_chunks == 3 and got.equals(ca)
    empty = pa.chunked_array([], pa.list_(pa.string()))
    got = client.get(client.put(empty))
    assert got.type == empty.type and got.num_chunks == 0
    strings = pa.chunked_array([["a", None], ["b"]], pa.large_string())
    assert client.get(client.put(strings)).equals(strings)


def _table(batches: int = 3) -> pa.Table:
    schema = pa.schema([pa.field("x", pa.int64()), pa.field("s", pa.string(), metadata={"field": "meta"}),
                        pa.field("d", pa.dictionary(pa.int32(), pa.string())),
                        pa.field("l", pa.list_(pa.float64()), nullable=False)],
                       metadata={"pandas": json.dumps({"index_columns": []}), "other": "x"})
    parts = []
    for b in range(batches):
        n = 3 + b
        parts.append(pa.record_batch([pa.array([b * 10 + i if i != 1 else None for i in range(n)]),
                                      pa.array([f"s{b}{i}" for i in range(n)]),
                                      pa.array(["u", "v"] * (n // 2) + ["u"] * (n % 2)).dictionary_encode(),
                                      pa.array([[float(i)] for i in range(n)])], schema=schema))
    return pa.Table.from_batches(parts, schema)


def test_table_several_chunks_with_metadata(client):
    t = _table()
    got = client.get(client.put(t))
    assert isinstance(got, pa.Table)
    assert got.equals(t, check_metadata=True)
    assert got.schema.metadata == t.schema.metadata
    assert got.schema.field("s").metadata == {b"field": b"meta"}
    assert not got.schema.field("l").nullable
    assert [len(b) for b in got.to_batches()] == [len(b) for b in t.to_batches()]


def test_empty_table_keeps_schema(client):
    t = _table().schema.empty_table()
    t = pa.Table.from_batches([], t.schema)
    got = client.get(client.put(t))
    assert got.num_rows == 0 and got.schema.equals(t.schema, check_metadata=True)


def test_record_batch_and_slices(client):
    rb = _table(1).to_batches()[0]
    for variant in (rb, rb.slice(1, 2), rb.slice(0, 0)):
        got = client.get(client.put(variant))
        assert isinstance(got, pa.RecordBatch)
        assert got.equals(variant, check_metadata=True)


def test_table_from_pandas_roundtrips(client):
    import pandas as pd

    df = pd.DataFrame({"a": [1, 2, 3], "b": ["x", None, "z"], "c": pd.date_range("2024-01-01", periods=3, tz="UTC")})
    t = pa.Table.from_pandas(df)
    got = client.get(client.put(t))
    assert got.equals(t, check_metadata=True)
    pd.testing.assert_frame_equal(got.to_pandas(), df)


def test_get_is_zero_copy(client):
    t = pa.concat_tables([_table(), _table()])
    oid = client.put(t)
    got = client.get(oid)
    obj = client.get_object(oid)
    blobs = _blob_addresses(client, obj.meta._tree)
    buffers = _buffers(got)
    assert buffers
    for buf in buffers:
        assert client.is_shared_memory(buf), buf
        assert buf.address in blobs
    assert not client.is_shared_memory(t.column(0).chunk(0).buffers()[1])
    for name in ("list", "struct", "string_view", "dictionary", "map"):
        arr = client.get(client.put(ARRAYS[name]))
        assert all(client.is_shared_memory(b) for b in _buffers(arr))


def test_buffers_are_64_byte_aligned(client):
    got = client.get(client.put(_table()))
    assert all(b.address % 64 == 0 for b in _buffers(got))


def test_member_subtree_exports_without_round_trip(client):
    t = _table()
    obj = client.get_object(client.put(t))
    col = obj.member("partitions_-1").member("__columns_-1")
    assert isinstance(col, ArrowObject)
    assert pa.array(col).equals(t.column(1).chunk(1))
    tree = obj.meta._tree["partitions_-2"]
    batch = vineyard.data.arrow.resolve_arrow(client._session, tree)
    assert batch.equals(t.to_batches()[2])


def test_object_capsules_feed_pyarrow(client):
    t = _table()
    obj = client.get_object(client.put(t))
    assert pa.table(obj).equals(t)
    assert pa.schema(obj).equals(t.schema, check_metadata=True)
    arr_obj = client.get_object(client.put(ARRAYS["string"]))
    assert pa.array(arr_obj).equals(ARRAYS["string"])


def test_capsule_dropped_without_consumer_released_once(client):
    oid = client.put(_table())
    obj = client.get_object(oid)
    gc.collect()
    base = arrow_exports()
    stream = obj.__arrow_c_stream__()
    assert arrow_exports() == base + 1
    schema, array = client.get_object(client.put(ARRAYS["list"])).__arrow_c_array__()
    assert arrow_exports() == base + 3
    schema_only = obj.__arrow_c_schema__()
    assert arrow_exports() == base + 4
    del stream, schema, array, schema_only
    gc.collect()
    assert arrow_exports() == base
    # Consumed capsules are released by their consumer, once.
    for _ in range(3):
        pa.table(obj)
    gc.collect()
    assert arrow_exports() == base


def _usage(sock: str) -> int:
    with vineyard.connect(sock) as c:
        return c.status.memory_usage


def _wait_for(cond, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_deleted_object_stays_until_last_consumer_releases(vineyard_socket):
    putter = vineyard.connect(vineyard_socket)
    t = pa.table({"x": np.arange(1 << 18, dtype=np.int64), "y": np.arange(1 << 18, dtype=np.float64)})
    oid = putter.put(t)
    putter.close()  # its seal references go with the connection
    del putter
    gc.collect()
    reader = vineyard.connect(vineyard_socket)
    got = reader.get(oid)
    expected = t.column("x").to_numpy().copy()
    with_table = _usage(vineyard_socket)
    reader.delete(oid)
    assert not reader.exists(oid)
    assert _usage(vineyard_socket) == with_table  # memory stays while the table lives
    other = reader.put(pa.table({"z": np.full(1 << 18, -1, dtype=np.int64)}))  # try to reuse it
    assert (got.column("x").to_numpy() == expected).all()
    reader.delete(other)
    del got
    gc.collect()
    _wait_for(lambda: _usage(vineyard_socket) < with_table, "memory of the deleted table was not freed")
    reader.close()


def test_close_with_live_exports_keeps_data_readable(vineyard_socket):
    with vineyard.connect(vineyard_socket) as putter:
        oid = putter.put(_table())
    c = vineyard.connect(vineyard_socket)
    got = c.get(oid)
    capsule = c.get_object(oid).__arrow_c_stream__()
    expected = _table()
    watcher = vineyard.connect(vineyard_socket)
    conns = watcher.status.ipc_connections
    handles = vineyard._ffi.lib().v6d_open_handles()
    c.close()
    del c
    gc.collect()
    assert vineyard._ffi.lib().v6d_open_handles() == handles - 1  # the handle is gone at once
    assert watcher.status.ipc_connections == conns  # the connection waits for the exports
    assert got.equals(expected)
    assert pa.RecordBatchReader._import_from_c_capsule(capsule).read_all().equals(expected)
    del got, capsule
    gc.collect()
    _wait_for(lambda: watcher.status.ipc_connections == conns - 1, "the connection was not closed")
    watcher.close()


def test_spawned_process_gets_what_another_put(client, vineyard_socket):
    t = _table()
    oid = client.put(t)
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        out = pool.apply(_child_get, (vineyard_socket, int(oid)))
    assert out == t.to_pylist()


def _child_get(sock: str, oid: int) -> list:
    c = vineyard.connect(sock)
    got = c.get(oid)
    assert all(c.is_shared_memory(b) for b in _buffers(got))
    return got.to_pylist()


def test_polars_roundtrip_and_zero_copy(client):
    pl = pytest.importorskip("polars")
    df = pl.DataFrame({"a": [1, 2, 3], "s": ["x", None, "a string longer than twelve"], "l": [[1], [], None]})
    got = client.get(client.put(df))
    assert isinstance(got, pl.DataFrame) and got.equals(df)
    series = pl.Series("v", [1.5, None, 3.0])
    got_s = client.get(client.put(series))
    assert isinstance(got_s, pl.Series) and got_s.equals(series)
    # Object → polars without pyarrow: the numbers are the shared memory.
    oid = client.put(pl.DataFrame({"n": list(range(1000))}))
    frame = pl.DataFrame(client.get_object(oid))
    assert frame["n"].sum() == sum(range(1000))
    assert client.is_shared_memory(frame["n"].to_numpy())
    # A pyarrow table into polars.
    t = _table(1)
    assert pl.DataFrame(client.get_object(client.put(t)))["x"].to_list() == t.column("x").to_pylist()


def test_duckdb_reads_objects(client):
    duckdb = pytest.importorskip("duckdb")
    t = _table()
    obj = client.get_object(client.put(t))  # noqa: F841 (duckdb finds it by name)
    con = duckdb.connect()
    total = con.sql("select sum(x) as s, count(*) as n from obj").fetchall()
    assert total == [(sum(v for v in t.column("x").to_pylist() if v is not None), t.num_rows)]
    oid = client.put(con.sql("select 42 as answer, 'x' as s").arrow())
    assert client.get(oid).to_pylist() == [{"answer": 42, "s": "x"}]


def test_put_from_capsule_protocol_objects(client):
    class Producer:
        def __init__(self, t):
            self.t = t

        def __arrow_c_stream__(self, requested_schema=None):
            return self.t.__arrow_c_stream__(requested_schema)

    class ArrayProducer:
        def __arrow_c_array__(self, requested_schema=None):
            return ARRAYS["string"].__arrow_c_array__(requested_schema)

    t = _table()
    assert client.get(client.put(Producer(t))).equals(t)
    assert client.get(client.put(ArrayProducer())).equals(ARRAYS["string"])
    assert client.get(client.put(Producer(pa.chunked_array([[1, 2], [3]])))).equals(pa.chunked_array([[1, 2], [3]]))


# ---- bad input -----------------------------------------------------------------

def _call_status(name: str, *args) -> tuple[int, str]:
    err = vineyard._bindings.V6DError()
    st = getattr(vineyard._ffi.lib(), name)(*args, ctypes.byref(err))
    msg = ctypes.string_at(err.message).decode() if err.message else ""
    vineyard._ffi.lib().v6d_error_release(ctypes.byref(err))
    return st, msg


def test_null_and_released_structs(client):
    h = client._handle()
    out = ctypes.c_uint64()
    st, msg = _call_status("v6d_put_arrow_array", h, None, None, 0, None, ctypes.byref(out))
    assert st == vineyard.Status.INVALID and "NULL" in msg
    released = ArrowArray()
    st, msg = _call_status("v6d_put_arrow_array", h, ctypes.addressof(released), None, 0, None, ctypes.byref(out))
    assert st == vineyard.Status.INVALID and "released" in msg
    released_stream = ArrowArrayStream()
    st, msg = _call_status("v6d_put_arrow_stream", h, ctypes.addressof(released_stream), 0, None,
                           ctypes.byref(out))
    assert st == vineyard.Status.INVALID and "released" in msg
    st, msg = _call_status("v6d_get_arrow_array", h, 1, None, None)
    assert st == vineyard.Status.INVALID
    # An output struct that holds a live export is refused, not leaked.
    oid = client.put(ARRAYS["string"])
    arr, sch = ArrowArray(), ArrowSchema()
    assert _call_status("v6d_get_arrow_array", h, int(oid), ctypes.byref(arr), ctypes.byref(sch))[0] == 0
    st, msg = _call_status("v6d_get_arrow_array", h, int(oid), ctypes.byref(arr), ctypes.byref(sch))
    assert st == vineyard.Status.INVALID and "live" in msg
    pa.Array._import_from_c(ctypes.addressof(arr), ctypes.addressof(sch))


def test_get_of_non_arrow_objects_and_several_chunks(client):
    h = client._handle()
    arr, sch = ArrowArray(), ArrowSchema()
    st, msg = _call_status("v6d_get_arrow_array", h, int(client.put(np.arange(3))), ctypes.byref(arr),
                           ctypes.byref(sch))
    assert st == vineyard.Status.OBJECT_TYPE_ERROR and "not an Arrow object" in msg
    st, msg = _call_status("v6d_get_arrow_array", h, int(client.put(_table())), ctypes.byref(arr),
                           ctypes.byref(sch))
    assert st == vineyard.Status.OBJECT_TYPE_ERROR and "v6d_get_arrow_stream" in msg
    assert arr.release is None and sch.release is None
    with pytest.raises(TypeError, match="not Arrow data"):
        vineyard.data.arrow.put_arrow(client._session, 42)


def test_unsupported_type_is_not_implemented(client):
    arr = ARRAYS["int64"]
    schema_capsule, array_capsule = arr.__arrow_c_array__()
    sptr = ctypes.pythonapi.PyCapsule_GetPointer
    sptr.restype, sptr.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    schema = ArrowSchema.from_address(sptr(schema_capsule, b"arrow_schema"))
    original = schema.format
    schema.format = b"+x:weird"
    try:
        before = client.status.memory_usage
        st, msg = _call_status("v6d_put_arrow_array", client._handle(), sptr(array_capsule, b"arrow_array"),
                               ctypes.addressof(schema), 0, None, ctypes.byref(ctypes.c_uint64()))
    finally:
        schema.format = original
    assert st == vineyard.Status.NOT_IMPLEMENTED and "+x:weird" in msg
    assert ArrowArray.from_address(sptr(array_capsule, b"arrow_array")).release is None  # moved even so
    assert client.status.memory_usage == before


def test_stream_failing_midway_leaks_nothing(client):
    def batches():
        yield pa.record_batch({"x": [1, 2]})
        raise ValueError("producer broke")

    reader = pa.RecordBatchReader.from_batches(pa.schema([("x", pa.int64())]), batches())
    before = client.status.memory_usage
    exports = arrow_exports()
    with pytest.raises(vineyard.ArrowErrorException, match="producer broke"):
        client.put(reader)
    assert client.status.memory_usage == before
    assert arrow_exports() == exports


def test_malformed_tree_is_refused(client):
    oid = client.put(pa.array([1, 2, 3]))
    tree = client.get_object(oid).meta._tree
    for key, value in (("length_", 1 << 40), ("offset_", -1), ("format_", "+s"), ("null_count_", 9)):
        bad = dict(tree, **{key: value})
        with pytest.raises(vineyard.VineyardException):
            vineyard.data.arrow.resolve_arrow(client._session, bad)
    unheld = dict(tree, **{"buffers_-1": {"id": "o8000000000000123", "typename": "vineyard::Blob"}})
    with pytest.raises(vineyard.ObjectNotExistsException):
        vineyard.data.arrow.resolve_arrow(client._session, unheld)


# ---- processes -------------------------------------------------------------------

def _run(code: str, sock: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, VINEYARD_IPC_SOCKET=sock)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_exit_with_live_exports_does_not_crash(client, vineyard_socket):
    oid = client.put(_table())
    r = _run(f"""
        import pyarrow as pa, vineyard
        c = vineyard.connect()
        t = c.get({int(oid)})
        obj = c.get_object({int(oid)})
        stream, (schema, array) = obj.__arrow_c_stream__(), c.get_object({int(oid)}).member("partitions_-0").__arrow_c_array__()
        keep = [t, obj, stream, schema, array]
        print("ok")
    """, vineyard_socket)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_release_in_forked_child_does_not_hang(client, vineyard_socket):
    oid = client.put(_table())
    r = _run(f"""
        import gc, os, warnings
        import pyarrow as pa, vineyard
        warnings.simplefilter("ignore", DeprecationWarning)
        c = vineyard.connect()
        t = c.get({int(oid)})
        capsule = c.get_object({int(oid)}).__arrow_c_stream__()
        pid = os.fork()
        if pid == 0:
            total = sum(v for v in t.column("x").to_pylist() if v is not None)
            del t, capsule
            gc.collect()
            os._exit(0 if total > 0 else 3)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """, vineyard_socket, timeout=30)
    assert r.returncode == 0 and r.stdout.strip() == "0", (r.stdout, r.stderr)
