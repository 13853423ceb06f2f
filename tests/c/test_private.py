"""Private copy-on-write views (v6d_map_private) from C: writes stay private,
errors change nothing, and a view outlives its handle with its blob pinned."""

from __future__ import annotations

import time

from test_c_abi import run, usage


def test_private_views(c_daemon, c_programs):
    base = usage(c_programs / "abi_test", c_daemon)
    r = run(c_programs / "private_test", c_daemon)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "private ok"
    deadline = time.monotonic() + 10
    while usage(c_programs / "abi_test", c_daemon) != base:  # the process is gone: all released
        assert time.monotonic() < deadline, "memory of private_test was not released"
        time.sleep(0.05)
