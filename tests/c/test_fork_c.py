"""libv6d in a forked child fails fast (V6D_FORKED), in C.

The Go runtime inside libv6d does not survive fork(): before the C shim's
fork guard, a child's v6d_connect returned OK and a later call hung forever
in a futex wait. tests/c/fork_test.c makes the child call v6d_connect and
others thousands of times; a hang fails by the timeouts here.
"""

from __future__ import annotations

import subprocess

import pytest


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["connected", "loaded", "raw"])
def test_every_call_in_a_forked_child_fails_fast(c_daemon, c_programs, mode):
    try:
        r = subprocess.run([str(c_programs / "fork_test"), mode, c_daemon], capture_output=True, text=True,
                           timeout=90, check=False)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"fork_test {mode} hung (a call in the forked child entered Go): {e.stderr!r}")
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr)
