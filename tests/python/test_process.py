"""Processes, signals, notebooks-style init, user types, editable installs."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import sysconfig
import textwrap
import time
import venv
from pathlib import Path

import numpy as np
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
