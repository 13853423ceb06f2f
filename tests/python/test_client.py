"""The Python package against the real daemon and libv6d.so."""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import vineyard
from vineyard import ObjectID

DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
          "float32", "float64", "complex64", "complex128", "bool", "datetime64[ns]", "timedelta64[us]"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_roundtrip_every_dtype(client, dtype):
    a = (np.arange(24) % 7).astype(dtype).reshape(2, 3, 4)
    b = client.get(client.put(a))
    assert b.dtype == a.dtype and b.shape == a.shape
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("make", [lambda: np.array(3.5), lambda: np.zeros((0, 3)),
                                  lambda: np.asfortranarray(np.arange(12.0).reshape(3, 4)),
                                  lambda: np.arange(20)[::3]])
def test_numpy_shapes_and_orders(client, make):
    a = make()
    b = client.get(client.put(a))
    np.testing.assert_array_equal(a, b)
    assert b.shape == a.shape
    if a.flags.f_contiguous and not a.flags.c_contiguous:
        assert b.flags.f_contiguous


def test_numpy_get_is_zero_copy_and_read_only(client):
    a = np.arange(1 << 16, dtype=np.int64)
    oid = client.put(a)
    b = client.get(oid)
    meta = client.get_meta(oid)
    blob = client.get_blob(meta["buffer_"].id)
    assert b.ctypes.data == blob.address
    assert not b.flags.writeable
    with pytest.raises(ValueError):
        b[0] = 1


@pytest.mark.parametrize("value", [0, -5, 1 << 40, 2.5, "text", True, False, None, [1, [2, 3]], (1, "a"),
                                   {"k": [1, 2]}, b"raw bytes", bytearray(b"xy")])
def test_python_values_roundtrip(client, value):
    got = client.get(client.put(value))
    if isinstance(value, (bytes, bytearray)):
        assert bytes(got) == bytes(value)
    else:
        assert got == value and type(got) is type(value)


def test_nested_arrays_in_dicts_stay_zero_copy(client):
    d = {"x": np.arange(1000.0), "y": {"z": np.ones((10, 10))}}
    got = client.get(client.put(d))
    np.testing.assert_array_equal(got["x"], d["x"])
    assert not got["x"].flags.writeable


def test_object_id_api():
    oid = ObjectID("o000000000000002a")
    assert int(oid) == 42 and repr(oid) == "o000000000000002a" and hash(oid) == 42
    assert pickle.loads(pickle.dumps(oid)) == oid
    assert ObjectID(1 << 63).is_blob


@pytest.mark.parametrize("value", [0, 42, (1 << 63) | 0xABC, (1 << 64) - 2])
def test_object_id_parses_every_printed_form(value):
    oid = ObjectID(value)
    assert str(oid) == f'ObjectID <"o{value:016x}">'  # upstream's str, unchanged
    for text in (str(oid), repr(oid), str(value), f"o{value:x}", repr(oid).upper().replace("O", "o", 1)):
        assert ObjectID(text) == oid, text


@pytest.mark.parametrize("text", ["hello", "", "o", "oxyz", "0x2a", "-5", 'ObjectID <"hello">',
                                  "o" + "1" * 17, 'ObjectID <"o2a"', "\u0663"])
def test_object_id_rejects_malformed_text_naming_the_forms(text):
    with pytest.raises(ValueError) as e:
        ObjectID(text)
    message = str(e.value)
    assert repr(text) in message and "hex digits" in message and "ObjectID <" in message and "decimal" in message


def test_object_id_out_of_range():
    with pytest.raises(ValueError, match="out of range"):
        ObjectID(str(1 << 64))


def test_names_and_errors(client):
    oid = client.put(np.arange(3))
    with pytest.raises(vineyard.InvalidException):
        client.put_name(oid, "py-name")
    client.persist(oid)
    client.put_name(oid, "py-name")
    assert client.get_name("py-name") == oid
    np.testing.assert_array_equal(client.get(name="py-name"), np.arange(3))
    assert client.list_names("py-*")["py-name"] == oid
    client.drop_name("py-name")
    with pytest.raises(vineyard.ObjectNotExistsException):
        client.get_name("py-name")
    with pytest.raises(vineyard.ObjectNotExistsException):
        client.get(ObjectID(12345))
    with pytest.raises(vineyard.NotEnoughMemoryException):
        client.create_blob(1 << 40)
    with pytest.raises(ConnectionError, match="/nonexistent"):
        vineyard.connect("/nonexistent/v.sock")


def test_delete_while_viewed_keeps_view_intact(client, vineyard_socket):
    a = np.full(1 << 20, 7, dtype=np.uint8)
    oid = client.put(a)
    view = client.get(oid)
    other = vineyard.connect(vineyard_socket)
    other.delete(oid)
    assert not other.exists(oid)
    for _ in range(4):
        other.put(np.full(1 << 20, 9, dtype=np.uint8))
    assert (view == 7).all()


def test_delete_more_ids_than_a_request_takes(client, vineyard_socket):
    """A delete of 70,000 ids (a request takes 65,536) deletes them all,
    and the memory goes while another process's got values keep theirs."""
    base = client.status.memory_usage
    ids = [client.put(np.full(1, i, dtype=np.int64)) for i in range(70_000)]
    other = vineyard.connect(vineyard_socket)
    kept = other.get(ids[-1])
    client.delete(ids)
    assert not client.exists(ids[0]) and not client.exists(ids[-1])
    assert int(kept[0]) == 69_999
    del kept
    other.close()
    for _ in range(100):
        if client.status.memory_usage == base:
            break
        time.sleep(0.01)
    assert client.status.memory_usage == base


def test_put_and_get_a_list_longer_than_a_request(client, vineyard_socket):
    """A list of 70,000 arrays (more blobs than one request carries, a tree
    of 7 MB) is put and got whole, in time linear in its length (its tree
    was compiled for nothing and its members checked in quadratic time)."""
    value = [np.arange(3) + i for i in range(70_000)]
    oid = client.put(value)
    got = vineyard.connect(vineyard_socket).get(oid)
    assert len(got) == len(value)
    assert all(int(g[0]) == i for i, g in enumerate(got))
    # Its blobs are not published one by one: get_blobs of them all takes
    # round trips, of at most 65,536 ids each.
    meta = client.get_meta(oid)
    bids = [meta[f"__elements_-{i}"]["buffer_"].id for i in range(len(value))]
    blobs = client.get_blobs(bids)
    assert len(blobs) == len(value) and bytes(memoryview(blobs[-1]))[:8] == np.int64(69_999).tobytes()
    del blobs
    client.delete(oid)


def _worker(sock: str, oid: int, q) -> None:
    import vineyard as v

    arr = v.connect(sock).get(oid)
    q.put(int(arr.sum(dtype=np.uint64)))


def test_spawn_workers_get_large_array(client, vineyard_socket):
    a = np.arange(256 << 20, dtype=np.uint8)  # 256 MiB
    oid = client.put(a)
    want = int(a.sum(dtype=np.uint64))
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(vineyard_socket, int(oid), q)) for _ in range(4)]
    for p in procs:
        p.start()
    got = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert got == [want] * 4
    client.delete(oid)


def _run(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ), check=False)


def test_forked_child_gets_clear_error_fast(vineyard_socket):
    r = _run(f"""
        import os, sys, numpy as np, vineyard
        c = vineyard.connect({vineyard_socket!r})
        oid = c.put(np.arange(3))
        pid = os.fork()
        if pid == 0:
            try:
                c.get_meta(oid)  # a get works in a child (test_fork_read.py); the rest does not
            except vineyard.ForkError as e:
                os._exit(0 if "spawn" in str(e) else 3)
            os._exit(4)
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))
    """, timeout=30)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("sentinel", [True, False], ids=["wipe-on-fork page", "getpid"])
def test_fork_without_python_hooks_gets_clear_error(vineyard_socket, sentinel):
    # libc's fork() straight through ctypes: Python's at-fork hooks do not
    # run, so only the check itself can tell the child from its parent.
    r = _run(f"""
        import ctypes, os, sys, numpy as np, vineyard
        from vineyard import _ffi
        c = vineyard.connect({vineyard_socket!r})
        oid = c.put(np.arange(3))
        assert (_ffi._sentinel is not None) is True, "no MADV_WIPEONFORK page on this kernel"
        if not {sentinel!r}:
            _ffi._sentinel = None  # the fallback: compare process ids
        assert c.get(oid)[2] == 2
        pid = ctypes.CDLL(None).fork()
        if pid == 0:
            try:
                try:
                    if c.get(oid)[2] != 2:  # libv6d's reader for forked children, no Go
                        os._exit(5)
                except vineyard.VineyardException as e:  # a client without the directory (V6D_ACCEL=none)
                    if isinstance(e, vineyard.ForkError) or "spawn" not in str(e):
                        os._exit(6)
                c.get_meta(oid)
            except vineyard.ForkError:
                os._exit(0)
            except BaseException:
                os._exit(3)
            os._exit(4)
        _, status = os.waitpid(pid, 0)
        assert c.get(oid)[1] == 1  # the parent goes on
        sys.exit(os.waitstatus_to_exitcode(status))
    """, timeout=30)
    assert r.returncode == 0, r.stderr


def _held(client):
    """Memory of blobs and leases (a new blob lies in its client's lease
    until the client names it to the daemon)."""
    st = client.status
    return st.memory_usage + st.memory_leased


def test_killed_client_releases_memory(client, vineyard_socket):
    base = _held(client)
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time, vineyard
        c = vineyard.connect({vineyard_socket!r})
        b = c.create_blob(8 << 20)
        print("ready", flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    assert _held(client) >= base + (8 << 20)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while _held(client) != base:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_exit_with_live_views_does_not_crash(vineyard_socket):
    r = _run(f"""
        import numpy as np, vineyard
        c = vineyard.connect({vineyard_socket!r})
        views = [c.get(c.put(np.arange(100))) for _ in range(10)]
        c.close()
        assert views[0][5] == 5
    """)
    assert r.returncode == 0, r.stderr


def test_threads_share_one_client(client):
    import threading

    errors = []

    def work(k: int) -> None:
        try:
            for i in range(30):
                a = np.full(100, k * 1000 + i)
                assert (client.get(client.put(a)) == a).all()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_python_m_vineyard_help():
    r = subprocess.run([sys.executable, "-m", "vineyard", "--help"], capture_output=True, text=True, timeout=30, check=False)
    assert r.returncode == 0 and "-socket" in r.stderr + r.stdout


@pytest.mark.parametrize("value", [np.ones(1 << 17), b"x" * (1 << 20), {"a": np.ones(1 << 17)}])
def test_put_then_delete_frees_memory(client, value):
    """A put keeps no reference: deleting what it stored frees the memory
    (after the client's deferred releases reach the daemon)."""
    base = client.status.memory_usage
    for _ in range(5):
        client.delete(client.put(value))
    assert client.status.memory_usage == base


@pytest.mark.parametrize("value", [
    [np.arange(i) for i in range(40)],  # many small arrays: sent with the tree
    [np.ones(1 << 16) for _ in range(8)],  # small arrays over the inline limit in all: blobs
    {"big": np.ones(1 << 20), "small": np.arange(10), "bytes": b"x" * 100},  # both kinds in one tree
    (b"", np.zeros(0), "s", 1.5),
])
def test_put_small_and_large_members_together(client, value):
    got = client.get(client.put(value))
    items = list(value.values()) if isinstance(value, dict) else list(value)
    got_items = [got[k] for k in value] if isinstance(value, dict) else list(got)
    for a, b in zip(items, got_items):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
        elif isinstance(a, bytes):
            assert bytes(b) == a
        else:
            assert a == b


def test_small_put_is_one_round_trip_and_keeps_nothing(client):
    """A small put goes in one round trip with its data (v6d_put_inline)
    and leaves no reference behind: deleting it frees the memory."""
    base = client.status.memory_usage
    oid = client.put(np.arange(100))
    assert client.status.memory_usage > base
    np.testing.assert_array_equal(client.get(oid), np.arange(100))
    client.delete(oid)
    assert client.status.memory_usage == base


def test_a_client_whose_daemon_died_is_disconnected_and_never_answers_from_its_cache(private_daemon):
    proc, sock = private_daemon
    client = vineyard.connect(sock)
    oid = client.put(np.arange(1000))
    assert client.get(oid)[999] == 999 and client.get_meta(oid).typename.startswith("vineyard::Tensor")
    assert client.connected
    proc.kill()
    proc.wait()
    # The calls first: asking client.connected would itself tell libv6d's cache.
    for call in (lambda: client.get(oid), lambda: client.get_meta(oid), lambda: client.get_object(oid),
                 lambda: client.put(np.arange(3)), lambda: client.exists(oid), lambda: client.create_blob(8),
                 lambda: client.get_blob(client.get_meta(oid)["buffer_"].id), lambda: client.list_names(),
                 lambda: client.status, lambda: client.delete(oid)):
        with pytest.raises(ConnectionError):
            call()
    assert not client.connected
    client.close()
    assert not client.connected


def test_help_of_put_and_get_documents_types_keywords_and_rules():
    put, get = vineyard.Client.put.__doc__ or "", vineyard.Client.get.__doc__ or ""
    for word in ("numpy.ndarray", "pandas.DataFrame", "pyarrow", "torch.Tensor", "bytes", "pickle",
                 "``persist``", "``name``", "immutable", "register_builder"):
        assert word in put, word
    for word in ("``name``", "Zero-copy", "read-only", "pinned", "ObjectNotExistsException", "ConnectionError",
                 "ignored", "register_resolver"):
        assert word in get, word
    assert "Client.put" in (vineyard.put.__doc__ or "") and "Client.get" in (vineyard.get.__doc__ or "")


def test_a_sealed_blob_builder_cannot_be_written(client, vineyard_socket):
    b = client.create_blob(4)
    view = b.memoryview()
    view[:] = b"abcd"
    bid = b.seal()
    with pytest.raises(ValueError):
        view[0] = 0x7A  # the view handed out was released by seal
    with pytest.raises(ValueError, match="sealed"):
        b.copy(0, b"z")
    with pytest.raises(ValueError, match="sealed"):
        b.memoryview()
    with vineyard.connect(vineyard_socket) as other:
        assert bytes(other.get_blob(bid)) == b"abcd"


def test_seal_refuses_while_a_buffer_of_the_builder_is_alive(client, vineyard_socket):
    b = client.create_blob(8)
    view = b.memoryview()
    view[:] = b"\x07" * 8
    held = pickle.PickleBuffer(view)  # holds a buffer export of the view
    with pytest.raises(BufferError, match="still alive"):
        b.seal()
    assert not b.issealed
    held.release()
    bid = b.seal()
    with pytest.raises(ValueError):
        view[0] = 0
    with vineyard.connect(vineyard_socket) as other:
        assert bytes(other.get_blob(bid)) == b"\x07" * 8


def test_creating_a_tree_seals_its_builders_and_revokes_their_views(client):
    b = client.create_blob(8)
    view = b.memoryview()
    view[:] = b"12345678"
    meta = vineyard.ObjectMeta({"typename": "my::Thing"})
    meta.add_member("buffer_", b)
    oid = client.create_metadata(meta).id
    assert b.issealed
    with pytest.raises(ValueError):
        view[0] = 0
    assert bytes(client.get_blob(client.get_meta(oid)["buffer_"].id)) == b"12345678"


def test_timeout_default_set_and_range(vineyard_socket):
    import vineyard
    from vineyard.errors import InvalidException

    with vineyard.connect(vineyard_socket, timeout=12.5) as c:
        assert c.timeout == 12.5
        c.timeout = 0.25
        assert c.timeout == 0.25
        for bad in (0, -1, 2**31):
            with pytest.raises(InvalidException):
                c.timeout = bad
        assert c.timeout == 0.25
    with vineyard.connect(vineyard_socket) as c:
        assert c.timeout == 300


def test_timeout_against_stopped_daemon(tmp_path):
    import signal

    import vineyard
    from vineyard.errors import TimeoutException

    sock = str(tmp_path / "v.sock")
    proc = subprocess.Popen([os.environ["VINEYARDD"], "--socket", sock, "--size", "64Mi", "--norpc"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.02)
        c = vineyard.connect(sock, timeout=0.5)
        oid = c.put(b"abc")
        proc.send_signal(signal.SIGSTOP)
        _wait_stopped(proc.pid)
        # get_meta may be answered from the daemon's directory without a
        # message (a stopped daemon is not a dead one): ask what needs one.
        with pytest.raises(TimeoutException):
            c.exists(oid)
        with pytest.raises(ConnectionError):  # lost: nothing is answered locally any more
            c.get_meta(oid)
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        proc.wait()


def _wait_stopped(pid):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        states = []
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/stat") as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        if all(s in "tT" for s in states):
            return
        time.sleep(0.01)
    raise AssertionError("daemon did not stop")
