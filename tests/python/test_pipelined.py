"""Pipelined puts (docs/design.md, "Pipelined puts"): a small put returns
without waiting for the daemon, and another process that learns the id at
once still finds the object. Real daemon, real libv6d.so, processes of their
own."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zlib

import numpy as np
import pytest
import vineyard

_READER = textwrap.dedent("""
    import sys, zlib
    import vineyard
    c = vineyard.connect(sys.argv[1])
    bad = got = 0
    for line in sys.stdin:
        oid, crc = (int(x) for x in line.split())
        arr = c.get(oid)  # no ObjectNotExists tolerated: the put returned before the id came
        got += 1
        bad += zlib.crc32(arr.tobytes()) != crc
        del arr
    print(got, bad, flush=True)
""")


def _value(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 255, n, dtype=np.uint8)


def test_another_process_finds_each_put_as_soon_as_it_returns(vineyard_socket):
    readers = [subprocess.Popen([sys.executable, "-c", _READER, vineyard_socket], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True) for _ in range(2)]
    n = 500
    try:
        with vineyard.connect(vineyard_socket) as writer:
            for i in range(n):
                value = _value(i, 1 + (i * 977) % (64 << 10))
                line = f"{int(writer.put(value))} {zlib.crc32(value.tobytes())}\n"
                for r in readers:
                    assert r.stdin is not None
                    r.stdin.write(line)
                    r.stdin.flush()
    finally:
        for r in readers:
            assert r.stdin is not None
            r.stdin.close()
    for r in readers:
        assert r.stdout is not None
        assert r.stdout.readline().split() == [str(n), "0"]
        assert r.wait(60) == 0


_KILLED_WRITER = textwrap.dedent("""
    import os, signal, sys
    import numpy as np
    import vineyard
    c = vineyard.connect(sys.argv[1])
    ids = [int(c.put(np.full(100 + i, i % 251, dtype=np.uint8))) for i in range(200)]
    print(" ".join(map(str, ids)), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # right after the puts returned
""")


def test_puts_of_a_process_killed_right_after_them_are_all_stored(vineyard_socket):
    writer = subprocess.run([sys.executable, "-c", _KILLED_WRITER, vineyard_socket], check=False, capture_output=True,
                            text=True, timeout=120)
    assert writer.returncode == -9, writer.stderr
    ids = [int(x) for x in writer.stdout.split()]
    assert len(ids) == 200
    with vineyard.connect(vineyard_socket) as c:
        for i, oid in enumerate(ids):
            got = c.get(oid)
            assert got.shape == (100 + i,) and (got == i % 251).all()
            del got


def test_after_the_daemon_died_neither_a_put_nor_a_carved_buffer_succeeds(private_daemon):
    # A small put leaves the client a lease: a buffer carved from it asks the
    # daemon nothing, and must still fail once the daemon is gone.
    proc, sock = private_daemon
    client = vineyard.connect(sock)
    client.get(client.put(np.arange(3)))
    proc.kill()
    proc.wait()
    with pytest.raises(ConnectionError):
        client.create_blob(8)
    with pytest.raises(ConnectionError):
        client.put(np.arange(3))
    client.close()


def _own_values() -> list:
    """Small values of every kind the Python put sends in one pipelined put."""
    rng = np.random.default_rng(7)
    return [
        np.arange(10, dtype=np.int64),
        np.float32(3.5) * np.ones((3, 4), dtype=np.float32),
        np.asfortranarray(rng.random((5, 7))),
        np.array(42, dtype=np.int16),
        np.array([True, False, True]),
        rng.integers(0, 255, 64 << 10, dtype=np.uint8),
        np.zeros((2, 3, 4), dtype=np.complex64),
        np.array([1.5, -2.0], dtype=">f8"),
    ]


def test_a_get_of_ones_own_put_is_the_daemons(vineyard_socket):
    """A get right after the put is answered from the put (client/ownput.go) before the
    daemon read it, most of the time: value and metadata are the daemon's, as another
    connection sees them once the put is in."""
    with vineyard.connect(vineyard_socket) as writer, vineyard.connect(vineyard_socket) as other:
        for round_ in range(20):
            for value in _own_values():
                oid = writer.put(value)
                own_meta = writer.get_meta(oid).to_json()
                got = writer.get(oid)
                assert got.dtype == value.dtype and got.shape == value.shape
                np.testing.assert_array_equal(got, value)
                assert got.flags.f_contiguous == value.flags.f_contiguous or value.ndim < 2
                del got
                assert own_meta == other.get_meta(oid).to_json(), f"round {round_}: {value.dtype} {value.shape}"
                writer.delete([oid])
