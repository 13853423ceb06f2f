"""CPU time of a process from the kernel's accounting (standard library only).

The harness reports CPU per operation next to each time (docs/performance.md, "CPU per
operation"): a client's own from ``time.process_time`` (all its threads, the Go
runtime's in libv6d included), a daemon's from ``/proc``: the sum of
``/proc/<pid>/task/*/schedstat`` (nanoseconds on the CPU, every live thread), which
resolves the few microseconds of a small put, or where the kernel has no schedstat the
user + system ticks of ``/proc/<pid>/stat`` (10 ms each: enough only for long trials).
"""

from __future__ import annotations

import os


def process_seconds(pid: int) -> float:
    """CPU seconds process pid spent so far (its live threads)."""
    try:
        total = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue  # the thread ended meanwhile
        if total:
            return total / 1e9
    except OSError:
        pass
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
