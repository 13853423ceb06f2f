"""Processes, signals, notebooks-style init, user types, editable installs."""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
import venv
from pathlib import Path

import numpy as np
import pytest
import vineyard

ROOT = Path(__file__).resolve().parents[2]


def _child_sum(sock: str, oid: int, q) -> None:
    import vineyard as v

    q.put(int(v.connect(sock).get(oid).sum()))


def test_forkserver_children_work(client, vineyard_socket):
    oid = client.put(np.arange(1000))
    ctx = mp.get_context("forkserver")
    q = ctx.Queue()
    p = ctx.Process(target=_child_sum, args=(vineyard_socket, int(oid), q))
    p.start()
    assert q.get(timeout=60) == int(np.arange(1000).sum())
    p.join(30)
    assert p.exitcode == 0


def test_ctrl_c_interrupts_wait_for_name(vineyard_socket):
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, vineyard
        c = vineyard.connect({vineyard_socket!r})
        print("waiting", flush=True)
        try:
            c.get_name("never-appears", wait=True)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(0)
        sys.exit(3)
    """)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "waiting"
    time.sleep(0.3)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0 and "interrupted" in out
    assert time.monotonic() - start < 5


def test_init_starts_and_shutdown_stops_a_private_daemon():
    r = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import os, numpy as np, vineyard
        c = vineyard.init(size="64Mi")
        sock = os.environ["VINEYARD_IPC_SOCKET"]
        assert (c.get(c.put(np.arange(5))) == np.arange(5)).all()
        assert (vineyard.get(vineyard.put(np.arange(3))) == np.arange(3)).all()
        c.close()
        vineyard.shutdown()
        assert not os.path.exists(sock)
        print("ok")
    """)], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


def test_init_keeps_the_daemon_log_out_of_the_notebook(tmp_path):
    r = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import numpy as np, vineyard
        c = vineyard.init(size="64Mi")
        c.get(c.put(np.arange(5)))
        log = vineyard.deploy.log_path()
        print("log:", log)
        with open(log) as f:
            print("INFO in log:", "level=INFO" in f.read())
        vineyard.shutdown()
        assert vineyard.deploy.log_path() is None
    """)], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert "INFO in log: True" in r.stdout and "vineyardd.log" in r.stdout  # the daemon did log, to its file
    assert "level=" not in r.stderr and "level=" not in r.stdout, r.stderr  # and nothing reached the notebook

    # A daemon that cannot start: the error quotes its log.
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import vineyard
        try:
            vineyard.init(size="bogus", socket={str(tmp_path / "v.sock")!r})
        except RuntimeError as e:
            print("error:", e)
    """)], capture_output=True, text=True, timeout=60, check=False)
    assert "exited with status 2 before it was ready" in r.stdout and "v.sock.log" in r.stdout, r.stdout + r.stderr
    assert "size" in r.stdout.split("ends with:", 1)[1], r.stdout


class Point:
    def __init__(self, x: float, y: float) -> None:
        self.x, self.y = x, y


def test_user_registered_builder_and_resolver(client):
    def build(c, p, **kw):
        meta = vineyard.ObjectMeta({"typename": "my::Point", "x": p.x, "y": p.y})
        return c.create_metadata(meta).id

    vineyard.register_builder(Point, build)
    vineyard.register_resolver("my::Point", lambda c, tree, pin: Point(tree["x"], tree["y"]))
    got = client.get(client.put(Point(1.5, 2.5)))
    assert isinstance(got, Point) and (got.x, got.y) == (1.5, 2.5)
    assert client.get_meta(client.put(Point(0, 0))).typename == "my::Point"


def test_blob_api(client):
    b = client.create_blob(4)
    b.copy(0, b"abcd")
    bid = b.seal()
    blob = client.get_blob(bid)
    assert bytes(blob.memoryview()) == b"abcd" and blob.memoryview().readonly
    assert bytes(memoryview(blob)) == b"abcd" and memoryview(blob).readonly and blob.size == 4
    obj = client.get_object(client.put(np.arange(3)))
    assert obj.typename.startswith("vineyard::Tensor") and obj.member("buffer_").typename == "vineyard::Blob"
    empty = client.create_blob(0)
    assert empty.id == 1 << 63


def _nested_venv(env_dir: Path) -> Path:
    """A venv that sees the packages of the RUNNING interpreter (pip, setuptools,
    wheel, numpy of build/venv), not those of the base interpreter as
    system_site_packages would: a .pth file in its site-packages appends the
    running one's. Without pip of its own (ensurepip would bring the base's old
    setuptools, ahead of the running one's), it runs the running one's pip."""
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    outer = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    Path(site, "_outer_site.pth").write_text("".join(p + "\n" for p in outer))
    return py


def test_nested_venv_sees_the_running_environment(tmp_path):
    py = _nested_venv(tmp_path / "venv")
    r = subprocess.run([str(py), "-c", "import setuptools, sys; print(setuptools.__version__); print(sys.prefix)"],
                       capture_output=True, text=True, check=True, timeout=60)
    version, prefix = r.stdout.split()
    import setuptools

    assert version == setuptools.__version__ and prefix == str(tmp_path / "venv")


def test_editable_install(tmp_path):
    py = _nested_venv(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "V6D_LIBRARY", "VINEYARDD")}
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", str(ROOT)],
                   check=True, timeout=600, env=env)
    r = subprocess.run([str(py), "-c", ("import vineyard, vineyard._ffi as f, vineyard.deploy as d; "
                        "print(f.library_path()); print(d.daemon_path())")],
                       capture_output=True, text=True, timeout=60, env=env, cwd=str(tmp_path), check=False)
    assert r.returncode == 0, r.stderr
    lib, daemon = r.stdout.split()
    assert os.path.isfile(lib) and os.access(daemon, os.X_OK)


def _daemon(*args: str, binary: str | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([binary or vineyard.deploy.daemon_path(), *args], capture_output=True, text=True,
                          timeout=60, check=False, **kw)


def test_version_comes_from_the_version_file():
    want = (ROOT / "VERSION").read_text().strip()
    r = _daemon("--version")
    assert r.returncode == 0 and r.stdout == f"vineyardd {want}\n", r
    assert vineyard.__version__ == want
    lib = ctypes.CDLL(os.environ["V6D_LIBRARY"])
    lib.v6d_version.restype = ctypes.c_char_p
    assert lib.v6d_version().decode() == want


def test_python_m_vineyard_help_describes_every_flag():
    r = subprocess.run([sys.executable, "-m", "vineyard", "--help"], capture_output=True, text=True, timeout=60,
                       check=False)
    assert r.returncode == 0, r.stderr
    for s in ("python -m vineyard", "the Vineyard daemon", "Example:", "--socket", "--size", "--reserve-memory",
              "--allow-overcommit", "--meta", "--etcd-endpoint", "--rpc-socket-port", "--version"):
        assert s in r.stdout, s
    assert r.stdout.count("(default: ") >= 10


def test_upstream_flag_spellings(tmp_path):
    sock = str(tmp_path / "v.sock")
    # Accepted: upstream's spellings of the flags that exist here.
    with vineyard.deploy.launch("64Mi", sock, ["--meta=local", "--norpc", "--reserve_memory=false"], quiet=True):  # noqa: SIM117
        with vineyard.connect(sock) as c:
            assert (c.get(c.put(np.arange(4))) == np.arange(4)).all()
    # Refused: the etcd flags with --meta local, and bad values. (Without
    # --meta, an etcd flag means etcd, as upstream's: cmd/vineyardd's
    # TestOperatorCommandLine runs that against a real etcd.)
    for args, says in ((["--meta=local", "--etcd_endpoint=http://127.0.0.1:2379"], "need --meta etcd"),
                       (["--meta=local", "--etcd_prefix", "/vineyard"], "need --meta etcd"),
                       (["--rpc_socket_port=70000"], "not a port number")):
        r = _daemon(f"--socket={sock}", *args)
        assert r.returncode == 2 and says in r.stderr, (args, r.stderr)


def _thread_policies(pid: int) -> set[int]:
    policies = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            policies.add(os.sched_getscheduler(int(tid)))
        except ProcessLookupError:
            pass  # the thread ended meanwhile
    return policies


@pytest.mark.skipif(os.sched_getscheduler(0) != os.SCHED_OTHER, reason="the tests run under another policy")
def test_daemon_threads_sched_batch_modes(tmp_path):
    """--sched-batch on: every thread of the daemon, those made while it
    serves included, is SCHED_BATCH; off, and auto (the default) with a few
    clients that do not stream puts, the default policy."""
    sock = str(tmp_path / "v.sock")
    for flag, want in ((("--sched-batch", "on"), os.SCHED_BATCH), ((), os.SCHED_OTHER),
                       (("--sched-batch=off",), os.SCHED_OTHER)):
        with vineyard.deploy.launch("64Mi", sock, flag, quiet=True) as d:
            proc = d.proc
            clients = [vineyard.connect(sock) for _ in range(4)]  # threads for their connections
            for c in clients:
                assert (c.get(c.put(np.arange(4))) == np.arange(4)).all()
            assert _thread_policies(proc.pid) == {want}, (flag, _thread_policies(proc.pid))
            for c in clients:
                c.close()


def test_size_over_memory_is_refused_with_the_figures(tmp_path):
    sock = str(tmp_path / "v.sock")
    r = _daemon(f"--socket={sock}", "--size=1Ei")
    assert r.returncode == 1 and "--size 1 EiB is larger than" in r.stderr and "GiB" in r.stderr, r.stderr
    assert "--allow-overcommit" in r.stderr and not os.path.exists(sock)
    # --allow-overcommit lets the size through, but memory to reserve now must exist:
    # a message, not the OOM killer.
    r = _daemon(f"--socket={sock}", "--size=1Ei", "--allow-overcommit", "--reserve-memory")
    assert r.returncode == 1 and "--reserve-memory needs 1 EiB" in r.stderr, r.stderr


def test_private_socket_directory_is_checked(tmp_path):
    """/tmp/vineyard-$UID, the default of a user without XDG_RUNTIME_DIR: made 0700, and
    refused when another user owns it or others may write to it."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run the daemon as another user")
    uid = 65534  # nobody
    d = Path(f"/tmp/vineyard-{uid}")
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "TMPDIR", "VINEYARD_IPC_SOCKET")}
    # The checkout may lie under a directory that user cannot traverse (a
    # 0700 home or temp dir): the user runs a copy of the daemon from a
    # directory everyone can read.
    bindir = Path(tempfile.mkdtemp(prefix="v6d-bin-", dir="/tmp"))
    bindir.chmod(0o755)
    daemon_bin = bindir / "vineyardd"
    shutil.copy(vineyard.deploy.daemon_path(), daemon_bin)
    daemon_bin.chmod(0o755)
    shutil.rmtree(d, ignore_errors=True)
    try:
        d.mkdir()
        d.chmod(0o777)  # made by root, before the user's daemon
        r = _daemon("--size=16Mi", user=uid, env=env, binary=str(daemon_bin))
        assert r.returncode == 1 and "owned by uid 0" in r.stderr and f"rm -rf {d}" in r.stderr, r.stderr
        os.chown(d, uid, -1)  # the user's own, but world-writable
        r = _daemon("--size=16Mi", user=uid, env=env, binary=str(daemon_bin))
        assert r.returncode == 1 and f"chmod 0700 {d}" in r.stderr, r.stderr
        d.rmdir()
        with vineyard.deploy.launch("16Mi", "", user=uid, env=env, quiet=True, binary=str(daemon_bin)) as daemon:
            assert daemon.socket == str(d / "vineyard.sock")
            st = d.stat()
            assert st.st_uid == uid and (st.st_mode & 0o777) == 0o700
    finally:
        shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(bindir, ignore_errors=True)


def test_launch_reports_a_daemon_that_cannot_start(tmp_path):
    """vineyard.deploy.launch waits for the daemon's READY line, not for its
    socket: a daemon that cannot bind (another one serves the socket) fails
    at once with its own words, not a timeout."""
    sock = str(tmp_path / "v.sock")
    with vineyard.deploy.launch("16Mi", sock, quiet=True) as first:
        assert first.socket == sock and first.rpc_endpoint is None and first.proc.poll() is None
        with pytest.raises(vineyard.deploy.DaemonError) as err:
            vineyard.deploy.launch("16Mi", sock, quiet=True, timeout=600)
        assert err.value.returncode == 1 and "another daemon is serving" in err.value.output, err.value
        with vineyard.connect(sock) as c:  # the first one is untouched
            assert (c.get(c.put(np.arange(3))) == np.arange(3)).all()
    assert first.proc.returncode == 0 and not os.path.exists(sock)


def test_launch_learns_the_rpc_port(tmp_path):
    """With --rpc-socket-port 0 the READY line names the port it bound."""
    with vineyard.deploy.launch("16Mi", str(tmp_path / "v.sock"), ["--rpc-socket-port=0"], quiet=True) as d:
        host, port = d.rpc_endpoint.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        with vineyard.connect(d.socket) as c:
            assert c.instance_id == d.instance_id
