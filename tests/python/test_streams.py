"""Streams (vineyard.io): producers and consumers in different processes
and on different connections, chunk order and content checked; backpressure;
slow and dead readers and writers (never a hang: StreamFailed); many streams
at once; the Arrow C stream read by pyarrow, polars and duckdb; a TCP
client. Against the real daemon and libv6d."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import vineyard
from vineyard.errors import (
    NotEnoughMemoryException,
    StreamDrainedException,
    StreamFailedException,
    StreamOpenedException,
)
from vineyard.io import ByteStream, DataframeStream, RecordBatchStream


def batch(i: int, rows: int = 100) -> pa.RecordBatch:
    """Batch i: its content names i, so order and content are checked."""
    return pa.record_batch({"i": pa.array(np.full(rows, i, dtype=np.int64)),
                            "x": pa.array(np.arange(rows, dtype=np.float64) + i)})


def run(code: str, *args: Any, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Runs code in a fresh Python process with sys.argv[1:] = args."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], capture_output=True,
                          text=True, timeout=120, check=check)


PRODUCER = """
    import sys
    import numpy as np, pyarrow as pa, vineyard
    sock, sid, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    c = vineyard.connect(sock)
    w = c.get(sid).open_writer(c)
    for i in range(n):
        w.write(pa.record_batch({"i": pa.array(np.full(100, i, dtype=np.int64)),
                                 "x": pa.array(np.arange(100, dtype=np.float64) + i)}))
    if len(sys.argv) > 4:  # die without finishing
        import os
        os._exit(1)
    w.finish()
"""


def test_producer_and_consumer_in_other_processes(client: Any, vineyard_socket: str) -> None:
    stream = RecordBatchStream.new(client, {"source": "test"}, capacity=4)
    producer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(PRODUCER), vineyard_socket,
                                 str(int(stream.id)), "30"])
    got = list(stream.open_reader(client))
    assert producer.wait(timeout=120) == 0
    assert len(got) == 30
    for i, b in enumerate(got):
        assert b.equals(batch(i)), i
    assert client.get(stream.id).params == {"source": "test"}

    # The other way: this process writes, a child reads and checks.
    stream = RecordBatchStream.new(client)
    consumer = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, vineyard
        c = vineyard.connect(sys.argv[1])
        got = [b.column(0)[0].as_py() for b in c.get(int(sys.argv[2])).open_reader(c)]
        assert got == list(range(20)), got
    """), vineyard_socket, str(int(stream.id))])
    with stream.open_writer(client) as writer:
        for i in range(20):
            writer.write(batch(i))
    assert consumer.wait(timeout=120) == 0


def test_upstream_pattern_dataframe_chunks(client: Any) -> None:
    """Upstream's test_recordbatch_stream: forked clients, get(stream.id),
    writer.append(put(DataFrame)), reader.next() until StopIteration."""
    stream = RecordBatchStream.new(client)
    c1, c2 = client.fork(), client.fork()
    s1, s2 = c1.get(stream.id), c2.get(stream.id)
    assert isinstance(s1, RecordBatchStream) and s1.id == stream.id
    frames = [pd.DataFrame({"a": np.arange(3) + i, "b": np.random.random(3)}) for i in range(5)]

    def produce() -> None:
        writer = s2.writer
        for f in frames:
            writer.append(client.put(f))
        writer.finish()

    t = threading.Thread(target=produce)
    t.start()
    reader = s1.reader
    got = []
    while True:
        try:
            got.append(reader.next())
        except StopIteration:
            break
    t.join()
    assert len(got) == len(frames)
    for f, g in zip(frames, got):
        pd.testing.assert_frame_equal(f, g)


def test_byte_stream(client: Any) -> None:
    stream = ByteStream.new(client)
    other = client.fork()
    writer = stream.open_writer(client)
    for i in range(5):
        writer.next(10 + i)[:] = bytes([i]) * (10 + i)
    writer.buffer_size_limit = 4
    writer.write(b"abcdef")
    writer.finish()
    chunks = list(other.get(stream.id).open_reader(other))
    assert [bytes(c) for c in chunks] == [bytes([i]) * (10 + i) for i in range(5)] + [b"abcdef"]
    assert all(c.readonly for c in chunks)
    assert all(client.is_shared_memory(c) for c in chunks if len(c))


def test_dataframe_stream(client: Any) -> None:
    stream = DataframeStream.new(client)
    frames = [pd.DataFrame({"a": np.arange(4) + i, "b": [f"s{i}{j}" for j in range(4)]}) for i in range(3)]
    writer = stream.open_writer(client)
    for f in frames:
        writer.write(f)
    writer.finish()
    other = client.fork()
    got = list(other.get(stream.id).open_reader(other))
    for f, g in zip(frames, got, strict=True):
        pd.testing.assert_frame_equal(f, g)


def test_arrow_c_stream_for_pyarrow_polars_duckdb(client: Any) -> None:
    def make(n: int) -> Any:
        stream = RecordBatchStream.new(client)
        writer_client = client.fork()

        def produce() -> None:
            with stream.open_writer(writer_client) as w:
                for i in range(n):
                    w.write(batch(i))

        t = threading.Thread(target=produce)
        t.start()
        return stream, t

    stream, t = make(6)
    table = pa.RecordBatchReader.from_stream(client.get(stream.id)).read_all()
    t.join()
    assert table.num_rows == 600 and table.column("i").to_pylist() == [i for i in range(6) for _ in range(100)]
    for chunk in table.column("x").chunks:
        assert client.is_shared_memory(chunk.buffers()[1])

    pl = pytest.importorskip("polars")
    stream, t = make(3)
    df = pl.DataFrame(client.fork().get(stream.id))
    t.join()
    assert df.height == 300 and df["i"].to_list()[::100] == [0, 1, 2]

    duckdb = pytest.importorskip("duckdb")
    stream, t = make(4)
    reader_client = client.fork()  # open while the stream is read
    reader = pa.RecordBatchReader.from_stream(reader_client.get(stream.id))  # noqa: F841 (duckdb reads it by name)
    total = duckdb.sql("select sum(i) as s from reader").fetchall()
    t.join()
    assert total == [(sum(range(4)) * 100,)]


def test_failed_stream_in_arrow_c_stream(client: Any) -> None:
    stream = RecordBatchStream.new(client)
    w = stream.open_writer(client.fork())
    w.write(batch(0))
    w.fail()
    reader = pa.RecordBatchReader.from_stream(client.get(stream.id))
    assert reader.read_next_batch().equals(batch(0))
    with pytest.raises(OSError, match="failed"):
        reader.read_next_batch()


def test_backpressure(client: Any) -> None:
    stream = RecordBatchStream.new(client, capacity=2)
    writer = stream.open_writer(client)
    writer.write(batch(0))
    writer.write(batch(1))
    with pytest.raises(NotEnoughMemoryException):
        writer.write(batch(2), timeout=0)
    reader_client = client.fork()
    reader = client.get(stream.id).open_reader(reader_client)
    assert reader.next().equals(batch(0))
    assert reader.next().equals(batch(1))  # gives batch 0 back: room for one
    writer.write(batch(2), timeout=0)
    # A writer ahead waits for a slow reader and goes on when it reads.
    done = threading.Event()

    def produce() -> None:
        for i in range(3, 10):
            writer.write(batch(i))
        writer.finish()
        done.set()

    t = threading.Thread(target=produce)
    t.start()
    got = [b.column(0)[0].as_py() for b in reader]
    t.join()
    assert done.is_set() and got == list(range(2, 10))


def test_dead_writer_fails_readers(client: Any, vineyard_socket: str) -> None:
    stream = RecordBatchStream.new(client)
    run(PRODUCER, vineyard_socket, int(stream.id), 3, "die", check=False)
    reader = stream.open_reader(client)
    assert [reader.next().column(0)[0].as_py() for _ in range(3)] == [0, 1, 2]
    with pytest.raises(StreamFailedException):
        reader.next()
    with pytest.raises(StreamFailedException):
        reader.next()


def test_dead_reader_releases_its_slot(client: Any, vineyard_socket: str) -> None:
    stream = RecordBatchStream.new(client, capacity=2)
    writer = stream.open_writer(client)
    for i in range(2):
        writer.write(batch(i))
    out = run("""
        import sys, os, vineyard
        c = vineyard.connect(sys.argv[1])
        r = c.get(int(sys.argv[2])).open_reader(c)
        print(r.next().column(0)[0].as_py(), flush=True)
        os._exit(0)  # dies holding chunk 0
    """, vineyard_socket, int(stream.id))
    assert out.stdout.strip() == "0"
    writer.write(batch(2), timeout=60)  # chunk 0 was given back: room
    writer.finish()
    reader = client.get(stream.id).open_reader(client.fork())
    assert [b.column(0)[0].as_py() for b in reader] == [1, 2]


def test_reader_limits_and_many_readers(client: Any) -> None:
    stream = RecordBatchStream.new(client)
    stream.open_reader(client)
    with pytest.raises(StreamOpenedException):
        client.fork().open_stream(stream.id, "r")
    with pytest.raises(StreamOpenedException):
        client.open_stream(stream.id, "r")

    stream = RecordBatchStream.new(client, readers=3, capacity=2)
    results: list[list[int]] = [[] for _ in range(3)]

    def consume(k: int) -> None:
        c = client.fork()
        for b in c.get(stream.id).open_reader(c):
            results[k].append(b.column(0)[0].as_py())

    threads = [threading.Thread(target=consume, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    with stream.open_writer(client.fork()) as w:
        for i in range(12):
            w.write(batch(i, 10))
    for t in threads:
        t.join()
    assert results == [list(range(12))] * 3


def test_many_streams_at_once(client: Any) -> None:
    n, chunks = 24, 5
    streams = [RecordBatchStream.new(client, capacity=1) for _ in range(n)]
    errors: list[BaseException] = []
    got: dict[int, list[int]] = {}

    def produce(s: Any) -> None:
        try:
            c = client.fork()
            with s.open_writer(c) as w:
                for i in range(chunks):
                    w.write(batch(i, 5))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    def consume(k: int, s: Any) -> None:
        try:
            c = client.fork()
            got[k] = [b.column(0)[0].as_py() for b in c.get(s.id).open_reader(c)]
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=produce, args=(s,)) for s in streams]
    threads += [threading.Thread(target=consume, args=(k, s)) for k, s in enumerate(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert got == {k: list(range(chunks)) for k in range(n)}


def test_drop_and_errors(client: Any) -> None:
    stream = RecordBatchStream.new(client)
    writer = stream.open_writer(client)
    writer.write(batch(0))
    writer.finish()
    with pytest.raises(vineyard.InvalidStreamStateException):
        writer.finish()
    reader_client = client.fork()
    assert reader_client.next_chunk_id(stream.id)  # pull without opening, as upstream
    with pytest.raises(StreamDrainedException):
        reader_client.next_chunk_id(stream.id)
    stream.drop()
    assert not client.exists(stream.id)
    with pytest.raises(vineyard.ObjectNotExistsException):
        client.open_stream(stream.id, "r")
    with pytest.raises(vineyard.AssertionFailedException):
        client.open_stream(stream.id, "x")


def test_tcp_clients_write_and_read(tmp_path: Any) -> None:
    import socket as so

    from vineyard.deploy import start_vineyardd

    with so.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    with start_vineyardd(size="256Mi", args=["--rpc-socket-port", str(port)]) as sock:
        local = vineyard.connect(sock)
        remote_w, remote_r = vineyard.connect("127.0.0.1", port), vineyard.connect("127.0.0.1", port)
        try:
            for writer_client, reader_client in ((remote_w, local), (local, remote_r), (remote_w, remote_r)):
                stream = RecordBatchStream.new(writer_client, capacity=2)

                def produce(c: Any = writer_client, s: Any = stream) -> None:
                    with s.open_writer(c) as w:
                        for i in range(8):
                            w.write(batch(i))

                t = threading.Thread(target=produce)
                t.start()
                got = list(reader_client.get(stream.id).open_reader(reader_client))
                t.join()
                assert [b.equals(batch(i)) for i, b in enumerate(got)] == [True] * 8

            stream = ByteStream.new(remote_w)
            with stream.open_writer(remote_w) as w:
                w.next(3)[:] = b"xyz"
            assert [bytes(c) for c in remote_r.get(stream.id).open_reader(remote_r)] == [b"xyz"]
        finally:
            for c in (local, remote_w, remote_r):
                c.close()
