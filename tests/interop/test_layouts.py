"""Upstream's layouts built by hand with our client, read by ours: runs
without upstream's packages (the four-direction suite needs them), so the
readers of upstream's layouts are tested wherever ours is."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator

import numpy as np
import pytest
import vineyard
from vineyard.deploy import start_vineyardd

pa = pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def client() -> Iterator[vineyard.Client]:
    with start_vineyardd(size="256Mi") as sock:
        c = vineyard.connect(sock)
        yield c
        c.close()


def _blob(client: vineyard.Client, data: bytes) -> vineyard.ObjectID:
    builder = client.create_blob(len(data))
    if data:
        builder.copy(0, data)
    return builder.seal().id


def _member(client: vineyard.Client, data: bytes | None) -> vineyard.ObjectMeta:
    oid = _blob(client, data) if data else vineyard.ObjectID(1 << 63)
    return vineyard.ObjectMeta({"id": repr(oid), "typename": "vineyard::Blob"})


def _large_strings(client: vineyard.Client, items: list[str]) -> vineyard.ObjectMeta:
    arr = pa.array(items, type=pa.large_string())
    _, offsets, data = arr.buffers()
    meta = vineyard.ObjectMeta({"typename": "vineyard::BaseBinaryArray<arrow::LargeStringArray>",
                                "length_": len(arr), "null_count_": 0, "offset_": 0})
    meta.add_member("buffer_offsets_", _member(client, offsets.to_pybytes()))
    meta.add_member("buffer_data_", _member(client, data.to_pybytes()))
    meta.add_member("null_bitmap_", _member(client, None))
    return meta


def _tensor(typename: str, shape: tuple[int, ...], dtype: str, order: str = '"C"') -> vineyard.ObjectMeta:
    return vineyard.ObjectMeta({"typename": typename, "shape_": json.dumps(list(shape)), "partition_index_": "[]",
                                "order_": order, "value_type_": dtype, "value_type_meta_": dtype})


def test_fortran_tensor_is_stored_in_c_order(client) -> None:
    want = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    meta = _tensor("vineyard::Tensor<double>", (3, 4), "<f8", '"F"')
    meta.add_member("buffer_", _member(client, np.ascontiguousarray(want).tobytes()))
    got = client.get(client.create_metadata(meta).id)
    assert got.flags.f_contiguous and (got == want).all()


def test_unknown_order_is_an_error(client) -> None:
    meta = _tensor("vineyard::Tensor<double>", (2,), "<f8", '"K"')
    meta.add_member("buffer_", _member(client, np.arange(2.0).tobytes()))
    with pytest.raises(ValueError, match="unknown order_"):
        client.get(client.create_metadata(meta).id)


def test_string_tensor(client) -> None:
    meta = _tensor("vineyard::Tensor<std::string>", (3,), "str")
    meta["value_type_"] = "string"
    meta.add_member("buffer_", _large_strings(client, ["a", "", "déf"]))
    assert list(client.get(client.create_metadata(meta).id)) == ["a", "", "déf"]


def test_object_tensor_is_unpickled_never_mapped(client) -> None:
    want = np.array([(1, "a"), (2, "b")], dtype=object)
    meta = _tensor("vineyard::Tensor<object>", (2, 2), "|O")
    meta.add_member("buffer_", _member(client, pickle.dumps(want)))
    got = client.get(client.create_metadata(meta).id)
    assert got.tolist() == want.tolist()


def test_blob_shorter_than_tensor_is_an_error_not_zeros(client) -> None:
    meta = _tensor("vineyard::Tensor<double>", (100,), "<f8")
    meta.add_member("buffer_", _member(client, b"\x00" * 8))
    with pytest.raises(ValueError, match="needs more than its blob"):
        client.get(client.create_metadata(meta).id)


def test_upstream_numeric_and_string_arrays(client) -> None:
    ints = pa.array([1, None, 3], type=pa.int64())
    validity, values = ints.buffers()
    meta = vineyard.ObjectMeta({"typename": "vineyard::NumericArray<int64>", "length_": 3, "null_count_": 1,
                                "offset_": 0})
    meta.add_member("buffer_", _member(client, values.to_pybytes()))
    meta.add_member("null_bitmap_", _member(client, validity.to_pybytes()))
    assert client.get(client.create_metadata(meta).id).to_pylist() == [1, None, 3]
    strings = client.get(client.create_metadata(_large_strings(client, ["x", "yz"])).id)
    assert strings.to_pylist() == ["x", "yz"]


def test_upstream_record_batch_with_schema_proxy(client) -> None:
    schema = pa.schema([("s", pa.large_string())])
    proxy = vineyard.ObjectMeta({"typename": "vineyard::SchemaProxy",
                                 "schema_binary_": json.dumps({"bytes": list(schema.serialize().to_pybytes())})})
    meta = vineyard.ObjectMeta({"typename": "vineyard::RecordBatch", "row_num_": 2, "column_num_": 1,
                                "__columns_-size": 1})
    meta.add_member("schema_", proxy)
    meta.add_member("__columns_-0", _large_strings(client, ["p", "q"]))
    got = client.get(client.create_metadata(meta).id)
    assert got.schema == schema and got.to_pydict() == {"s": ["p", "q"]}


def test_upstream_array_shorter_than_its_length_is_an_error(client) -> None:
    meta = vineyard.ObjectMeta({"typename": "vineyard::NumericArray<int64>", "length_": 1000, "null_count_": 0,
                                "offset_": 0})
    meta.add_member("buffer_", _member(client, b"\x01" * 16))
    meta.add_member("null_bitmap_", _member(client, None))
    with pytest.raises(ValueError, match="do not fit"):
        client.get(client.create_metadata(meta).id)


def test_our_record_batch_carries_upstreams_schema(client) -> None:
    """Our batches of upstream's types also carry its SchemaProxy (the IPC
    schema), so its reader can take them; ours ignores it."""
    batch = pa.record_batch({"a": pa.array([1, None], type=pa.int32()), "s": pa.array(["x", "y"], pa.large_string()),
                             "f": [0.5, 1.5], "b": [True, None]})
    meta = client.get_meta(client.put(batch))
    proxy = meta["schema_"]
    assert proxy.typename == "vineyard::SchemaProxy"
    schema = pa.ipc.read_schema(pa.py_buffer(bytearray(json.loads(proxy["schema_binary_"])["bytes"])))
    assert schema == batch.schema
    assert client.get(meta.id).equals(batch)
    # a struct column has no upstream layout: no SchemaProxy
    assert "schema_" not in client.get_meta(client.put(pa.record_batch({"s": [{"x": 1}]})))


def test_version_is_the_daemons(client) -> None:
    """client.version is the daemon's register_reply.version, as upstream's
    client gives it (issue 13, item 5)."""
    assert client.version == "0.24.2"


def test_our_range_and_multi_index_carry_upstreams_value(client) -> None:
    """A RangeIndex or MultiIndex is a vineyard::Index whose value_ upstream's
    reader takes (a PickleBuffer of the range, of the MultiIndex); ours reads
    its own fields and gives the same index type back."""
    pd = pytest.importorskip("pandas")
    series = pd.Series(np.arange(3.0), index=pd.RangeIndex(2, 8, 2), name="s")
    index = client.get_meta(client.put(series))["index_"]
    assert index.typename == "vineyard::Index" and index["value_type_"] == "int64"
    assert client.get(index["value_"].id) == range(2, 8, 2)
    got = client.get(client.put(series))
    assert type(got.index) is pd.RangeIndex and got.index.equals(series.index)

    frame = pd.DataFrame({"a": np.arange(3)}, index=pd.MultiIndex.from_tuples([(1, "a"), (1, "b"), (2, "a")],
                                                                             names=["n", None]))
    index = client.get_meta(client.put(frame))["index_"]
    assert index.typename == "vineyard::Index" and index["value_type_"] == "object"
    assert client.get(index["value_"].id).equals(frame.index)
    got = client.get(client.put(frame))
    assert isinstance(got.index, pd.MultiIndex) and got.index.names == ["n", None]
    pd.testing.assert_frame_equal(got, frame)


def test_our_32bit_strings_and_lists_carry_upstreams_64bit_offsets(client) -> None:
    """A string or list array keeps its 32-bit offsets (what ours read, zero
    copy, giving the same type back) and also has upstream's typename and
    members, with the offsets widened to 64 bits in a blob of their own."""
    strings = pa.array(["a", None, "ccc", "dd"]).slice(1)
    meta = client.get_meta(client.put(strings))
    assert meta.typename == "vineyard::BaseBinaryArray<arrow::LargeStringArray>" and meta["format_"] == "u"
    wide = np.frombuffer(client.get(meta["buffer_offsets_"].id), dtype=np.int64)
    assert wide.tolist() == [0, 1, 1, 4, 6]
    assert meta["buffer_data_"].id == meta["buffers_-2"].id
    got = client.get(meta.id)
    assert got.type == pa.string() and got.equals(strings)

    lists = pa.array([[1, 2], [], None, [3]])
    meta = client.get_meta(client.put(lists))
    assert meta.typename == "vineyard::LargeListArray" and meta["values_"]["format_"] == "l"
    assert np.frombuffer(client.get(meta["buffer_offsets_"].id), dtype=np.int64).tolist() == [0, 2, 2, 2, 3]
    got = client.get(meta.id)
    assert got.type == pa.list_(pa.int64()) and got.equals(lists)

    batch = pa.record_batch({"s": ["x", "y"], "l": pa.array([[1], []], type=pa.list_(pa.int32()))})
    meta = client.get_meta(client.put(batch))
    proxy = meta["schema_"]
    schema = pa.ipc.read_schema(pa.py_buffer(bytearray(json.loads(proxy["schema_binary_"])["bytes"])))
    assert schema.types == [pa.large_string(), pa.large_list(pa.int32())]  # as upstream reads the columns
    assert client.get(meta.id).equals(batch)


def test_frame_column_of_a_pickled_scalar_is_an_error(client) -> None:
    """What upstream 0.24.2 writes for a nullable column under pandas 3 (the
    first value, pickled): a clear error naming the column, never a frame."""
    data = pickle.dumps(np.int64(1))
    column = vineyard.ObjectMeta({"typename": "vineyard::PickleBuffer", "size_": len(data)})
    column.add_member("buffer_", _member(client, data))
    meta = vineyard.ObjectMeta({"typename": "vineyard::DataFrame", "__values_-size": 1, "columns_": '["n"]',
                                "__values_-key-0": '"n"'})
    meta.add_member("__values_-value-0", column)
    with pytest.raises(ValueError, match="column 0 is a vineyard::PickleBuffer holding a int64, not an array"):
        client.get(client.create_metadata(meta).id)


def test_upstream_record_batch_with_a_pickled_column(client) -> None:
    """Upstream pickles a column it has no layout for (a struct); ours reads
    it, and a pickle of something else than an array is a clear error."""
    column = pa.array([{"x": 1}, {"x": 2}])
    schema = pa.schema([("s", column.type)])

    def batch(value: object) -> vineyard.ObjectID:
        data = pickle.dumps(value)
        pickled = vineyard.ObjectMeta({"typename": "vineyard::PickleBuffer", "size_": len(data)})
        pickled.add_member("buffer_", _member(client, data))
        proxy = vineyard.ObjectMeta({"typename": "vineyard::SchemaProxy",
                                     "schema_binary_": json.dumps({"bytes": list(schema.serialize().to_pybytes())})})
        meta = vineyard.ObjectMeta({"typename": "vineyard::RecordBatch", "row_num_": 2, "column_num_": 1,
                                    "__columns_-size": 1})
        meta.add_member("schema_", proxy)
        meta.add_member("__columns_-0", pickled)
        return client.create_metadata(meta).id

    assert client.get(batch(column)).to_pydict() == {"s": [{"x": 1}, {"x": 2}]}
    with pytest.raises(ValueError, match="a pickled dict where an Arrow array was expected"):
        client.get(batch({"x": 1}))


def test_our_string_column_is_upstreams_string_tensor(client) -> None:
    """A string column is upstream's vineyard::Tensor<std::string> (its reader
    takes it); ours reads kind_ and gives the same dtype back, zero-copy."""
    pd = pytest.importorskip("pandas")
    series = pd.Series(["a", None, "ccc"], dtype=pd.StringDtype("pyarrow"), name="s")
    value = client.get_meta(client.put(series))["value_"]
    assert value.typename == "vineyard::Tensor<std::string>" and value["value_type_"] == "string"
    assert value["kind_"] == "string" and value["buffer_"]["format_"] in ("u", "U")
    got = client.get(client.put(series))
    pd.testing.assert_series_equal(got, series)


def test_sparse_column_is_upstreams_layout(client) -> None:
    """A sparse column is upstream's vineyard::SparseArray (positions and
    values); an sp_index kind other than upstream's IntIndex is an error."""
    pd = pytest.importorskip("pandas")
    series = pd.Series(pd.arrays.SparseArray([0, 0, 3, 0, 5], fill_value=0), name="x")
    meta = client.get_meta(client.put(series))
    value = meta["value_"]
    assert value.typename == "vineyard::SparseArray<Sparse[int64, 0]>" and value["sp_index_name"] == "IntIndex"
    assert client.get(value["sp_index"].id).tolist() == [2, 4]
    pd.testing.assert_series_equal(client.get(meta.id), series)

    bad = vineyard.ObjectMeta({k: value[k] for k in ("typename", "value_type_", "sp_index_size")})
    bad["sp_index_name"] = "BlockIndex"
    bad.add_member("sp_index", value["sp_index"].id)
    bad.add_member("sp_values", value["sp_values"].id)
    frame = vineyard.ObjectMeta({"typename": "vineyard::Series", "name": "null"})
    frame.add_member("index_", meta["index_"].id)
    frame.add_member("value_", bad)
    with pytest.raises(ValueError, match="is not IntIndex"):
        client.get(client.create_metadata(frame).id)
