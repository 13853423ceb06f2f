"""C programs against include/v6d.h and the real libv6d.so and daemon."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(prog: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(prog), *args], capture_output=True, text=True, timeout=60, **kw, check=False)


def usage(prog: Path, sock: str) -> int:
    r = run(prog, "usage", sock)
    assert r.returncode == 0, r.stderr
    return int(r.stdout)


def test_put_in_one_process_get_in_another(c_daemon, c_programs):
    prog = c_programs / "abi_test"
    put = run(prog, "put", c_daemon)
    assert put.returncode == 0, put.stderr
    obj, _blob = put.stdout.split()
    got = run(prog, "get", c_daemon, obj)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == f"ok {1 << 20}"


def test_get_object_into_fills_caller_memory(c_daemon, c_programs):
    prog = c_programs / "abi_test"
    put = run(prog, "put", c_daemon)
    assert put.returncode == 0, put.stderr
    got = run(prog, "getinto", c_daemon)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "getinto ok"


def test_write_through_got_pointer_faults(c_daemon, c_programs):
    prog = c_programs / "abi_test"
    put = run(prog, "put", c_daemon)
    assert put.returncode == 0, put.stderr
    _obj, blob = put.stdout.split()
    r = run(prog, "fault", c_daemon, blob)
    assert "writing" in r.stdout
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stdout, r.stderr)


def test_delete_while_other_process_holds(c_daemon, c_programs):
    prog = c_programs / "abi_test"
    put = run(prog, "put", c_daemon)
    assert put.returncode == 0, put.stderr
    obj, blob = put.stdout.split()
    holder = subprocess.Popen([str(prog), "hold", c_daemon, blob], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        d = run(prog, "delete", c_daemon, obj)
        assert d.returncode == 0, d.stderr
        out, _ = holder.communicate("go\n", timeout=30)
        assert out.strip() == "intact"
        assert holder.returncode == 0
    finally:
        if holder.poll() is None:
            holder.kill()


def test_killed_creator_leaves_usage_at_baseline(c_daemon, c_programs):
    prog = c_programs / "abi_test"
    base = usage(prog, c_daemon)
    leaker = subprocess.Popen([str(prog), "leak", c_daemon], stdout=subprocess.PIPE, text=True)
    assert leaker.stdout.readline().strip() == "created"
    assert usage(prog, c_daemon) >= base + (8 << 20)
    leaker.send_signal(signal.SIGKILL)
    leaker.wait(timeout=10)
    deadline = time.monotonic() + 10
    while usage(prog, c_daemon) != base:
        assert time.monotonic() < deadline, "memory of the killed client was not reclaimed"
        time.sleep(0.05)


def test_error_statuses(c_daemon, c_programs):
    r = run(c_programs / "abi_test", "errors", c_daemon)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "errors ok"


def test_unknown_flag_bits_are_refused(c_daemon, c_programs):
    r = run(c_programs / "abi_test", "flags", c_daemon)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "flags ok"


def test_connected_reports_a_dead_daemon(c_programs, tmp_path):
    # A daemon of its own, killed while a client holds a cached tree:
    # v6d_connected turns 0 and the cached get fails instead of answering.
    sock = str(tmp_path / "v.sock")
    daemon = subprocess.Popen([os.environ.get("VINEYARDD", str(ROOT / "build" / "vineyardd")),
                               "--socket", sock, "--size", "16Mi", "--norpc"])
    prog = None
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(sock):
            assert daemon.poll() is None and time.monotonic() < deadline, "the daemon did not start"
            time.sleep(0.01)
        prog = subprocess.Popen([str(c_programs / "abi_test"), "death", sock], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert prog.stdout.readline().strip() == "ready"
        daemon.kill()
        daemon.wait(timeout=10)
        out, err = prog.communicate("dead\n", timeout=30)
        assert prog.returncode == 0, (prog.returncode, out, err)
        assert out.strip() == "disconnected ok"
    finally:
        for p in (prog, daemon):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def test_internal_fault_poisons_the_library(c_daemon, c_programs):
    # A Go panic inside an export (an out-pointer into the unmapped first
    # page): that call returns V6D_INTERNAL, every later call too, and the
    # process neither crashes nor leaks its handle.
    r = run(c_programs / "abi_test", "poison", c_daemon)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert r.stdout.strip() == "poisoned ok"
    assert "libv6d: internal error" in r.stderr  # the stack of the fault, once
    assert r.stderr.count("libv6d: internal error") == 1
    # The daemon is unaffected: another process works.
    ok = run(c_programs / "abi_test", "errors", c_daemon)
    assert ok.returncode == 0, ok.stderr


def test_header_compiles_as_c11_and_cpp17(tmp_path):
    src_c = tmp_path / "h.c"
    src_c.write_text('#include "v6d.h"\nint main(void) { return v6d_abi_version() == 0; }\n')
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic",
                    f"-I{ROOT / 'include'}", "-c", str(src_c), "-o", str(tmp_path / "h.o")], check=True)
    src_cc = tmp_path / "h.cc"
    src_cc.write_text('#include "v6d.h"\nint main() { return v6d_abi_version() == 0; }\n')
    subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror",
                    f"-I{ROOT / 'include'}", "-c", str(src_cc), "-o", str(tmp_path / "h2.o")], check=True)
