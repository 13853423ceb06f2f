"""Stream figures (docs/design.md, "internal/streams"), as ratios measured in
one run, a writer and a reader in two processes:

- small-chunk latency: a chunk of 8 int64 put and pushed by one process,
  pulled and got by the other (half a ping-pong over two streams), against a
  Python UNIX-socket round trip of 8 bytes (goal <= 2x);
- 4 MiB chunk throughput (put and push; pull and get, zero-copy), against a
  warm 4 MiB memcpy in one process (goal >= 0.6x);
- the same latency and throughput through a multiprocessing.Queue of the same
  arrays, and the throughput of a Ray streaming generator yielding them when
  Ray runs (its pinned environment, build/bench/venv-ray; goal: faster than
  both).

Run: `make bench-streams` (part of `make bench`); `--quick` does fewer rounds,
`--no-ray` leaves Ray out.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

SMALL = 8  # int64 per small chunk
BIG = 4 << 20  # bytes per large chunk


def best(f: Any, n: int) -> float:
    return min(f() for _ in range(n))


# ---- children (spawned) -----------------------------------------------------

def echo_stream(sock: str, a: int, b: int, n: int) -> None:
    """Pulls n chunks of stream a, pushes a chunk to stream b for each."""
    import vineyard

    c = vineyard.connect(sock)
    c.open_stream(a, "r")
    c.open_stream(b, "w")
    one = np.arange(SMALL, dtype=np.int64)
    for _ in range(n):
        x = c.get(c.next_chunk_id(a))
        del x
        c.push_chunk(b, c.put(one))
    c.stop_stream(b, False)
    c.close()


def echo_socket(path: str, n: int) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    for _ in range(n):
        s.sendall(s.recv(8))
    s.close()


def echo_queue(qa: Any, qb: Any, n: int) -> None:
    for _ in range(n):
        qb.put(qa.get())


def drain_stream(sock: str, sid: int, done: Any) -> None:
    import vineyard

    c = vineyard.connect(sock)
    c.open_stream(sid, "r")
    done.put("ready")
    n = 0
    while True:
        try:
            cid = c.next_chunk_id(sid)
        except vineyard.StreamDrainedException:
            break
        x = c.get(cid)
        assert x.nbytes == BIG
        del x
        n += 1
    done.put((time.perf_counter(), n))
    c.close()


def drain_queue(q: Any, n: int, done: Any) -> None:
    done.put("ready")
    for _ in range(n):
        x = q.get()
        assert x.nbytes == BIG
    done.put((time.perf_counter(), n))


# ---- figures ------------------------------------------------------------------

def stream_latency(c: Any, sock: str, rounds: int) -> float:
    """One way: half the time of a chunk there and a chunk back."""
    from vineyard.io import RecordBatchStream

    a, b = RecordBatchStream.new(c).id, RecordBatchStream.new(c).id
    warm = 200
    p = mp.get_context("spawn").Process(target=echo_stream, args=(sock, int(a), int(b), warm + rounds))
    p.start()
    c.open_stream(a, "w")
    c.open_stream(b, "r")
    one = np.arange(SMALL, dtype=np.int64)

    def trip() -> None:
        c.push_chunk(a, c.put(one))
        x = c.get(c.next_chunk_id(b))
        del x

    for _ in range(warm):
        trip()
    t = time.perf_counter()
    for _ in range(rounds):
        trip()
    t = time.perf_counter() - t
    c.stop_stream(a, False)
    p.join()
    return t / rounds / 2


def socket_round_trip(rounds: int) -> float:
    d = tempfile.mkdtemp(prefix="v6d-bench-sock-")
    path = os.path.join(d, "s")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)
    warm = 500
    p = mp.get_context("spawn").Process(target=echo_socket, args=(path, warm + rounds))
    p.start()
    s, _ = srv.accept()
    msg = b"x" * 8
    for _ in range(warm):
        s.sendall(msg)
        s.recv(8)
    t = time.perf_counter()
    for _ in range(rounds):
        s.sendall(msg)
        s.recv(8)
    t = time.perf_counter() - t
    p.join()
    s.close()
    srv.close()
    return t / rounds


def queue_latency(rounds: int) -> float:
    ctx = mp.get_context("spawn")
    qa, qb = ctx.Queue(), ctx.Queue()
    warm = 200
    p = ctx.Process(target=echo_queue, args=(qa, qb, warm + rounds))
    p.start()
    one = np.arange(SMALL, dtype=np.int64)
    for _ in range(warm):
        qa.put(one)
        qb.get()
    t = time.perf_counter()
    for _ in range(rounds):
        qa.put(one)
        qb.get()
    t = time.perf_counter() - t
    p.join()
    return t / rounds / 2


def stream_throughput(c: Any, sock: str, n: int) -> float:
    """Bytes per second from the first put to the reader's last get."""
    from vineyard.io import RecordBatchStream

    sid = RecordBatchStream.new(c, capacity=8).id
    ctx = mp.get_context("spawn")
    done = ctx.Queue()
    p = ctx.Process(target=drain_stream, args=(sock, int(sid), done))
    p.start()
    assert done.get() == "ready"
    arr = np.random.default_rng(0).integers(0, 255, BIG, dtype=np.uint8)
    c.open_stream(sid, "w")
    t = time.perf_counter()
    for _ in range(n):
        c.push_chunk(sid, c.put(arr))
    c.stop_stream(sid, False)
    end, got = done.get()
    p.join()
    assert got == n
    return n * BIG / (end - t)


def queue_throughput(n: int) -> float:
    ctx = mp.get_context("spawn")
    q, done = ctx.Queue(maxsize=8), ctx.Queue()
    p = ctx.Process(target=drain_queue, args=(q, n, done))
    p.start()
    assert done.get() == "ready"
    arr = np.random.default_rng(0).integers(0, 255, BIG, dtype=np.uint8)
    t = time.perf_counter()
    for _ in range(n):
        q.put(arr)
    end, got = done.get()
    p.join()
    assert got == n
    return n * BIG / (end - t)


def memcpy_rate() -> float:
    src = np.random.default_rng(0).integers(0, 255, BIG, dtype=np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)

    def once() -> float:
        t = time.perf_counter()
        np.copyto(dst, src)
        return time.perf_counter() - t

    return BIG / best(once, 50)


RAY_SCRIPT = """
import json, sys, time
import numpy as np
import ray
n, big = int(sys.argv[1]), int(sys.argv[2])
ray.init(num_cpus=2, include_dashboard=False, object_store_memory=max(16 * big, 96 << 20))

@ray.remote(num_returns="streaming")
def produce(n):
    arr = np.random.default_rng(0).integers(0, 255, big, dtype=np.uint8)
    for _ in range(n):
        yield arr

for ref in produce.remote(8):  # warm
    ray.get(ref)
t = time.perf_counter()
got = 0
for ref in produce.remote(n):
    x = ray.get(ref)
    assert x.nbytes == big
    del x
    got += 1
t = time.perf_counter() - t
print(json.dumps({"ray_generator_4MiB_GBps": n * big / t / 1e9}))
ray.shutdown()
"""


def ray_throughput(n: int) -> dict[str, Any]:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from harness import agents

    try:
        with open(os.path.join(tempfile.gettempdir(), "v6d-ray-venv.log"), "w") as log:
            python = agents.ensure_venv("ray", log)
    except agents.Skip as e:
        return {"ray": f"skipped: {e}"}
    proc = subprocess.run([python, "-c", RAY_SCRIPT, str(n), str(BIG)], check=False, capture_output=True, text=True,
                          timeout=1200, env=agents.environment("ray"))
    if proc.returncode != 0:
        return {"ray": "failed: " + " | ".join(proc.stderr.strip().splitlines()[-3:])}
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()
    rounds = 500 if args.quick else 3000
    n = 50 if args.quick else 250

    import vineyard
    from vineyard.deploy import launch

    root = tempfile.mkdtemp(prefix="v6d-stream-bench-")
    r: dict[str, Any] = {}
    with launch("512Mi", os.path.join(root, "v.sock"), quiet=True) as d:
        c = vineyard.connect(d.socket)
        r["stream_latency_us"] = stream_latency(c, d.socket, rounds) * 1e6
        r["socket_round_trip_us"] = socket_round_trip(rounds) * 1e6
        r["queue_latency_us"] = queue_latency(rounds) * 1e6
        r["stream_4MiB_GBps"] = stream_throughput(c, d.socket, n) / 1e9
        r["memcpy_4MiB_GBps"] = memcpy_rate() / 1e9
        r["queue_4MiB_GBps"] = queue_throughput(n) / 1e9
        c.close()
    if not args.no_ray:
        r.update(ray_throughput(n))
    r["latency_vs_socket_rt"] = r["stream_latency_us"] / r["socket_round_trip_us"]
    r["throughput_vs_memcpy"] = r["stream_4MiB_GBps"] / r["memcpy_4MiB_GBps"]
    r["throughput_vs_queue"] = r["stream_4MiB_GBps"] / r["queue_4MiB_GBps"]
    if "ray_generator_4MiB_GBps" in r:
        r["throughput_vs_ray"] = r["stream_4MiB_GBps"] / r["ray_generator_4MiB_GBps"]
    print(json.dumps(r, indent=1))
    print(f"streams: small-chunk push->pull {r['stream_latency_us']:.1f} us = {r['latency_vs_socket_rt']:.2f}x a "
          f"Python socket round trip ({r['socket_round_trip_us']:.1f} us; goal <= 2x); mp.Queue one way "
          f"{r['queue_latency_us']:.1f} us")
    print(f"streams: 4 MiB chunks {r['stream_4MiB_GBps']:.2f} GB/s = {r['throughput_vs_memcpy']:.2f}x warm memcpy "
          f"({r['memcpy_4MiB_GBps']:.2f} GB/s; goal >= 0.6x), {r['throughput_vs_queue']:.1f}x mp.Queue "
          f"({r['queue_4MiB_GBps']:.2f} GB/s)"
          + (f", {r['throughput_vs_ray']:.1f}x Ray's streaming generator" if "throughput_vs_ray" in r else
             f"; Ray: {r.get('ray', 'not run')}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
