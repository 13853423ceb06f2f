"""Dask on vineyard across two daemons: a dask DataFrame stored partition by
partition on the daemons of the Dask workers that computed it, then read back
as a dask DataFrame whose partitions are zero-copy views on those workers.

    python examples/python/dask_dataframe.py     # from a checkout, after `make build`; needs dask[distributed]

docs/integrations.md walks through it. On real machines each Dask worker is
started with VINEYARD_IPC_SOCKET naming its machine's daemon; here a
LocalCluster's two workers are bound to two daemons with bind_workers.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--etcd-endpoint", help="an etcd to use instead of starting build/v6d-etcd")
    args = parser.parse_args()

    import dask.dataframe as dd
    import vineyard
    from dask.distributed import Client, LocalCluster
    from local_cluster import daemons
    from vineyard.contrib.dask import bind_workers, dask_context

    with daemons(2, etcd_endpoint=args.etcd_endpoint) as sockets, \
            LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as dask_client:
        workers = sorted(dask_client.scheduler_info()["workers"])
        instance_of = bind_workers(dask_client, dict(zip(workers, sockets)))
        print("workers and their daemons:", instance_of)

        rng = np.random.default_rng(0)
        pdf = pd.DataFrame({"store": rng.integers(0, 10, 100_000), "sales": rng.random(100_000)})
        ddf = dd.from_pandas(pdf, npartitions=8)

        client = vineyard.connect(sockets[0])
        with dask_context():
            # Each partition goes to the daemon of the worker that computed it.
            gid = client.put(ddf, dask_client=dask_client)
            meta = client.get_meta(gid)
            placed = [meta.member(f"partitions_-{i}").instance_id for i in range(meta["partitions_-size"])]
            print(f"stored {gid!r}: {meta.typename}, partitions on instances {placed}")

            # Any client of the cluster gets it back as a dask DataFrame; each
            # partition is read on a worker of the daemon that holds it.
            got = vineyard.connect(sockets[1]).get(gid, dask_client=dask_client)

        totals = got.groupby("store")["sales"].sum().compute().sort_index()
        want = pdf.groupby("store")["sales"].sum()
        pd.testing.assert_series_equal(totals, want)
        print(totals.round(2).to_string())
        print("OK: equal to pandas'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
