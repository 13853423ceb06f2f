"""Distributed training over vineyard: two daemons in one cluster, a dataset
stored as a global object, two torch DDP trainers (CPU, gloo), each reading
the partitions its own daemon holds, zero-copy.

    python examples/python/ddp_train.py          # from a checkout, after `make build`; needs torch

What it does:

1. starts etcd (build/v6d-etcd, or env V6D_ETCD; or uses --etcd-endpoint)
   and two vineyardd with --meta etcd (env VINEYARDD, or build/vineyardd);
2. stores a synthetic classification dataset as four partitions, two on each
   daemon, and a persisted ``vineyard::GlobalTensor`` over them named
   ``ddp-example-dataset``;
3. runs two trainer processes, rank r connected to daemon r: each gets the
   global object by name, which gives the partitions of its own daemon as
   read-only NumPy views of that daemon's shared memory (checked with
   ``client.is_shared_memory``), wraps them with ``torch.from_numpy`` (no
   copy) and trains a logistic regression under DistributedDataParallel;
4. checks that both ranks end with the same weights (DDP averaged their
   gradients) and an accuracy above 90 %, and prints one line per rank.

In a real deployment each machine runs its own daemon and trainer; only the
sockets and the etcd endpoint change.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

NAME = "ddp-example-dataset"
FEATURES = 8
ROWS = 4096  # per partition
PARTITIONS_PER_DAEMON = 2


def make_dataset(clients: list) -> tuple[int, int]:
    """Stores the partitions (PARTITIONS_PER_DAEMON on each daemon) and the
    global object over them; returns (its id, the number of partitions)."""
    from vineyard.data.global_objects import make_global_tensor

    rng = np.random.default_rng(7)
    truth = rng.normal(size=FEATURES).astype(np.float32)
    ids = []
    for client in clients:
        for _ in range(PARTITIONS_PER_DAEMON):
            x = rng.normal(size=(ROWS, FEATURES)).astype(np.float32)
            y = (x @ truth > 0).astype(np.float32)
            part = np.concatenate([x, y[:, None]], axis=1)  # features, then the label
            oid = client.put(part)
            client.persist(oid)
            ids.append(oid)
    gid = make_global_tensor(clients[0], ids).id
    clients[0].put_name(gid, NAME)
    return int(gid), len(ids)


def train(rank: int, world: int, sock: str, rendezvous: str, epochs: int) -> dict:
    """One trainer: the partitions of its daemon, zero-copy, under DDP."""
    import torch
    import torch.distributed as dist
    import vineyard
    from torch.nn.parallel import DistributedDataParallel

    client = vineyard.connect(sock)
    gid = client.get_name(NAME)
    total = int(client.get_meta(gid)["partitions_-size"])
    parts = client.get(gid)  # a global object's get: the partitions stored on this daemon
    zero_copy = all(client.is_shared_memory(p) for p in parts)
    with warnings.catch_warnings():
        # The views are read-only; training never writes its inputs.
        warnings.filterwarnings("ignore", message=".*not writable.*")
        tensors = [torch.from_numpy(p) for p in parts]
    zero_copy = zero_copy and all(t.data_ptr() == p.ctypes.data for t, p in zip(tensors, parts))

    # A file rendezvous (on several machines: tcp://host:port of rank 0);
    # gloo's own connections use the interface GLOO_SOCKET_IFNAME names.
    dist.init_process_group("gloo", init_method=rendezvous, rank=rank, world_size=world)
    torch.manual_seed(0)  # the same initial weights on every rank
    model = DistributedDataParallel(torch.nn.Linear(FEATURES, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    loss_fn = torch.nn.BCEWithLogitsLoss()

    def evaluate() -> tuple[float, float]:
        with torch.no_grad():
            x = torch.cat([t[:, :FEATURES] for t in tensors])
            y = torch.cat([t[:, FEATURES:] for t in tensors])
            out = model.module(x)
            return float(loss_fn(out, y)), float(((out > 0).float() == y).float().mean())

    first_loss, _ = evaluate()
    batch = 256
    for _ in range(epochs):
        for t in tensors:  # every rank holds as many rows: the same number of steps
            for i in range(0, t.shape[0], batch):
                rows = t[i:i + batch]  # a view: no copy of the partition
                optimizer.zero_grad()
                loss_fn(model(rows[:, :FEATURES]), rows[:, FEATURES:]).backward()
                optimizer.step()
    loss, accuracy = evaluate()
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.zeros_like(weights) for _ in range(world)]
    dist.all_gather(gathered, weights)
    same = all(torch.equal(g, gathered[0]) for g in gathered)
    dist.destroy_process_group()
    return {"rank": rank, "instance": int(client.instance_id), "local": len(parts), "partitions": total,
            "zero_copy": bool(zero_copy), "loss": [round(first_loss, 4), round(loss, 4)],
            "accuracy": round(accuracy, 4), "weights_equal_across_ranks": bool(same)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--etcd-endpoint", help="an etcd to use instead of starting build/v6d-etcd")
    parser.add_argument("--trainer", nargs=4, metavar=("RANK", "WORLD", "SOCKET", "RENDEZVOUS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trainer:
        rank, world, sock, rendezvous = args.trainer
        print(json.dumps(train(int(rank), int(world), sock, rendezvous, args.epochs)), flush=True)
        return 0

    import vineyard
    from local_cluster import daemons

    with daemons(2, etcd_endpoint=args.etcd_endpoint) as sockets:
        clients = [vineyard.connect(sock) for sock in sockets]
        gid, n = make_dataset(clients)
        print(f"dataset: global object {vineyard.ObjectID(gid)!r} named {NAME!r}, {n} partitions of "
              f"{ROWS} rows on {len(sockets)} daemons")
        rendezvous = tempfile.mkdtemp(prefix="v6d-ddp-", dir="/tmp")
        env = {**os.environ, "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME", "lo")}  # one machine here
        trainers = [subprocess.Popen([sys.executable, __file__, "--epochs", str(args.epochs), "--trainer",
                                      str(rank), str(len(sockets)), sock, f"file://{rendezvous}/store"],
                                     stdout=subprocess.PIPE, text=True, env=env)
                    for rank, sock in enumerate(sockets)]
        try:
            # A trainer that fails leaves the others waiting for it: stop them.
            while any(p.poll() is None for p in trainers) and all(p.poll() in (None, 0) for p in trainers):
                time.sleep(0.1)
            failed = [p.returncode for p in trainers if p.poll() not in (None, 0)]
            if failed:
                print(f"a trainer failed with status {failed[0]}", file=sys.stderr)
                return 1
            results = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in trainers]
        finally:
            for p in trainers:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            shutil.rmtree(rendezvous, ignore_errors=True)
    ok = len({r["instance"] for r in results}) == len(results)
    for r in results:
        print(f"rank {r['rank']}: daemon instance {r['instance']}, read {r['local']} of {r['partitions']} "
              f"partitions (its own), zero-copy {r['zero_copy']}, loss {r['loss'][0]} -> {r['loss'][1]}, "
              f"accuracy {r['accuracy']:.1%}, weights equal across ranks {r['weights_equal_across_ranks']}")
        ok = ok and r["zero_copy"] and r["weights_equal_across_ranks"] and r["accuracy"] > 0.9 \
            and r["local"] == PARTITIONS_PER_DAEMON and r["loss"][1] < r["loss"][0]
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
