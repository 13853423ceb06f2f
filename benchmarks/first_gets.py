#!/usr/bin/env python3
"""First gets in a young consumer process, as the harness times them: per trial this
process puts --inner arrays of 8 B, hands their ids to a spawned consumer, which times
get + drop of each (docs/performance.md, "December 5, later: a Python get with less
around it").

    benchmarks/first_gets.py [--trials 15] [--inner 200]

Starts build/vineyardd (env VINEYARDD overrides it) on a socket of its own and prints
the consumer's page faults per trial, the trial means (what the harness reports) and
the median get + drop by position in the trial: the first get after the consumer
waited, and the rest.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from harness.daemons import ours  # benchmarks/, the script's folder, is on sys.path


def _consumer(socket: str, conn: object) -> None:
    import resource

    import vineyard

    client = vineyard.connect(socket)
    while True:
        refs = conn.recv()  # type: ignore[attr-defined]
        if refs is None:
            break
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        times = []
        for ref in refs:
            t0 = time.perf_counter()
            value = client.get(ref)
            t1 = time.perf_counter()
            if value.nbytes != 8:
                raise AssertionError(value)
            t2 = time.perf_counter()
            del value
            times.append((t1 - t0) + (time.perf_counter() - t2))
        conn.send((times, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults))  # type: ignore[attr-defined]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=15)
    ap.add_argument("--inner", type=int, default=200)
    args = ap.parse_args()

    import numpy as np
    import vineyard

    binary = os.environ.get("VINEYARDD") or str(ROOT / "build" / "vineyardd")
    daemon = ours(binary, 2 << 30)
    try:
        client = vineyard.connect(daemon.socket)
        ctx = mp.get_context("spawn")
        here, there = ctx.Pipe()
        proc = ctx.Process(target=_consumer, args=(daemon.socket, there))
        proc.start()
        value = np.zeros(1, dtype=np.float64)
        by_position: list[list[float]] = [[] for _ in range(args.inner)]
        means, faults = [], []
        for _ in range(args.trials):
            refs = [int(client.put(value)) for _ in range(args.inner)]
            here.send(refs)
            times, n = here.recv()
            client.delete(refs)
            means.append(sum(times) / len(times))
            faults.append(n)
            for i, t in enumerate(times):
                by_position[i].append(t)
        here.send(None)
        proc.join()
        medians = [statistics.median(p) * 1e6 for p in by_position]
        print("page faults per trial:", faults)
        print("trial means (µs):", [round(m * 1e6, 2) for m in means])
        print("median by position (µs): first", round(medians[0], 1), "second", round(medians[1], 1),
              "rest", round(statistics.mean(medians[2:]), 2))
        client.close()
    finally:
        daemon.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
