"""vineyard.io file I/O: Parquet, CSV, ORC and JSON lines read into a
RecordBatchStream (read by another connection and another process while it
is written) or a stored table, and written back from either; fsspec URLs;
``python -m vineyard.io``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.orc as paorc
import pyarrow.parquet as pq
import pytest
import vineyard
import vineyard.io
from vineyard.io import RecordBatchStream

FORMATS = ["parquet", "csv", "orc", "json"]
EXT = {"parquet": "parquet", "csv": "csv", "orc": "orc", "json": "jsonl"}


def table(rows: int = 5000) -> pa.Table:
    return pa.table({"i": pa.array(range(rows), pa.int64()), "x": pa.array([i / 4 for i in range(rows)]),
                     "s": pa.array([f"r{i}" for i in range(rows)])})


def save(t: pa.Table, path: Path, fmt: str) -> None:
    if fmt == "parquet":
        pq.write_table(t, path, row_group_size=1000)
    elif fmt == "csv":
        pacsv.write_csv(t, path)
    elif fmt == "orc":
        paorc.write_table(t, path)
    else:
        path.write_text(t.to_pandas().to_json(orient="records", lines=True))


def load(path: Path, fmt: str) -> pa.Table:
    if fmt == "parquet":
        return pq.read_table(path)
    if fmt == "csv":
        return pacsv.read_csv(path)
    if fmt == "orc":
        return paorc.read_table(path)
    import pyarrow.json as pajson

    return pajson.read_json(path)


def same(a: pa.Table, b: pa.Table) -> None:
    assert a.select(["i", "x", "s"]).to_pylist() == b.select(["i", "x", "s"]).to_pylist()


@pytest.mark.parametrize("fmt", FORMATS)
def test_read_stream_and_table_then_write_back(client: Any, tmp_path: Path, fmt: str) -> None:
    src = tmp_path / f"in.{EXT[fmt]}"
    t = table()
    save(t, src, fmt)

    stream = vineyard.io.read(str(src), client=client, batch_size=700, capacity=2)
    assert isinstance(stream, RecordBatchStream) and stream.params["format"] == fmt
    reader = client.fork()
    got = reader.get(stream.id).open_reader(reader).read_table()
    same(got, t)

    oid = vineyard.io.read(str(src), client=client, accumulate=True)
    same(client.get(oid), t)

    out = tmp_path / f"out.{EXT[fmt]}"
    vineyard.io.write(str(out), oid, client=client)
    same(load(out, fmt), t)

    stream = vineyard.io.read(str(src), client=client)
    out2 = tmp_path / f"out2.{EXT[fmt]}"
    vineyard.io.write(str(out2), stream.id, client=client.fork())
    same(load(out2, fmt), t)


def test_chunk_hook_bad_input_and_failure(client: Any, tmp_path: Path) -> None:
    src = tmp_path / "in.parquet"
    save(table(100), src, "parquet")
    stream = vineyard.io.read(str(src), client=client, chunk_hook=lambda b: b.select(["s", "i"]))
    got = stream.open_reader(client.fork()).read_table()
    assert got.column_names == ["s", "i"]
    with pytest.raises(ValueError, match="format"):
        vineyard.io.read(str(tmp_path / "in.xyz"), client=client)
    with pytest.raises(ValueError, match="unknown format"):
        vineyard.io.read(str(src), client=client, format="xls")
    with pytest.raises(FileNotFoundError):
        vineyard.io.read(str(tmp_path / "missing.parquet"), client=client)

    # A reading error fails the stream: its reader and write() raise.
    def boom(b: pa.RecordBatch) -> pa.RecordBatch:
        raise RuntimeError("bad batch")

    handlers: list[Any] = []
    stream = vineyard.io.read(str(src), client=client, chunk_hook=boom, handlers=handlers)
    handlers[0].join()
    with pytest.raises(vineyard.StreamFailedException):
        vineyard.io.write(str(tmp_path / "o.parquet"), stream, client=client.fork())


def test_fsspec_url(client: Any) -> None:
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    t = table(300)
    with fs.open("/v6d/in.parquet", "wb") as f:
        pq.write_table(t, f)
    stream = vineyard.io.read("memory:///v6d/in.parquet", client=client)
    same(stream.open_reader(client.fork()).read_table(), t)
    vineyard.io.write("memory:///v6d/out.csv", vineyard.io.read("memory:///v6d/in.parquet", client=client,
                                                                 accumulate=True), client=client)
    with fs.open("/v6d/out.csv", "rb") as f:
        same(pacsv.read_csv(f), t)


def test_command_line(client: Any, vineyard_socket: str, tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    t = table(200)
    save(t, src, "csv")
    py = [sys.executable, "-m", "vineyard.io"]
    r = subprocess.run([*py, "read", str(src), "--socket", vineyard_socket, "--name", "io-cli-table"],
                       capture_output=True, text=True, timeout=120, check=True)
    oid = vineyard.ObjectID(r.stdout.strip())
    assert client.get_name("io-cli-table") == oid
    same(client.get(oid), t)
    out = tmp_path / "out.parquet"
    subprocess.run([*py, "write", repr(oid), str(out), "--socket", vineyard_socket], check=True, timeout=120)
    same(pq.read_table(out), t)

    # --stream: the id comes first, the file is written as this process reads.
    p = subprocess.Popen([*py, "read", str(src), "--socket", vineyard_socket, "--stream"], stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout is not None
    sid = vineyard.ObjectID(p.stdout.readline().strip())
    same(client.get(sid).open_reader(client).read_table(), t)
    assert p.wait(timeout=120) == 0


def test_open_as_upstream(client: Any, tmp_path: Path) -> None:
    src, out = tmp_path / "a.parquet", tmp_path / "b.jsonl"
    t = table(50)
    save(t, src, "parquet")
    stream = vineyard.io.open(str(src), mode="r", client=client)
    vineyard.io.open(str(out), stream, mode="w", client=client.fork())
    same(load(out, "json"), t)
    with pytest.raises(ValueError, match="mode"):
        vineyard.io.open(str(src), mode="x")
