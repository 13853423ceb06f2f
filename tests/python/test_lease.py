"""Puts through the connection's lease (docs/design.md, "One round trip for
large puts"): every kind of value whose blobs are written in place comes
back byte for byte in another connection, leased memory is reported apart
from the blobs' and returns when the client closes or is killed."""

import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import vineyard


def _wait(cond, what):
    deadline = time.monotonic() + 10
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _values():
    rng = np.random.default_rng(7)
    frame = pd.DataFrame({f"c{i}": rng.standard_normal(4000) for i in range(40)})  # 40 columns, 1.25 MiB
    table = pa.table({"a": pa.array(rng.integers(0, 1 << 40, 200_000)),
                      "s": pa.array([f"row {i}" for i in range(20_000)] * 10)})
    return {
        "numpy": rng.integers(0, 255, 3 << 20, dtype=np.uint8),  # > 64 KiB: buffers, not inline
        "numpy fortran": np.asfortranarray(rng.standard_normal((300, 200))),
        "frame": frame,
        "table": table,
        "bytes": rng.bytes(200_000),
        "pickled": {"x": rng.standard_normal(50_000), "y": [rng.integers(0, 9, 70_000)]},
    }


def _same(name, got, want):
    if name.startswith("numpy"):
        assert np.array_equal(got, want)
    elif name == "frame":
        pd.testing.assert_frame_equal(got, want)
    elif name == "table":
        assert got.equals(want)
    elif name == "bytes":
        assert bytes(got) == want
    else:
        assert np.array_equal(got["x"], want["x"]) and np.array_equal(got["y"][0], want["y"][0])


@pytest.mark.parametrize("name", list(_values()))
def test_lease_puts_round_trip_bytes(vineyard_socket, name):
    value = _values()[name]
    with vineyard.connect(vineyard_socket) as writer, vineyard.connect(vineyard_socket) as reader:
        ids = [writer.put(value) for _ in range(3)]  # the first leases, the next carves, the third leases again
        assert writer.status.memory_leased > 0
        for oid in ids:
            _same(name, reader.get(oid), value)
        writer.delete(ids)


def test_lease_returns_when_the_client_closes(vineyard_socket):
    with vineyard.connect(vineyard_socket) as watcher:
        base_used, base_leased = watcher.status.memory_usage, watcher.status.memory_leased
        c = vineyard.connect(vineyard_socket)
        oid = c.put(np.ones(1 << 20))
        assert watcher.status.memory_leased > base_leased
        assert watcher.status.memory_usage == base_used + (8 << 20)
        c.close()
        _wait(lambda: watcher.status.memory_leased == base_leased, "the lease was not returned")
        watcher.delete([oid])
        assert watcher.status.memory_usage == base_used


def test_killed_client_loses_only_its_lease(vineyard_socket):
    """A client SIGKILLed holding a lease, with a blob carved from it and
    written but never named: the daemon reclaims the lease (the blob with it)
    and keeps the object the client had put."""
    with vineyard.connect(vineyard_socket) as watcher:
        base_used, base_leased = watcher.status.memory_usage, watcher.status.memory_leased
        proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
            import sys, time, numpy as np, vineyard
            c = vineyard.connect({vineyard_socket!r})
            oid = c.put(np.full(1 << 18, 3, dtype=np.int64))
            b = c.create_blob(1 << 20)
            b.copy(0, b"x" * (1 << 20))
            print(int(oid), flush=True)
            time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
        try:
            oid = vineyard.ObjectID(int(proc.stdout.readline()))
            st = watcher.status
            assert st.memory_leased > base_leased
            assert st.memory_usage == base_used + (2 << 20)  # the put; the blob is still in the lease
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        _wait(lambda: watcher.status.memory_leased == base_leased, "the killed client's lease was not reclaimed")
        assert watcher.status.memory_usage == base_used + (2 << 20)
        assert np.array_equal(watcher.get(oid), np.full(1 << 18, 3, dtype=np.int64))
        watcher.delete([oid])
        assert watcher.status.memory_usage == base_used

