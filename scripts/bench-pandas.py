#!/usr/bin/env python3
"""Quick measurement: put and get of a float64 DataFrame, against pickle
(protocol 5) through a pipe to another process. Not a test; `make bench` is
the benchmark suite.

    V6D_LIBRARY=build/libv6d.so VINEYARDD=build/vineyardd PYTHONPATH=python \\
        python3 scripts/bench-pandas.py [--rows 10000000] [--cols 10] [--repeat 5]

The arena is warmed first (put and delete the frame a few times), so that the
figures do not include the first touch of fresh pages, which dominates cold
runs on virtual machines. Prints the best and the median of --repeat runs.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import os
import pickle
import statistics
import time

import numpy as np
import pandas as pd
import vineyard
from vineyard.deploy import start_vineyardd


def _pipe_reader(conn) -> None:
    while True:
        data = conn.recv_bytes()
        if not data:
            return
        df = pickle.loads(data)
        del data
        conn.send(df.shape)


def _figure(name: str, times: list[float], nbytes: int) -> None:
    best, median = min(times), statistics.median(times)
    print(f"{name:<44} best {best * 1e3:9.2f} ms   median {median * 1e3:9.2f} ms   "
          f"{nbytes / best / 1e9:6.2f} GB/s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--cols", type=int, default=10)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()

    df = pd.DataFrame(np.random.default_rng(0).random((args.rows, args.cols)))
    nbytes = int(df.memory_usage(index=False).sum())
    print(f"frame: {args.rows} rows x {args.cols} float64 columns = {nbytes / 2**20:.0f} MiB; "
          f"copy threads: {os.environ.get('VINEYARD_COPY_THREADS', 'default')}; cpus: {os.cpu_count()}")

    dst = np.empty_like(df[0].to_numpy())
    memcpy = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        for col in df:
            np.copyto(dst, df[col].to_numpy())
        memcpy.append(time.perf_counter() - t)
    del dst
    _figure("memcpy of each column (one warm buffer)", memcpy, nbytes)

    size = f"{(2 * nbytes >> 20) + 256}Mi"
    with start_vineyardd(size=size) as sock:
        client = vineyard.connect(sock)
        puts, gets, sums = [], [], []
        for i in range(args.repeat + 2):  # the first two warm the arena up
            gc.collect()
            t = time.perf_counter()
            oid = client.put(df)
            put = time.perf_counter() - t
            t = time.perf_counter()
            got = client.get(oid)
            get = time.perf_counter() - t
            t = time.perf_counter()
            total = sum(float(got[col].to_numpy().sum()) for col in got)
            scan = time.perf_counter() - t
            assert got.shape == df.shape and total > 0
            del got
            gc.collect()
            client.delete(oid)  # frees the memory for the next put: the arena stays warm
            if i >= 2:
                puts.append(put)
                gets.append(get)
                sums.append(scan)
        _figure("vineyard put (warm arena)", puts, nbytes)
        _figure("vineyard get (zero-copy)", gets, nbytes)
        _figure("sum of every column of the got frame", sums, nbytes)

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    reader = ctx.Process(target=_pipe_reader, args=(child,))
    reader.start()
    dumps, transfers = [], []
    for _ in range(args.repeat):
        t = time.perf_counter()
        data = pickle.dumps(df, protocol=5)
        t1 = time.perf_counter()
        parent.send_bytes(data)
        del data
        assert parent.recv() == df.shape
        t2 = time.perf_counter()
        dumps.append(t1 - t)
        transfers.append(t2 - t)
    parent.send_bytes(b"")
    reader.join()
    _figure("pickle.dumps", dumps, nbytes)
    _figure("pickle through a pipe (dumps+send+recv+loads)", transfers, nbytes)


if __name__ == "__main__":
    main()
