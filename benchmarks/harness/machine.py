"""What a run ran on: CPU, memory, kernel, toolchains, the checkout, the load."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from typing import Any


def _run(argv: list[str]) -> str | None:
    try:
        out = subprocess.run(argv, check=False, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def info(root: str) -> dict[str, Any]:
    import numpy as np

    versions = {"python": platform.python_version(), "numpy": np.__version__,
                "go": (_run(["go", "version"]) or "unknown").replace("go version ", "")}
    for mod in ("pandas", "pyarrow"):
        try:
            versions[mod] = __import__(mod).__version__
        except ImportError:
            versions[mod] = "missing"
    commit = _run(["git", "-C", root, "rev-parse", "--short", "HEAD"]) or "unknown"
    if _run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"]):
        commit += " (modified)"
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_bytes": _ram_bytes(),
        "kernel": platform.release(),
        "versions": versions,
        "commit": commit,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "argv": [os.path.relpath(sys.argv[0], root)] + sys.argv[1:],
        "load_before": load(),
    }
