"""vineyard.shared_memory side by side with CPython's
multiprocessing.shared_memory: each scenario runs the same operations against
both and the observations must be equal. Other processes are spawned (a
forked child cannot use libv6d)."""

from __future__ import annotations

import gc
import multiprocessing as mp
import pickle
import uuid
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import shared_memory as cpython
from typing import Any

import numpy as np
import pytest
import vineyard
from vineyard import shared_memory as vshm

SEQUENCE = ("a", b"bb", 1234, 56789.01234, None, True, -7, "\u00e9t\u00e9", b"", 0.0)


class CPython:
    """CPython's classes; freeze does nothing (its blocks are always shared)."""

    kind = "cpython"
    sock = ""

    def shm(self, name: Any = None, create: bool = False, size: int = 0) -> Any:
        return cpython.SharedMemory(name, create, size)

    def sl(self, sequence: Any = None, name: Any = None) -> Any:
        return cpython.ShareableList(sequence, name=name)

    def freeze(self, block: Any) -> None:
        pass


class Vineyard:
    kind = "vineyard"

    def __init__(self, client: Any, sock: str) -> None:
        self.client, self.sock = client, sock

    def shm(self, name: Any = None, create: bool = False, size: int = 0) -> Any:
        return vshm.SharedMemory(self.client, name, create, size)

    def sl(self, sequence: Any = None, name: Any = None) -> Any:
        return vshm.ShareableList(self.client, sequence, name=name)

    def freeze(self, block: Any) -> None:
        block.freeze()


def _outcome(fn: Any) -> Any:
    """What fn() returned, or the builtin class (and message for ValueError)
    of what it raised."""
    try:
        return fn()
    except (FileNotFoundError, FileExistsError, BufferError, IndexError) as e:
        return next(c.__name__ for c in (FileNotFoundError, FileExistsError, BufferError, IndexError)
                    if isinstance(e, c))
    except ValueError as e:
        return f"ValueError: {e}"


# -- what the other process does ------------------------------------------

def _child_attach(kind: str, sock: str, name: str) -> Any:
    def read() -> Any:
        block = vshm.SharedMemory(vineyard.connect(sock), name) if kind == "vineyard" else cpython.SharedMemory(name)
        try:
            return bytes(block.buf), block.size, block.name == name
        finally:
            block.close()
    return _outcome(read)


def _child_unpickle(data: bytes) -> Any:
    block = pickle.loads(data)
    try:
        return bytes(block.buf), block.size, type(block).__module__
    finally:
        block.close()


def _child_list(kind: str, sock: str, name: str) -> Any:
    sl = vshm.ShareableList(vineyard.connect(sock), name=name) if kind == "vineyard" else cpython.ShareableList(name=name)
    try:
        return list(sl), len(sl), sl.format
    finally:
        sl.shm.close()


def _child_unpickle_list(data: bytes) -> Any:
    sl = pickle.loads(data)
    try:
        return list(sl), type(sl).__module__
    finally:
        sl.shm.close()


def _child_create_named(sock: str, name: str) -> None:
    block = vshm.SharedMemory(vineyard.connect(sock), name=name, create=True, size=6)
    block.buf[:] = b"orphan"
    block.close()


# -- fixtures ---------------------------------------------------------------

@pytest.fixture(scope="module")
def other() -> Iterator[ProcessPoolExecutor]:
    """Another process (spawned once for the module)."""
    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        yield pool


def _both(scenario: Any, client: Any, sock: str, other: ProcessPoolExecutor) -> Any:
    """Runs scenario against both; asserts equal observations; returns them."""
    got = scenario(CPython(), other)
    mine = scenario(Vineyard(client, sock), other)
    assert mine == got
    return mine


def _name() -> str:
    return f"v6dtest_{uuid.uuid4().hex[:12]}"


# -- SharedMemory -----------------------------------------------------------

def test_create_attach_elsewhere_close_unlink(client, vineyard_socket, other):
    def scenario(impl: Any, other: ProcessPoolExecutor) -> list[Any]:
        obs: list[Any] = []
        s = impl.shm(create=True, size=16)
        s.buf[:5] = b"hello"
        s.buf[15] = 7
        obs += [s.size, len(s.buf), bytes(s.buf), repr(s) == f"SharedMemory({s.name!r}, size=16)"]
        impl.freeze(s)
        obs.append(other.submit(_child_attach, impl.kind, impl.sock, s.name).result())
        obs.append(other.submit(_child_unpickle, pickle.dumps(s)).result()[:2])
        s.close()
        obs.append(s.buf)  # None once closed
        s.close()  # twice is fine
        s.unlink()
        obs.append(other.submit(_child_attach, impl.kind, impl.sock, s.name).result())
        obs.append(_outcome(s.unlink))
        obs.append(_outcome(lambda: impl.shm(s.name)))
        return obs

    obs = _both(scenario, client, vineyard_socket, other)
    assert obs[4] == (b"hello" + bytes(10) + b"\x07", 16, True)
    assert obs[-3:] == ["FileNotFoundError"] * 3


def test_named_block(client, vineyard_socket, other):
    def scenario(impl: Any, other: ProcessPoolExecutor) -> list[Any]:
        name = _name()
        s = impl.shm(name, create=True, size=8)
        s.buf[:] = b"12345678"
        obs: list[Any] = [s.name == name, _outcome(lambda: impl.shm(name, create=True, size=8))]
        impl.freeze(s)
        obs.append(other.submit(_child_attach, impl.kind, impl.sock, name).result())
        t = impl.shm(name, size=999)  # size is ignored when attaching
        obs += [t.size, bytes(t.buf), t.name == name]
        t.close()
        s.close()
        s.unlink()
        obs.append(_outcome(lambda: impl.shm(name)))
        obs.append(_outcome(lambda: impl.shm(name, create=True, size=1).unlink()))  # the name is free again
        return obs

    obs = _both(scenario, client, vineyard_socket, other)
    assert obs[1] == "FileExistsError" and obs[2] == (b"12345678", 8, True)


def test_bad_arguments(client, vineyard_socket, other):
    def scenario(impl: Any, other: ProcessPoolExecutor) -> list[Any]:
        return [_outcome(lambda: impl.shm(create=True, size=-1)),
                _outcome(lambda: impl.shm(create=True, size=0)),
                _outcome(lambda: impl.shm()),
                _outcome(lambda: impl.shm(_name()))]

    assert _both(scenario, client, vineyard_socket, other)[-1] == "FileNotFoundError"


def test_views_outlive_unlink_and_close_refuses_while_exported(client, vineyard_socket, other):
    def scenario(impl: Any, other: ProcessPoolExecutor) -> list[Any]:
        s = impl.shm(create=True, size=4096)
        s.buf[:4] = b"data"
        impl.freeze(s)
        a = impl.shm(s.name)
        arr = np.frombuffer(a.buf, dtype=np.uint8)
        s.unlink()
        gc.collect()
        obs: list[Any] = [bytes(arr[:4]), bytes(a.buf[:4]), _outcome(a.close)]
        del arr
        obs.append(_outcome(a.close))
        obs.append(a.buf)
        s.close()
        return obs

    assert _both(scenario, client, vineyard_socket, other)[:3] == [b"data", b"data", "BufferError"]


# -- ShareableList ----------------------------------------------------------

def test_shareable_list(client, vineyard_socket, other):
    def scenario(impl: Any, other: ProcessPoolExecutor) -> list[Any]:
        sl = impl.sl(SEQUENCE)
        obs: list[Any] = [bytes(sl.shm.buf), sl.shm.size, list(sl), len(sl), sl.format, sl.count(None), sl.index(1234)]
        sl[0] = "bbbbbb"
        sl[2] = 9.5
        sl[-1] = None
        obs += [_outcome(lambda: sl.__setitem__(1, b"x" * 64)), _outcome(lambda: sl[99]), list(sl)]
        obs.append(repr(sl) == f"ShareableList({list(sl)!r}, name={sl.shm.name!r})")
        impl.freeze(sl.shm)
        obs.append(other.submit(_child_list, impl.kind, impl.sock, sl.shm.name).result())
        obs.append(other.submit(_child_unpickle_list, pickle.dumps(sl)).result()[0])
        empty = impl.sl([])
        obs += [len(empty), list(empty), bytes(empty.shm.buf)]
        for block in (sl.shm, empty.shm):
            block.close()
            block.unlink()
        return obs

    obs = _both(scenario, client, vineyard_socket, other)
    assert obs[2] == list(SEQUENCE)
    assert obs[9] == ["bbbbbb", b"bb", 9.5, *SEQUENCE[3:-1], None]


def test_shareable_list_named(client, vineyard_socket, other):
    def scenario(impl: Any, other: ProcessPoolExecutor) -> list[Any]:
        name = _name()
        sl = impl.sl([1, "two", 3.0], name=name)
        impl.freeze(sl.shm)
        obs = [sl.shm.name == name, other.submit(_child_list, impl.kind, impl.sock, name).result()]
        sl.shm.close()
        sl.shm.unlink()
        return obs

    assert _both(scenario, client, vineyard_socket, other)[1][0] == [1, "two", 3.0]


def test_upstream_shareable_list(client):
    """upstream's test_shared_memory.py::test_shareable_list, as it is."""
    a = vshm.ShareableList(client, ("a", b"bb", 1234, 56789.01234))
    a[0] = "bbbbbb"
    a.freeze()
    b = vshm.ShareableList(client, name=a.shm.name)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x == y
    b.shm.unlink()


# -- where vineyard differs (the store's objects are immutable) --------------

def test_frozen_is_read_only_and_unfrozen_is_not_attachable(client):
    s = vshm.SharedMemory(client, create=True, size=8)
    with pytest.raises(vineyard.ObjectNotSealedException, match="freeze"):
        vshm.SharedMemory(client, s.name)
    s.freeze()
    assert s.buf.readonly
    with pytest.raises(TypeError):
        s.buf[0] = 1
    sl = vshm.ShareableList(client, [1, 2]).freeze()
    with pytest.raises(TypeError):
        sl[0] = 3
    assert list(vshm.ShareableList(client, name=sl.shm.name)) == [1, 2]
    for block in (s, sl.shm):
        block.unlink()


def test_block_survives_its_creator(client, vineyard_socket, other):
    # CPython's resource tracker unlinks a block when its creator exits; a
    # frozen block stays in the store until someone unlinks it.
    name = _name()
    other.submit(_child_create_named, vineyard_socket, name).result()
    s = vshm.SharedMemory(client, name)
    assert bytes(s.buf) == b"orphan"
    s.close()
    s.unlink()


def test_unlink_frees_the_memory(client):
    before = client.status.memory_usage
    s = vshm.SharedMemory(client, name=_name(), create=True, size=1 << 20)
    s.buf[:] = b"x" * (1 << 20)
    s.close()
    assert client.status.memory_usage >= before + (1 << 20)
    s.unlink()
    assert client.status.memory_usage == before
    u = vshm.SharedMemory(client, create=True, size=1 << 20)
    u.unlink()  # not frozen: dropped
    assert u.buf is None and client.status.memory_usage == before


def test_name_that_is_not_a_block(client):
    name = _name()
    oid = client.put(np.arange(4), persist=True, name=name)
    with pytest.raises(ValueError, match="not a shared memory block"):
        vshm.SharedMemory(client, name)
    with pytest.raises(ValueError, match="object id"):
        vshm.SharedMemory(client, repr(oid), create=True, size=1)
    with pytest.raises(TypeError, match="int, float"):
        vshm.ShareableList(client, [[1]])
