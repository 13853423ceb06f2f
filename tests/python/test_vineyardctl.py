"""vineyardctl against a real daemon, both ways with the Python client: what
Python puts, vineyardctl gets into .npy / .parquet / raw files equal to it;
what vineyardctl puts, Python gets back equal."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from vineyard._ctl import ctl_path


def text(oid) -> str:
    """The "o%016x" form vineyardctl takes and prints."""
    return f"o{int(oid):016x}"


def ctl(sock: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([ctl_path(), "--socket", sock, *args], capture_output=True, text=True, timeout=60, check=False)
    if check and r.returncode != 0:
        raise AssertionError(f"vineyardctl {args}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    return r


@pytest.mark.parametrize("arr", [
    np.arange(24, dtype="float32").reshape(2, 3, 4),
    np.asfortranarray(np.arange(12, dtype="int64").reshape(3, 4)),
    np.array([True, False, True]),
    np.arange(10, dtype="uint8")[::2],  # strided: put copies it into C order
    np.array([1.5 + 2j, -1j], dtype="complex128"),
    np.zeros((0, 3), dtype="float64"),
], ids=["f32-3d", "i64-fortran", "bool", "u8-strided", "c128", "empty"])
def test_get_npy_of_python_put(client, vineyard_socket, tmp_path, arr):
    oid = client.put(arr)
    out = tmp_path / "a.npy"
    ctl(vineyard_socket, "get", text(oid), "-o", str(out))
    back = np.load(out)
    assert back.dtype == arr.dtype and back.shape == arr.shape
    np.testing.assert_array_equal(back, arr)


@pytest.mark.parametrize("fortran", [False, True])
def test_python_get_of_ctl_put(client, vineyard_socket, tmp_path, fortran):
    arr = np.arange(20, dtype="<f8").reshape(4, 5)
    if fortran:
        arr = np.asfortranarray(arr)
    np.save(tmp_path / "a.npy", arr)
    r = ctl(vineyard_socket, "put", str(tmp_path / "a.npy"), "-o", "json")
    put = json.loads(r.stdout)
    assert put["typename"] == "vineyard::Tensor<double>"
    back = client.get(put["id"])
    np.testing.assert_array_equal(back, arr)
    assert back.flags.f_contiguous == fortran or back.ndim < 2


def test_raw_both_ways(client, vineyard_socket, tmp_path):
    data = os.urandom(1 << 20)
    (tmp_path / "in").write_bytes(data)
    oid = ctl(vineyard_socket, "put", str(tmp_path / "in")).stdout.strip()
    assert bytes(client.get(oid)) == data
    ctl(vineyard_socket, "get", oid, "-o", str(tmp_path / "out"))
    assert (tmp_path / "out").read_bytes() == data


def test_parquet_of_dataframe_and_table(client, vineyard_socket, tmp_path):
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    df = pd.DataFrame({"a": np.arange(5, dtype="int64"), "b": np.linspace(0, 1, 5),
                       "c": np.array([True, False, True, True, False]), "d": np.arange(5, dtype="uint16")})
    oid = client.put(df)
    ctl(vineyard_socket, "get", text(oid), "-o", str(tmp_path / "df.parquet"))
    back = pd.read_parquet(tmp_path / "df.parquet")
    pd.testing.assert_frame_equal(back, df)

    table = pa.table({"x": pa.array([1, None, 3], pa.int32()), "s": ["a", None, "ccc"],
                      "f": pa.array([0.5, 1.5, None], pa.float64()), "b": [True, None, False]})
    tid = client.put(table)
    ctl(vineyard_socket, "get", text(tid), "-o", str(tmp_path / "t.parquet"))
    assert pq.read_table(tmp_path / "t.parquet").equals(table)

    # A table of several batches is concatenated.
    batches = pa.Table.from_batches([pa.record_batch({"x": [1, 2]}), pa.record_batch({"x": [3]})])
    bid = client.put(batches)
    ctl(vineyard_socket, "get", text(bid), "-o", str(tmp_path / "b.parquet"))
    assert pq.read_table(tmp_path / "b.parquet").column("x").to_pylist() == [1, 2, 3]


def test_ls_inspect_status_json(client, vineyard_socket):
    oid = client.put(np.arange(3))
    client.persist(oid)
    client.put_name(oid, "ctl-test-array")
    objs = json.loads(ctl(vineyard_socket, "ls", "-o", "json", "ctl-test-*").stdout)
    assert [o["id"] for o in objs] == [text(oid)] and objs[0]["names"] == ["ctl-test-array"]
    info = json.loads(ctl(vineyard_socket, "inspect", "ctl-test-array", "-o", "json").stdout)
    assert info["id"] == text(oid) and info["blob_bytes"] == 24 and all(b["local"] for b in info["blobs"])
    st = json.loads(ctl(vineyard_socket, "status", "-o", "json").stdout)
    assert st["instance"]["memory_limit"] > 0
    r = ctl(vineyard_socket, "get", "no-such-name", "-o", "/dev/null", check=False)
    assert r.returncode == 4, r


def test_console_script_runs_the_binary(vineyard_socket):
    r = subprocess.run([sys.executable, "-m", "vineyard._ctl", "--socket", vineyard_socket, "version"],
                       capture_output=True, text=True, timeout=60, check=True)
    assert r.stdout.startswith("vineyardctl ") and "vineyardd " in r.stdout
