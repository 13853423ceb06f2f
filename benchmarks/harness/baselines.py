"""Physical floors, measured in the harness's own process (which never loads libv6d).

- Python socket round trip: a 64-byte message echoed by another process over a UNIX
  stream socket (send, then read the 64 bytes back).
- NumPy memcpy: ``np.copyto`` into a destination whose pages are already touched
  (warm), and into fresh anonymous pages that the copy faults in (cold, first touch).
"""

from __future__ import annotations

import mmap
import multiprocessing as mp
import os
import socket
import tempfile
import time
from typing import Self

MESSAGE = 64


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError("peer closed")
        buf += chunk
    return buf


def _echo_server(path: str, ready: object) -> None:
    with socket.socket(socket.AF_UNIX) as srv:
        srv.bind(path)
        srv.listen(1)
        ready.set()  # type: ignore[attr-defined]
        conn, _ = srv.accept()
        with conn:
            try:
                while True:
                    conn.sendall(_recv_exact(conn, MESSAGE))
            except EOFError:
                pass


class EchoPeer:
    """A Python process echoing 64-byte messages over a UNIX socket, and a connection
    to it; ``trial`` times round trips. Close it (or use it as a context manager)."""

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")
        self._tmp = tempfile.TemporaryDirectory(prefix="v6d-bench-")
        path = os.path.join(self._tmp.name, "echo.sock")
        ready = ctx.Event()
        self._proc = ctx.Process(target=_echo_server, args=(path, ready), daemon=True)
        self._proc.start()
        self._sock = socket.socket(socket.AF_UNIX)
        try:
            if not ready.wait(60):
                raise TimeoutError("echo server did not start")
            self._sock.connect(path)
            self.trial(10)
        except BaseException:
            self.close()
            raise

    def trial(self, inner: int) -> float:
        """Seconds per round trip, the mean of ``inner`` of them."""
        msg = b"x" * MESSAGE
        t0 = time.perf_counter()
        for _ in range(inner):
            self._sock.sendall(msg)
            _recv_exact(self._sock, MESSAGE)
        return (time.perf_counter() - t0) / inner

    def close(self) -> None:
        self._sock.close()
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()
        self._tmp.cleanup()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def socket_rtt(trials: int, inner: int) -> list[float]:
    """Seconds per round trip, one sample per trial of ``inner`` round trips."""
    with EchoPeer() as peer:
        return [peer.trial(inner) for _ in range(trials)]


_warm: dict[int, tuple] = {}  # nbytes -> (src, dst), kept between calls: see memcpy_warm


def memcpy_warm(nbytes: int, trials: int) -> list[float]:
    """Seconds per copy of nbytes into an already-touched destination. The buffers are
    kept for the next call (the runner samples this floor throughout a run); free them
    with release()."""
    import numpy as np

    if nbytes not in _warm:
        src = np.full(nbytes, 7, dtype=np.uint8)
        dst = np.zeros(nbytes, dtype=np.uint8)
        dst[:] = 1
        _warm[nbytes] = (src, dst)
    src, dst = _warm[nbytes]
    out = []
    for trial in range(trials + 1):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        dt = time.perf_counter() - t0
        if trial:
            out.append(dt)
    return out


def release() -> None:
    """Frees the buffers memcpy_warm keeps."""
    _warm.clear()


def memcpy_cold(nbytes: int, trials: int) -> list[float]:
    """Seconds per copy of nbytes into fresh anonymous pages (mmap'd per trial, so the
    copy pays every first-touch page fault)."""
    import numpy as np

    src = np.full(nbytes, 7, dtype=np.uint8)
    out = []
    for _ in range(trials):
        region = mmap.mmap(-1, nbytes)
        dst = np.frombuffer(region, dtype=np.uint8)
        t0 = time.perf_counter()
        np.copyto(dst, src)
        out.append(time.perf_counter() - t0)
        del dst
        region.close()
    return out
