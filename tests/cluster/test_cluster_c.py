"""The cluster from C: v6d_instance_id and v6d_cluster_meta against three
daemons sharing etcd (tests/cluster/cluster_meta_test.c)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from cluster_helpers import ROOT, Cluster


def test_cluster_meta_from_c(cluster: Cluster, tmp_path: Path) -> None:
    lib = Path(os.environ.get("V6D_LIBRARY", str(ROOT / "build" / "libv6d.so")))
    exe = tmp_path / "cluster_meta_test"
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{ROOT / 'include'}",
                    str(Path(__file__).with_name("cluster_meta_test.c")), "-o", str(exe),
                    f"-L{lib.parent}", "-lv6d", f"-Wl,-rpath,{lib.parent}"], check=True)
    sockets = [d.socket for d in (cluster.a, cluster.b, cluster.c)]
    r = subprocess.run([str(exe), *sockets], check=False, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr
