#!/usr/bin/env python3
"""CPU per operation of the put + get loop (the loop of the harness's
``conc.*`` figures), split between the clients and the daemon: what the
aggregate rate of N clients on this machine is made of (docs/performance.md).

    benchmarks/cpu_per_op.py [--clients 1,2,4] [--ops 20000] [--rounds 2] [--size 1024]
                             [--arena 2Gi] [--reserve-memory]

Starts build/vineyardd (env VINEYARDD overrides it) on a socket of its own. Each
round starts N client processes that wait at a barrier, then each does ``ops``
times put + get + drop of its own NumPy array of ``size`` bytes. Printed per
round: the aggregate rate; the clients' CPU per operation (``os.times`` of each
client around its loop) and the daemon's (see below); per operation, the clients' page
faults, waits (voluntary context switches) and preemptions (involuntary ones), from
``getrusage`` around the loop, and the daemon's page faults over the whole round (its
deletes included). The daemon's CPU is read from ``/proc/<pid>/stat``, from the first
client's start to the last one's end; each client deletes its objects once every loop
is over, as in the harness. The first rounds put into arena pages nothing
touched before, whose first touch (15-30 µs a page on the VMs we measure on) the
daemon's background pre-fault pays: ``--reserve-memory`` touches the whole arena at
start, so that the daemon's figure is its handling alone. CPU figures
have the 10 ms resolution of the kernel's clock ticks: keep ops × clients ≥ 20,000.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from harness.daemons import ours  # benchmarks/, the script's folder, is on sys.path
from harness.units import parse_size


def _stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (the state first)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process pid, all its threads."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _minor_faults(pid: int) -> int:
    """Minor page faults of process pid so far, all its threads."""
    return int(_stat(pid)[7])


def _client(sock: str, size: int, ops: int, daemon: int, barrier: Any, out: Any) -> None:
    import numpy as np
    import vineyard

    client = vineyard.connect(sock)
    value = np.ones(size // 8)
    refs = [client.put(value) for _ in range(3)]  # the lease, the first mappings
    for ref in refs:
        client.get(ref)
    barrier.wait()
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    daemon0, mine0, t0 = _cpu_seconds(daemon), os.times(), time.time()
    for _ in range(ops):
        ref = client.put(value)
        v = client.get(ref)
        del v
        refs.append(ref)
    t1, mine1, daemon1 = time.time(), os.times(), _cpu_seconds(daemon)
    usage1 = resource.getrusage(resource.RUSAGE_SELF)
    counts = (usage1.ru_minflt - usage0.ru_minflt, usage1.ru_nvcsw - usage0.ru_nvcsw,
              usage1.ru_nivcsw - usage0.ru_nivcsw)
    out.put((t0, t1, (mine1.user + mine1.system) - (mine0.user + mine0.system), daemon0, daemon1, counts))
    barrier.wait()  # deletes once every loop is over, as the harness does
    client.delete(refs)
    client.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", default="1,2,4", help="comma-separated client counts")
    ap.add_argument("--ops", type=int, default=20000, help="put + get per client per round")
    ap.add_argument("--rounds", type=int, default=2, help="rounds per client count")
    ap.add_argument("--size", type=int, default=1024, help="bytes per value (a multiple of 8)")
    ap.add_argument("--arena", default="2Gi", help="arena size: 1024, 512Mi, 2Gi (powers of 1024), 2G (of 1000)")
    ap.add_argument("--reserve-memory", action="store_true", help="pre-fault the whole arena at start")
    args = ap.parse_args()
    arena = parse_size(args.arena)
    binary = os.environ.get("VINEYARDD") or str(ROOT / "build" / "vineyardd")
    if not os.access(binary, os.X_OK):
        sys.exit(f"cpu_per_op: {binary} is missing: run 'make build'")
    daemon = ours(binary, arena, reserve_memory=args.reserve_memory)
    try:
        ctx = mp.get_context("spawn")
        for n in (int(c) for c in args.clients.split(",")):
            for _ in range(args.rounds):
                barrier, out = ctx.Barrier(n), ctx.Queue()
                procs = [ctx.Process(target=_client, args=(daemon.socket, args.size, args.ops, daemon.proc.pid,
                                                           barrier, out))
                         for _ in range(n)]
                faults0 = _minor_faults(daemon.proc.pid)
                for p in procs:
                    p.start()
                res = [out.get(timeout=600) for _ in procs]
                faults = _minor_faults(daemon.proc.pid) - faults0
                for p in procs:
                    p.join(60)
                ops = n * args.ops
                wall = max(r[1] for r in res) - min(r[0] for r in res)
                clients = sum(r[2] for r in res) / ops * 1e6
                served = (max(r[4] for r in res) - min(r[3] for r in res)) / ops * 1e6
                faults_c, waits, preempted = (sum(r[5][i] for r in res) / ops for i in range(3))
                print(f"{n} client(s): {ops / wall / 1000:.1f} k ops/s; CPU per op: clients {clients:.1f} µs, "
                      f"daemon {served:.1f} µs; per op: clients {faults_c:.3f} page faults, "
                      f"{waits:.3f} waits, {preempted:.3f} preemptions, daemon {faults / ops:.3f} page faults",
                      flush=True)
    finally:
        daemon.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
