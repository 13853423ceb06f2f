#!/usr/bin/env python3
"""Cluster figures (issue 11, item 10): persist latency, the time until another
daemon sees a persisted object, listing 10,000 persisted objects, and the start
of a daemon joining a prefix that holds them.

    benchmarks/cluster.py [--objects 10000] [--trials 200]

Starts build/v6d-etcd and build/vineyardd --meta etcd processes of its own (env
V6D_ETCD / VINEYARDD override them) and prints one line per figure, with a local
get_meta round trip measured in the same run as the yardstick (times on these
small virtual machines drift between runs; compare ratios).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

import numpy as np
import vineyard
import vineyard.deploy


def _binary(env: str, name: str) -> str:
    path = os.environ.get(env) or str(ROOT / "build" / name)
    if not os.access(path, os.X_OK):
        sys.exit(f"cluster bench: {path} is missing: run 'make build'")
    return path


class Bench:
    def __init__(self, tmp: str) -> None:
        self.tmp = tmp
        self.procs: list[subprocess.Popen] = []
        self.daemons: list[vineyard.deploy.Daemon] = []
        url = os.path.join(tmp, "etcd.url")
        etcd = subprocess.Popen([_binary("V6D_ETCD", "v6d-etcd"), "-data-dir", os.path.join(tmp, "etcd"),
                                 "-endpoint-file", url], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(etcd)
        while not (os.path.exists(url) and os.path.getsize(url) > 0):
            if etcd.poll() is not None:
                sys.exit("cluster bench: v6d-etcd did not start")
            time.sleep(0.02)
        self.endpoint = Path(url).read_text().strip()

    def daemon(self, name: str) -> tuple[str, float]:
        """Starts a daemon; returns its socket and the seconds until it listened."""
        sock = os.path.join(self.tmp, f"{name}.sock")
        t0 = time.perf_counter()
        try:
            d = vineyard.deploy.launch("256Mi", sock, ["--meta", "etcd", "--etcd-endpoint", self.endpoint,
                                                        "--etcd-prefix", "bench", "--rpc-socket-port", "0"],
                                       binary=_binary("VINEYARDD", "vineyardd"), quiet=True)
        except vineyard.deploy.DaemonError as e:
            sys.exit(f"cluster bench: {e}")
        self.daemons.append(d)
        return sock, time.perf_counter() - t0

    def close(self) -> None:
        for d in reversed(self.daemons):
            d.stop()
        for p in reversed(self.procs):
            p.terminate()
            p.wait()


def _us(xs: list[float]) -> str:
    xs = sorted(xs)
    return f"median {statistics.median(xs) * 1e6:8.0f} us, p90 {xs[int(len(xs) * 0.9)] * 1e6:8.0f} us"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--objects", type=int, default=10000)
    p.add_argument("--trials", type=int, default=200)
    args = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="v6d-cluster-bench-")
    bench = Bench(tmp)
    try:
        a_sock, _ = bench.daemon("a")
        b_sock, _ = bench.daemon("b")
        a, b = vineyard.connect(a_sock), vineyard.connect(b_sock)
        small = np.arange(16)

        local, persist, seen = [], [], []
        for _ in range(args.trials):
            oid = a.put(small)
            t0 = time.perf_counter()
            a.get_meta(oid)
            local.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            a.persist(oid)
            t1 = time.perf_counter()
            b.get_meta(oid)  # not known on b: b catches up with etcd first
            t2 = time.perf_counter()
            persist.append(t1 - t0)
            seen.append(t2 - t0)
        print(f"local get_meta round trip (yardstick):   {_us(local)}")
        print(f"persist (one etcd transaction):           {_us(persist)}  "
              f"= {statistics.median(persist) / statistics.median(local):.0f}x the yardstick")
        print(f"persist on A, then get_meta on B found:   {_us(seen)}")

        n = args.objects
        t0 = time.perf_counter()
        items = []
        for i in range(n):
            m = vineyard.ObjectMeta()
            m["typename"] = "bench::Item"
            m["i"] = i
            items.append(a.create_metadata(m).id)
        root = vineyard.ObjectMeta()
        root["typename"] = "bench::Root"
        for i, oid in enumerate(items):
            root.add_member(f"m{i}", oid)
        root_id = a.create_metadata(root).id
        t1 = time.perf_counter()
        a.persist(root_id)
        t2 = time.perf_counter()
        print(f"create {n} small objects on A:            {t1 - t0:8.2f} s")
        print(f"persist them (one tree, split txns):      {t2 - t1:8.2f} s")
        lists = []
        for _ in range(5):
            t0 = time.perf_counter()
            got = b.list_metadatas("bench::Item", limit=0)
            lists.append(time.perf_counter() - t0)
            assert len(got) == n, len(got)
        print(f"list {n} persisted objects on B:          median {statistics.median(lists) * 1e3:8.1f} ms")
        t0 = time.perf_counter()
        c_sock, listening = bench.daemon("c")
        c = vineyard.connect(c_sock)
        assert len(c.list_metadatas("bench::Item", limit=0)) == n  # waits for c's first read of etcd
        full = time.perf_counter() - t0
        print(f"new daemon, {n + 1} trees in etcd: listening {listening:6.2f} s, first list complete {full:6.2f} s")
    finally:
        bench.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
