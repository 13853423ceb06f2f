"""The C figures: benchmarks/c/bench.c, compiled against include/v6d.h and build/libv6d.so.

- C socket round trip: ``bench echo-client`` against ``bench echo-server`` (two processes).
- C client: ``bench v6d`` with a producer and a consumer connection (one process):
  put (create+write+seal), get (+release) of a blob the other connection made, and the
  create+seal+get cycle.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from . import daemons

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "benchmarks" / "c" / "bench.c"
CFLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror"]


def build(lib: Path, out: Path) -> Path:
    """Compiles bench.c (warnings are errors) and returns the program's path."""
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = ["gcc", *CFLAGS, f"-I{ROOT / 'include'}", str(SOURCE), "-o", str(out),
            f"-L{lib.parent}", "-lv6d", f"-Wl,-rpath,{lib.parent}"]
    proc = subprocess.run(argv, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{proc.stdout}")
    return out


def socket_rtt(program: Path, trials: int, inner: int) -> list[float]:
    """Seconds per 64-byte round trip between two C processes."""
    with tempfile.TemporaryDirectory(prefix="v6d-bench-") as tmp:
        path = os.path.join(tmp, "echo.sock")
        server = subprocess.Popen([str(program), "echo-server", path], stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            if server.stdout.readline().strip() != "ready":
                raise RuntimeError("bench echo-server did not start")
            out = subprocess.run([str(program), "echo-client", path, str(trials), str(inner)],
                                 stdout=subprocess.PIPE, text=True, check=True, timeout=600)
            return json.loads(out.stdout)["rtt"]
        finally:
            server.wait(30)


def client(program: Path, daemon_binary: str, sizes: list[int], trials: int, inner: int,
           log: str | None = None) -> dict[int, dict[str, list[float]]]:
    """{size: {"put"|"get"|"cycle"|"put1"|"cycle1": seconds per op, one per trial}} against a fresh daemon."""
    d = daemons.ours(daemon_binary, 256 << 20, log=log)
    try:
        out = subprocess.run([str(program), "v6d", d.socket, str(trials), str(inner), *map(str, sizes)],
                             check=False, capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"bench v6d failed ({out.returncode}): {out.stderr.strip()}")
        return {int(k): v for k, v in json.loads(out.stdout)["sizes"].items()}
    finally:
        d.stop()
