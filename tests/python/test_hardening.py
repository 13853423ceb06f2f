"""A real daemon against requests built to amplify: its own memory (RSS,
outside the arena) stays bounded, and it keeps serving (issue 14)."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import time

import numpy as np
import pytest
import vineyard

MiB = 1 << 20


@pytest.fixture
def daemon(tmp_path, request):
    sock = str(tmp_path / "v.sock")
    extra = getattr(request, "param", [])
    proc = subprocess.Popen(
        [os.environ["VINEYARDD"], "--socket", sock, "--size", "256Mi", "--norpc", "--check-invariants", "200ms", *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while not os.path.exists(sock):
        assert proc.poll() is None, "vineyardd exited at start"
        assert time.monotonic() < deadline, "vineyardd did not start"
        time.sleep(0.02)
    yield proc, sock
    proc.terminate()
    assert proc.wait(timeout=20) == 0, "vineyardd did not stop cleanly (an invariant broke?)"


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):  # the daemon's own memory, not the arena (shared)
                return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon")


class Raw:
    """The wire protocol by hand: 8-byte little-endian length, then JSON."""

    def __init__(self, path: str) -> None:
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(60)
        self.s.connect(path)
        assert self.rpc({"type": "register_request", "version": "0.24.2"})["type"] == "register_reply"

    def send(self, body: bytes) -> None:
        self.s.sendall(struct.pack("<Q", len(body)) + body)

    def recv(self) -> dict:
        n = struct.unpack("<Q", self._exact(8))[0]
        body = self._exact(n)
        return json.loads(body.decode("utf-8"))  # a reply is always valid UTF-8 JSON

    def rpc(self, msg: dict) -> dict:
        self.send(json.dumps(msg).encode())
        return self.recv()

    def _exact(self, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.s.recv_into(view[got:])
            if k == 0:
                raise ConnectionError("daemon closed the connection")
            got += k
        return bytes(buf)


def test_amplifying_requests_keep_daemon_memory_bounded(daemon):
    proc, sock = daemon
    c = vineyard.connect(sock)
    value = np.arange(1000)
    oid = c.put(value)
    base = rss(proc.pid)
    r = Raw(sock)

    # One id repeated: duplicates cost nothing, the reply is that of one id.
    rep = r.rpc({"type": "get_data_request", "id": [int(oid)] * 60000, "sync_remote": False, "wait": False})
    assert rep["type"] == "get_data_reply", rep
    assert len(rep["content"]) == 1

    # Too many items in one request: a clear error, nothing allocated per item.
    rep = r.rpc({"type": "create_buffers_request", "num": 3_000_000, "sizes": [1] * 3_000_000})
    assert rep.get("code") and "65536" in rep["message"], rep

    # The same, with a count that agrees with the limit but asks for it many times over.
    for _ in range(20):
        rep = r.rpc({"type": "get_data_request", "id": [int(oid)] * 65536, "sync_remote": False, "wait": False})
        assert rep["type"] == "get_data_reply" and len(rep["content"]) == 1, rep

    # Invalid UTF-8 in metadata is refused at create time; listings stay valid.
    r.send(b'{"type":"create_data_request","content":{"typename":"vineyard::Scalar","value_":"\xff\xfe"}}')
    rep = r.recv()
    assert rep.get("code"), rep
    assert all(isinstance(m.typename, str) for m in c.list_metadatas("*", limit=0))

    grown = rss(proc.pid) - base
    assert grown < 64 * MiB, f"daemon RSS grew by {grown / MiB:.0f} MiB"
    # ... and it still serves everyone.
    assert (c.get(oid) == value).all()
    c.close()


@pytest.mark.parametrize("daemon", [["--max-inflight-bytes", "16Mi"]], indirect=True)
def test_half_frames_from_many_clients_hold_bounded_memory(daemon):
    proc, sock = daemon
    base = rss(proc.pid)
    conns = []
    for _ in range(32):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(0.2)
        s.connect(sock)
        # Announce a 64 MiB frame and send 2 MiB of it: 64 MiB in all, four
        # times the daemon's budget of frame bytes being received.
        try:
            s.sendall(struct.pack("<Q", 64 * MiB) + b'{"type":"create_data_request","content":"' + b"a" * (2 * MiB))
        except TimeoutError:
            pass  # the daemon stopped reading this one: over budget
        conns.append(s)
    time.sleep(0.5)
    grown = rss(proc.pid) - base
    assert grown < 40 * MiB, f"32 half frames grew the daemon's RSS by {grown / MiB:.0f} MiB (budget 16 MiB)"
    with vineyard.connect(sock) as c:
        assert bytes(c.get(c.put(b"ok"))) == b"ok"
    for s in conns:
        s.close()
