#!/usr/bin/env python3
"""What a pause costs the next operation: each operation timed right after a short
sleep and right after as long of busy Python (docs/performance.md, "December 4,
evening: what a pause costs every operation").

    benchmarks/pause_cost.py [--n 2000] [--sleep-us 50]

Starts build/vineyardd (env VINEYARDD overrides it) on a socket of its own and prints,
per operation, the median time after the sleep and after the busy work. The
operations: a libv6d call that does nothing (the release of an id the client does not
hold), a 64 B send + recv on a socketpair, ``sum(range(50))``, ``os.stat``, and our
put of 8 B (pipelined). The busy work leaves the daemon as idle as the sleep does, so
a gap between the two columns is the client's own CPU coming back from idle.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from harness.daemons import ours  # benchmarks/, the script's folder, is on sys.path


def _median_after(op: Callable[[], object], before: Callable[[], object], n: int) -> float:
    """Median seconds of op, each run right after before."""
    times = []
    for _ in range(n):
        before()
        t0 = time.perf_counter()
        op()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[n // 2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="timed runs per operation and case")
    ap.add_argument("--sleep-us", type=float, default=50, help="the pause, in µs")
    args = ap.parse_args()

    import numpy as np
    import vineyard
    from vineyard import _ffi

    binary = os.environ.get("VINEYARDD") or str(ROOT / "build" / "vineyardd")
    daemon = ours(binary, 1 << 30)
    try:
        client = vineyard.connect(daemon.socket)
        kept: list[object] = []
        value = np.ones(1, dtype=np.int64)
        handle = client._session.conn.c_handle
        release = _ffi.untyped("v6d_release")
        a, b = socket.socketpair()
        pause = args.sleep_us / 1e6

        def sleep() -> None:
            time.sleep(pause)

        # About as long as the sleep, without leaving the CPU.
        spin = max(1, int(args.sleep_us * 10))

        def busy() -> None:
            [None for _ in range(spin)]

        def sendrecv() -> None:
            a.send(b"x" * 64)
            b.recv(64)

        ops: list[tuple[str, Callable[[], object]]] = [
            ("libv6d call that does nothing", lambda: release(handle, ctypes.c_uint64(1), None)),
            ("send + recv 64 B, socketpair", sendrecv),
            ("sum(range(50))", lambda: sum(range(50))),
            ("os.stat('/')", lambda: os.stat("/")),
            ("put of 8 B", lambda: kept.append(client.put(value))),
        ]
        print(f"{'operation':32s} {'after sleep':>12s} {'after busy':>12s}")
        for name, op in ops:
            slow = _median_after(op, sleep, args.n)
            fast = _median_after(op, busy, args.n)
            print(f"{name:32s} {slow * 1e6:9.2f} µs {fast * 1e6:9.2f} µs")
        client.delete(kept)
        client.close()
    finally:
        daemon.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
