"""Spilling figures (docs/design.md, "Spilling"), as ratios measured in one run:

- spill throughput: `client.evict` of a 256 MiB array against writing the same
  bytes to a file in the same directory (goal >= 0.8x);
- a get of the spilled 256 MiB array (load + view) against reading it back from
  that file into memory (goal <= 1.25x);
- a working set of 4x the arena put and read back end to end, against Ray with
  object spilling to the same directory, when Ray is importable (goal: faster).

Run: `make bench-spill` (part of `make bench`); `--quick` uses 64 MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import vineyard
from vineyard.deploy import launch


def best(f, n: int) -> float:
    out = float("inf")
    for _ in range(n):
        out = min(out, f())
    return out


def file_write(path: str, a: np.ndarray) -> float:
    """Writes a to a new file (a spill writes a new file too)."""
    if os.path.exists(path):
        os.remove(path)
    t = time.perf_counter()
    with open(path, "wb") as f:
        f.write(memoryview(a).cast("B"))
    return time.perf_counter() - t


def file_read(path: str, buf: np.ndarray) -> float:
    """Reads the file into buf, memory already touched (a load reads into
    arena memory that was in use before)."""
    t = time.perf_counter()
    with open(path, "rb") as f:
        f.readinto(memoryview(buf))
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--dir", default=None, help="the directory spills and files go to (default: a temp dir)")
    args = ap.parse_args()
    size = (64 if args.quick else 256) << 20
    reps = 3 if args.quick else 5
    root = tempfile.mkdtemp(prefix="v6d-spill-bench-", dir=args.dir)
    spill = os.path.join(root, "spill")
    results: dict[str, float | str] = {}
    try:
        arena = 2 * size + (64 << 20)
        with launch(str(arena), os.path.join(root, "v.sock"), ["--spill-path", spill], quiet=True) as d:
            c = vineyard.connect(d.socket)
            a = np.random.default_rng(1).integers(0, 255, size, dtype=np.uint8)
            path = os.path.join(root, "plain.bin")
            t_write = best(lambda: file_write(path, a), reps)
            buf = np.ones(size, dtype=np.uint8)
            t_read = best(lambda: file_read(path, buf), reps)
            evicts, gets = [], []
            for _ in range(reps):
                oid = c.put(a)
                t = time.perf_counter()
                c.evict([oid])
                evicts.append(time.perf_counter() - t)
                assert c.status.spilled_bytes >= size
                t = time.perf_counter()
                b = c.get(oid)
                gets.append(time.perf_counter() - t)
                assert b.nbytes == size
                del b
                c.delete(oid)
            t_evict, t_get = min(evicts), min(gets)
            results.update({
                "bytes": size,
                "file_write_GBps": size / t_write / 1e9,
                "spill_GBps": size / t_evict / 1e9,
                "spill_vs_file_write": t_write / t_evict,  # throughput ratio, goal >= 0.8
                "file_read_s": t_read,
                "get_spilled_s": t_get,
                "get_spilled_vs_file_read": t_get / t_read,  # time ratio, goal <= 1.25
            })
            c.close()
        results.update(working_set(root, size, args.quick))
        if "ray_working_set_4x_s" in results:
            results["working_set_vs_ray"] = results["working_set_4x_s"] / results["ray_working_set_4x_s"]  # goal < 1
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(results, indent=1))


def working_set(root: str, size: int, quick: bool) -> dict[str, float | str]:
    """4x the arena of 4 MiB arrays, put then every one read back."""
    arena = max(size, 96 << 20)  # Ray's object store takes no less than ~75 MiB
    n = 4 * arena // (4 << 20)
    arrays = [np.random.default_rng(i).integers(0, 255, 4 << 20, dtype=np.uint8) for i in range(8)]
    out: dict[str, float | str] = {}
    spill = os.path.join(root, "ws-spill")
    with launch(str(arena), os.path.join(root, "w.sock"), ["--spill-path", spill], quiet=True) as d:
        c = vineyard.connect(d.socket)
        t = time.perf_counter()
        ids = [c.put(arrays[i % 8]) for i in range(n)]
        for oid in ids:
            x = c.get(oid)
            assert x.nbytes == 4 << 20
            del x
        out["working_set_4x_s"] = time.perf_counter() - t
        c.close()
    out.update(ray_working_set(root, arena, n))
    return out


RAY_SCRIPT = """
import json, sys, time
import numpy as np
import ray
arena, n, spill = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
arrays = [np.random.default_rng(i).integers(0, 255, 4 << 20, dtype=np.uint8) for i in range(8)]
ray.init(object_store_memory=arena, include_dashboard=False, num_cpus=1,
         _system_config={"object_spilling_config": json.dumps(
             {"type": "filesystem", "params": {"directory_path": spill}})})
t = time.perf_counter()
refs = [ray.put(arrays[i % 8]) for i in range(n)]
for r in refs:
    x = ray.get(r)
    assert x.nbytes == 4 << 20
    del x
print(json.dumps({"ray_working_set_4x_s": time.perf_counter() - t}))
ray.shutdown()
"""


def ray_working_set(root: str, arena: int, n: int) -> dict[str, float | str]:
    """The same working set through Ray (its pinned environment, build/bench/venv-ray),
    spilling to the same disk; skipped, with the reason, when it cannot run."""
    import subprocess

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from harness import agents

    spill = os.path.join(root, "ray-spill")
    os.makedirs(spill, exist_ok=True)
    try:
        with open(os.path.join(root, "ray-venv.log"), "w") as log:
            python = agents.ensure_venv("ray", log)
    except agents.Skip as e:
        return {"ray": f"skipped: {e}"}
    proc = subprocess.run([python, "-c", RAY_SCRIPT, str(arena), str(n), spill], check=False,
                          capture_output=True, text=True, timeout=1200, env=agents.environment("ray"))
    if proc.returncode != 0:
        return {"ray": "failed: " + " | ".join(proc.stderr.strip().splitlines()[-3:])}
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
