#!/usr/bin/env python3
"""soak.py — a bounded soak of one daemon through the Python client.

Starts vineyardd on a private temporary socket, then runs --workers worker
processes (the "spawn" start method) for --seconds. Each worker does random
put / get / delete / persist / name operations on NumPy byte arrays of 1 B to
64 MiB (sizes log-uniform), remembers a checksum of every value it put, and
checks the checksum of every value it reads back (by id and by name). A
deleted object must be gone. Workers also get values other workers put
("peek": ids passed through a queue), keep the last few while their owners
delete them and reuse their memory, and check them again on every peek:
gets from the daemon's directory, pinned without a round trip. NotEnoughMemory on a put is expected when the
arena is full (the worker deletes some of its objects) and counted apart.

Prints the ops and errors per kind, and exits non-zero on any corruption,
unexpected error, a worker that dies, or a daemon that exits.

    V6D_LIBRARY=build/libv6d.so PYTHONPATH=python python3 scripts/soak.py --seconds 30
"""

from __future__ import annotations

import argparse
import collections
import math
import multiprocessing as mp
import os
import queue
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import zlib
from typing import Any

MAX_SIZE = 64 << 20


def _size(rng: random.Random, max_size: int) -> int:
    return max(1, int(math.exp(rng.uniform(0, math.log(max_size)))))


def _value(rng: random.Random, size: int) -> Any:
    import numpy as np

    # Cheap but not constant: a random byte pattern repeated, shifted by a
    # random offset, so that a read of the wrong blob or offset shows.
    pattern = np.frombuffer(rng.randbytes(4096), dtype=np.uint8)
    reps = -(-size // 4096) + 1
    off = rng.randrange(4096)
    return np.tile(pattern, reps)[off : off + size].copy()


def _crc(value: Any) -> int:
    return zlib.crc32(memoryview(value).cast("B"))


def worker(index: int, socket: str, seconds: float, max_size: int, seed: int, out: Any, shared: Any) -> None:
    """One soak worker; puts its counters (or a traceback) on out."""
    counts: collections.Counter[str] = collections.Counter()
    failures: list[str] = []
    try:
        import vineyard
        from vineyard import errors

        rng = random.Random(seed)
        client = vineyard.connect(socket)
        objects: dict[Any, tuple[int, int]] = {}  # id -> (size, crc)
        names: dict[str, Any] = {}  # name -> id
        held: list[tuple[Any, Any, int]] = []  # (id, value, crc) got from other workers
        end = time.monotonic() + seconds

        def check(oid: Any, value: Any, what: str) -> None:
            size, crc = objects[oid]
            if len(memoryview(value).cast("B")) != size or _crc(value) != crc:
                failures.append(f"worker {index}: {what} {oid}: wrong bytes")

        while time.monotonic() < end:
            op = rng.choices(["put", "get", "delete", "persist", "name", "peek"], [4, 6, 2, 1, 1, 3])[0]
            if op != "put" and not objects:
                op = "put"
            try:
                if op == "put":
                    value = _value(rng, _size(rng, max_size))
                    try:
                        oid = client.put(value)
                    except errors.NotEnoughMemoryException:
                        counts["put.full"] += 1
                        for victim in rng.sample(list(objects), len(objects) // 2):
                            client.delete(victim)
                            del objects[victim]
                        continue
                    objects[oid] = (value.nbytes, _crc(value))
                    if value.nbytes <= 1 << 20:
                        try:
                            shared.put_nowait((int(oid), _crc(value)))
                        except queue.Full:  # the others are behind
                            counts["put.unshared"] += 1
                elif op == "get":
                    oid = rng.choice(list(objects))
                    check(oid, client.get(oid), "get")
                elif op == "delete":
                    oid = rng.choice(list(objects))
                    client.delete(oid)
                    del objects[oid]
                    for name in [n for n, i in names.items() if i == oid]:
                        del names[name]
                    if client.exists(oid):
                        failures.append(f"worker {index}: {oid} exists after delete")
                elif op == "peek":
                    try:
                        foreign, crc = shared.get_nowait()
                    except queue.Empty:
                        foreign = None
                    if foreign is not None:
                        try:
                            held.append((foreign, client.get(foreign), crc))
                        except errors.ObjectNotExistsException:
                            counts["peek.gone"] += 1
                        held = held[-8:]
                    for fid, value, crc in held:  # pinned: never freed or reused, deleted or not
                        if _crc(value) != crc:
                            failures.append(f"worker {index}: peek of {fid}: wrong bytes")
                elif op == "persist":
                    client.persist(rng.choice(list(objects)))
                else:
                    oid = rng.choice(list(objects))
                    name = f"soak-{index}-{counts['name']}"
                    client.persist(oid)
                    client.put_name(oid, name)
                    names[name] = oid
                    if client.get_name(name) != oid:
                        failures.append(f"worker {index}: name {name} does not give {oid}")
                    check(oid, client.get(name=name), "get by name")
                counts[op] += 1
            except Exception as e:  # noqa: BLE001 - every error is reported
                counts[f"{op}.error"] += 1
                failures.append(f"worker {index}: {op}: {type(e).__name__}: {e}")
                if len(failures) > 20:
                    break
        held.clear()
        client.close()
    except Exception:  # noqa: BLE001
        failures.append(f"worker {index}: {traceback.format_exc()}")
    out.put((index, dict(counts), failures))


def start_daemon(daemon: str, size: str, tmp: str, spill: bool = False) -> tuple[subprocess.Popen[bytes], str]:
    from vineyard.deploy import DaemonError, launch

    # --check-invariants: the daemon checks its bookkeeping every second and
    # exits with status 3 at the first violation, which fails the soak.
    try:
        flags = ["--check-invariants", "1s"] + (["--spill-path", os.path.join(tmp, "spill")] if spill else [])
        d = launch(size, os.path.join(tmp, "vineyard.sock"), flags, binary=daemon,
                   log=os.path.join(tmp, "daemon.log"))
    except DaemonError as e:
        sys.exit(f"soak: {e}")
    return d.proc, d.socket


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=120, help="how long to run (default 120)")
    ap.add_argument("--workers", type=int, default=4, help="worker processes (default 4)")
    ap.add_argument("--size", default="1Gi", help="the daemon's --size (default 1Gi)")
    ap.add_argument("--max-size", type=int, default=MAX_SIZE, help="largest value in bytes (default 64 MiB)")
    ap.add_argument("--daemon", default=os.environ.get("VINEYARDD", "build/vineyardd"), help="vineyardd binary")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock)")
    ap.add_argument("--spill", action="store_true", help="the daemon spills (--spill-path in its temp directory)")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else int(time.time())
    tmp = tempfile.mkdtemp(prefix="v6d-soak-")
    proc, socket = start_daemon(args.daemon, args.size, tmp, args.spill)
    print(
        f"soak: {args.workers} workers, {args.seconds:g} s, values 1 B..{args.max_size} B, seed {seed}, daemon pid {proc.pid}"
    )
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    shared = ctx.Queue(maxsize=256)  # ids of recent values, for other workers' peeks
    procs = [
        ctx.Process(target=worker, args=(i, socket, args.seconds, args.max_size, seed + i, out, shared))
        for i in range(args.workers)
    ]
    for p in procs:
        p.start()
    totals: collections.Counter[str] = collections.Counter()
    failures: list[str] = []
    deadline = time.monotonic() + args.seconds + 120
    for _ in procs:
        try:
            _index, counts, fails = out.get(timeout=max(1.0, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 - queue.Empty
            failures.append("a worker did not report (hung or died)")
            break
        totals.update(counts)
        failures.extend(fails)
    for p in procs:
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
        if p.exitcode not in (0, None):
            failures.append(f"worker process {p.pid} exited with {p.exitcode}")
    if proc.poll() is not None:
        why = " (a store invariant broke)" if proc.returncode == 3 else ""
        failures.append(f"the daemon exited with {proc.returncode}{why}; log in {tmp}/daemon.log")
    else:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            failures.append("the daemon did not stop on SIGTERM")
    ops = sum(v for k, v in totals.items() if "." not in k)
    print(f"soak: {ops} ops: " + ", ".join(f"{k} {v}" for k, v in sorted(totals.items())))
    for f in failures[:50]:
        print("soak: FAIL:", f)
    if failures:
        print(f"soak: {len(failures)} failures; daemon log kept in {tmp}")
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print("soak: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
