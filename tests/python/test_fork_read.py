"""Gets in a forked child: a process that connected, then forked, gets
published objects in the child zero-copy and without Go (libv6d's
v6d_forked_get), pinned in the parent's pin page; every other call there
still raises ForkError naming spawn. Each scenario runs in a fresh
interpreter (subprocess) that forks, so a hang fails by the timeout."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(180)

PRELUDE = """
import os, sys, time, warnings, pickle
import numpy as np, pandas as pd, vineyard
warnings.simplefilter("ignore", DeprecationWarning)
c = vineyard.connect(SOCKET)

def in_child(fn, *args):
    '''Runs fn(*args) in a forked child; returns what it returned (or raises
    what it raised), through a pipe.'''
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = ("ok", fn(*args))
        except BaseException as e:
            out = ("err", f"{type(e).__name__}: {e}")
        os.write(w, pickle.dumps(out))
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    kind, value = pickle.loads(data)
    if kind == "err":
        raise RuntimeError(value)
    return value
"""


def run(socket: str, code: str, timeout: float = 150) -> None:
    script = (PRELUDE + textwrap.dedent(code)).replace("SOCKET", repr(socket))
    try:
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ), check=False)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"hung: {e.stderr!r}")
    assert r.returncode == 0, r.stderr[-4000:]


def test_child_gets_zero_copy(vineyard_socket):
    run(vineyard_socket, """
        a = np.random.default_rng(0).standard_normal((100, 50))
        df = pd.DataFrame({"x": np.arange(1000.0), "y": np.arange(1000), "z": pd.Categorical(["a", "b"] * 500)})
        ids = c.put(a), c.put(df), c.put({"k": np.arange(5), "s": "text"})
        addr = c.get(ids[0]).ctypes.data  # the parent's view of the same blob

        def child():
            x = c.get(ids[0])
            assert not x.flags.writeable
            g = c.get(ids[1])
            d = c.get(ids[2])
            return x.ctypes.data, x.tobytes() == a.tobytes(), g.equals(df), d["s"], d["k"].tolist()

        got_addr, same, df_same, s, k = in_child(child)
        assert got_addr == addr, "the child's array must be the store's memory, not a copy"
        assert same and df_same and s == "text" and k == [0, 1, 2, 3, 4]
    """)


def test_other_calls_still_raise_fork_error(vineyard_socket):
    run(vineyard_socket, """
        oid = c.put(np.arange(3))

        def child():
            out = []
            for f in (lambda: c.put(np.arange(3)), lambda: c.delete(oid), lambda: c.get_meta(oid),
                      lambda: vineyard.connect(SOCKET)):
                try:
                    f()
                    out.append("no error")
                except vineyard.ForkError as e:
                    out.append("spawn" in str(e))
            return out

        assert in_child(child) == [True] * 4
    """)


def test_missing_object_is_a_clear_error(vineyard_socket):
    run(vineyard_socket, """
        oid = c.put(np.arange(3))
        c.delete(oid)  # deleted before the fork: retired from the directory

        def child():
            try:
                c.get(oid)
            except vineyard.ObjectNotExistsException as e:
                return str(e)
            return "no error"

        msg = in_child(child)
        assert "not in the daemon's directory" in msg and "spawn" in msg, msg
    """)


def test_child_pin_holds_across_a_delete(vineyard_socket):
    # The child pins; the parent deletes and refills the memory; the child's
    # view still reads the stored bytes, and its release lets the memory go.
    run(vineyard_socket, """
        n = 1 << 20
        value = np.arange(n, dtype=np.int64)
        oid = c.put(value)
        go, back = os.pipe(), os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(go[1])                      # a parent that fails ends the child's wait
            x = c.get(oid)
            os.write(back[1], b"g")             # got it
            os.read(go[0], 1)                    # the parent deleted and refilled meanwhile
            ok = np.array_equal(x, value)
            del x                                # the release: the slot is cleared
            os.write(back[1], b"y" if ok else b"n")
            os._exit(0)
        assert os.read(back[0], 1) == b"g"
        c.delete(oid)
        assert c.status.memory_usage >= n * 8, "a delete must not free what a child pinned"
        filler = [c.put(np.full(n, -1, dtype=np.int64)) for _ in range(8)]  # reuse what the delete freed
        used = c.status.memory_usage             # the filler and the deleted object, which the child holds
        os.write(go[1], b"!")
        assert os.read(back[0], 1) == b"y", "the child's view changed under its pin"
        os.waitpid(pid, 0)
        deadline = time.monotonic() + 60
        while c.status.memory_usage > used - n * 8 and time.monotonic() < deadline:
            time.sleep(0.05)                     # the parent's hold is dropped once the slot is clear
        assert c.status.memory_usage <= used - n * 8, "the child's release must free the deleted object's memory"
    """)


def test_dead_children_slots_are_reused(vineyard_socket):
    # multiprocessing's children end with os._exit: no release runs. More
    # such children than there are slots must still get.
    run(vineyard_socket, """
        oid = c.put(np.arange(10))
        for i in range(300):
            pid = os.fork()
            if pid == 0:
                x = c.get(oid)
                os._exit(0 if x.sum() == 45 else 1)  # the pin is never released
            _, st = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(st) == 0, f"child {i} failed"
    """, timeout=170)


def test_pool_with_fork(vineyard_socket):
    run(vineyard_socket, """
        import multiprocessing as mp
        ids = [c.put(np.full(1000, i, dtype=np.int32)) for i in range(20)]

        def work(oid):
            return int(c.get(oid).sum())

        with mp.get_context("fork").Pool(2) as pool:
            assert pool.map(work, ids) == [1000 * i for i in range(20)]
    """)


def test_closed_parent_connection_refuses_child_gets(vineyard_socket):
    run(vineyard_socket, """
        oid = c.put(np.arange(3))
        go, back = os.pipe(), os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(go[1])                       # a parent that fails ends the child's wait
            assert c.get(oid).tolist() == [0, 1, 2]
            os.write(back[1], b"g")
            os.read(go[0], 1)                     # the parent closed its client
            deadline = time.monotonic() + 60
            msg = "no error"
            while time.monotonic() < deadline:
                try:
                    c.get(oid)
                except ConnectionError as e:
                    msg = str(e)
                    break
                time.sleep(0.02)
            os.write(back[1], b"y" if "parent's connection" in msg else b"n")
            os._exit(0)
        assert os.read(back[0], 1) == b"g"
        c.close()
        os.write(go[1], b"!")
        assert os.read(back[0], 1) == b"y", "a child must stop reading once its parent's pins no longer hold"
        os.waitpid(pid, 0)
    """)


def test_values_that_need_go_are_a_clear_error(vineyard_socket):
    # Arrow objects are exported by libv6d's Go side: a child gets a
    # ForkError that says so and names the ways out, and the pin of the get
    # is released all the same (the slot is free for the next get).
    run(vineyard_socket, """
        import pyarrow as pa
        oid = c.put(pa.table({"a": [1, 2, 3]}))
        arr = c.put(np.arange(4))

        def child():
            try:
                c.get(oid)
                return "no error"
            except vineyard.ForkError as e:
                msg = str(e)
            return msg, c.get(arr).tolist()

        msg, after = in_child(child)
        assert "Arrow" in msg and "before forking" in msg and "spawn" in msg, msg
        assert after == [0, 1, 2, 3]
    """)


def test_torch_tensor_in_a_child_is_a_clear_error(vineyard_socket):
    pytest.importorskip("torch")
    run(vineyard_socket, """
        import torch
        oid = c.put(torch.arange(6))

        def child():
            try:
                c.get(oid)
                return "no error"
            except vineyard.ForkError as e:
                return str(e)

        msg = in_child(child)
        assert "torch tensor" in msg and "before forking" in msg and "spawn" in msg, msg
    """)
