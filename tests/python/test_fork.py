"""vineyard in a forked child raises ForkError at once, never hangs.

The Go runtime inside libv6d does not survive fork(). Before the fix
``vineyard.connect()`` in a child forked after the parent connected returned
a closed client (libv6d's connect ran Go code in the child and "worked"),
and C calls hung after about a thousand. Now ``vineyard.connect()`` and
every client method raise :class:`vineyard.ForkError` naming the fix, and
libv6d itself answers V6D_FORKED in such a child (tests/c/test_fork_c.py).
Each child runs in a fresh interpreter (``subprocess``) so that a hang fails
by the timeouts, not by stalling the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

# What a Client offers, and how the test calls it in the child: every public
# name must be listed (test_every_client_method_is_covered), so a new method
# cannot skip the fork check unnoticed.
CALLS = {
    "timeout": "c.timeout",
    "create_blob": "c.create_blob(8)",
    "create_empty_blob": "c.create_empty_blob()",
    "get_blob": "c.get_blob(blob)",
    "get_blobs": "c.get_blobs([blob])",
    "create_metadata": "c.create_metadata(meta)",
    "get_meta": "c.get_meta(oid)",
    "get_metas": "c.get_metas([oid])",
    "list_metadatas": "c.list_metadatas()",
    "list_objects": "c.list_objects()",
    "delete": "c.delete(oid)",
    "exists": "c.exists(oid)",
    "persist": "c.persist(oid)",
    "if_persist": "c.if_persist(oid)",
    "shallow_copy": "c.shallow_copy(oid)",
    "migrate": "c.migrate(oid)",
    "label": "c.label(oid, 'k', 'v')",
    "put_name": "c.put_name(oid, 'fork-name')",
    "get_name": "c.get_name('fork-name')",
    "drop_name": "c.drop_name('fork-name')",
    "list_names": "c.list_names()",
    "status": "c.status",
    "version": "c.version",
    "meta": "c.meta",
    "clear": "c.clear()",
    "reset": "c.reset()",
    "memory_trim": "c.memory_trim()",
    "put": "c.put(np.arange(3))",
    "get_object": "c.get_object(oid)",
    "is_shared_memory": "c.is_shared_memory(arr)",
    "fork": "c.fork()",
    "sync_meta": "c.sync_meta()",
    "create_remote_blob": "c.create_remote_blob(vineyard.RemoteBlobBuilder(4))",
    "get_remote_blob": "c.get_remote_blob(blob)",
    "get_remote_blobs": "c.get_remote_blobs([blob])",
    "create_stream": "c.create_stream(oid)",
    "open_stream": "c.open_stream(oid, 'r')",
    "push_chunk": "c.push_chunk(oid, oid)",
    "next_chunk_id": "c.next_chunk_id(oid)",
    "next_chunk_meta": "c.next_chunk_meta(oid)",
    "next_chunk": "c.next_chunk(oid)",
    "new_buffer_chunk": "c.new_buffer_chunk(oid, 8)",
    "next_buffer_chunk": "c.next_buffer_chunk(oid)",
    "stop_stream": "c.stop_stream(oid, False)",
    "drop_stream": "c.drop_stream(oid)",
    "evict": "c.evict([oid])",
    "load": "c.load([oid])",
    "unpin": "c.unpin([oid])",
}
# Names that work in a forked child, without Go (tests/python/test_fork_read.py).
FORKED_READS = {
    "get": "objects the daemon published, pinned in the parent's pin page",
}
# Names that need no library: they answer from Python state.
NO_LIBRARY = {
    "connected": "False in a forked child (it never blocks nor raises)",
    "close": "forgets the handle; the connection is the parent's",
    "is_ipc": "how the client was connected",
    "is_rpc": "how the client was connected",
    "remote_instance_id": "the instance id read at connect",
    "spread": "upstream's flag, kept in Python",
    "with_spread": "sets the flag for a block",
    "compression": "upstream's flag, kept in Python",
    "with_compression": "sets the flag for a block",
}


def _run(code: str, timeout: float = 90) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=timeout, env=dict(os.environ), check=False)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the forked child hung: {e.stderr!r}")


def test_every_client_method_is_covered():
    import vineyard

    public = {n for n in dir(vineyard.Client) if not n.startswith("_")}
    assert public == set(CALLS) | set(FORKED_READS) | set(NO_LIBRARY)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("parent", ["connected", "closed"])
def test_connect_in_a_forked_child_raises_fork_error(vineyard_socket, parent):
    # The library is loaded by the parent's connect; whether the parent still
    # holds that client or closed it, the child cannot use libv6d.
    r = _run(f"""
        import os, sys, warnings
        import vineyard
        warnings.simplefilter("ignore", DeprecationWarning)
        c = vineyard.connect({vineyard_socket!r})
        if {parent!r} == "closed":
            c.close()
        pid = os.fork()
        if pid == 0:
            for _ in range(2000):  # a hang came after ~1,000 calls
                try:
                    got = vineyard.connect({vineyard_socket!r})
                except vineyard.ForkError as e:
                    if "spawn" not in str(e) or e.code != vineyard.errors.Status.FORKED:
                        os._exit(3)
                    continue
                except BaseException as e:
                    print("child raised", repr(e), file=sys.stderr, flush=True)
                    os._exit(4)
                print("child connected:", got, file=sys.stderr, flush=True)
                os._exit(5)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert vineyard.connect({vineyard_socket!r}).connected  # the parent goes on
        sys.exit(os.waitstatus_to_exitcode(status))
    """)
    assert r.returncode == 0, r.stderr


@pytest.mark.timeout(120)
def test_every_client_method_in_a_forked_child_raises_fork_error(vineyard_socket):
    r = _run(f"""
        import os, sys, warnings
        import numpy as np, vineyard
        warnings.simplefilter("ignore", DeprecationWarning)
        c = vineyard.connect({vineyard_socket!r})
        oid = c.put(np.arange(3))
        meta = c.get_meta(oid)
        blob = c.create_blob(8).seal(c)
        arr = c.get(oid)
        calls = {CALLS!r}
        pid = os.fork()
        if pid == 0:
            bad = []
            for name, expr in calls.items():
                try:
                    eval(expr)
                except vineyard.ForkError as e:
                    if "spawn" not in str(e):
                        bad.append(f"{{name}}: ForkError without the fix: {{e}}")
                except BaseException as e:
                    bad.append(f"{{name}}: {{e!r}}")
                else:
                    bad.append(f"{{name}}: no error")
            if c.connected:
                bad.append("connected: True")
            print("\\n".join(bad), file=sys.stderr, flush=True)
            os._exit(1 if bad else 0)
        _, status = os.waitpid(pid, 0)
        assert c.get(oid).tolist() == [0, 1, 2]  # the parent goes on
        sys.exit(os.waitstatus_to_exitcode(status))
    """)
    assert r.returncode == 0, r.stderr
