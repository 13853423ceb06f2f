"""The release queue (v6d_release_queue): a dropped value's pin is released
by writing its id to memory libv6d reads, not by a call. It must be done
before the client's next call, within milliseconds without one, from any
thread, and never in a forked child."""

import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
import vineyard
from vineyard import _handles


def _usage(client) -> int:
    return client.status.memory_usage


def _wait_usage(client, want: int, seconds: float = 2.0) -> int:
    deadline = time.monotonic() + seconds
    while (got := _usage(client)) != want and time.monotonic() < deadline:
        time.sleep(0.005)
    return got


@pytest.fixture
def calls(monkeypatch):
    """Counts the releases and flushes Pin.__del__ makes as calls."""
    counted = {"release": 0, "flush": 0}
    release, flush = _handles._release_function(), _handles._flush_function()

    def counting(kind, fn):
        def call(*args):
            counted[kind] += 1
            return fn(*args)
        return call

    monkeypatch.setattr(_handles, "_release_fn", counting("release", release))
    monkeypatch.setattr(_handles, "_flush_fn", counting("flush", flush))
    return counted


def test_a_connection_has_a_queue(client):
    assert client._session.conn.queue is not None


def test_a_dropped_value_is_released_without_a_call(client, vineyard_socket, calls):
    other = vineyard.connect(vineyard_socket)
    keep = other.get(client.put(np.arange(4)))
    base = _usage(client)
    oid = client.put(np.full(1 << 20, 3, dtype=np.uint8))
    value = other.get(oid)
    client.delete(oid)  # pinned by `other`: the memory stays
    assert _usage(client) > base and int(value[-1]) == 3
    written, before = other._session.conn.queue[0], dict(calls)
    del keep  # arms the queue if its timer stopped meanwhile: at most one call
    del value  # armed: no call
    assert calls["release"] == before["release"] and calls["flush"] <= before["flush"] + 1
    assert other._session.conn.queue[0] == written + 2
    # No call of `other` from here: its queue's timer releases the pin.
    assert _wait_usage(client, base) == base


def test_a_written_release_comes_before_the_next_call(client):
    """A delete right after the drop frees the memory at once: the delete
    takes the written release before it is sent."""
    oid, other = client.put(np.full(1 << 20, 5, dtype=np.uint8)), client.put(np.arange(3))
    base = _usage(client)
    armer, value = client.get(other), client.get(oid)
    del armer  # a call, if the queue is not armed: the next drop is written only
    del value
    client.delete(oid)
    assert _usage(client) == base - (1 << 20)


def test_threads_dropping_at_once_lose_no_release(client, vineyard_socket):
    base = _usage(client)
    ids = [client.put(np.full(1024, i, dtype=np.uint8)) for i in range(64)]
    other = vineyard.connect(vineyard_socket)
    bad: list = []

    def run(k: int) -> None:
        for r in range(1500):
            oid = ids[(k * 7 + r) % len(ids)]
            v = other.get(oid)
            if int(v[0]) != ids.index(oid):
                bad.append(k)
            del v

    threads = [threading.Thread(target=run, args=(k,)) for k in range(8)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as they may
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not bad
    client.delete(ids)
    # A lost release would keep its blob until `other` disconnects.
    assert _wait_usage(client, base) == base


def test_a_forked_child_drops_more_than_the_ring_and_the_parent_goes_on(vineyard_socket):
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import os, sys, numpy as np, vineyard
        from vineyard import _handles
        c = vineyard.connect({vineyard_socket!r})
        base = c.status.memory_usage
        ids = [c.put(np.full(8, i, dtype=np.int64)) for i in range(64)]
        n = _handles._QUEUE_RING + 100
        values = [c.get(ids[i % 64]) for i in range(n)]
        pid = os.fork()
        if pid == 0:
            ok = all(int(v[0]) == i % 64 for i, v in enumerate(values))
            values.clear()  # written to the child's copy of the queue, then not at all
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        assert all(int(v[0]) == i % 64 for i, v in enumerate(values))
        values.clear()
        c.delete(ids)
        assert c.status.memory_usage == base, (c.status.memory_usage, base)
        sys.exit(os.waitstatus_to_exitcode(status))
    """)], capture_output=True, text=True, timeout=60, env=dict(os.environ), check=False)
    assert r.returncode == 0, r.stderr
