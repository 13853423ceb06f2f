"""Spilling (docs/design.md, "Spilling"): a daemon with a 64 MiB arena and
--spill-path takes four times its size of arrays and gives every one back,
to other processes, intact; held views never spill; faults lose nothing."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
import vineyard
from vineyard.deploy import launch

SIZE = 64 << 20
ARRAY = 4 << 20  # bytes per array


def _array(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**63, ARRAY // 8, dtype=np.uint64)


def _crc(a: np.ndarray) -> int:
    return zlib.crc32(memoryview(np.ascontiguousarray(a)).cast("B"))


def _spill_files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".spill"))


@pytest.fixture
def spill_dir(tmp_path: Path) -> Path:
    return tmp_path / "spill"


def _daemon(tmp_path: Path, spill_dir: Path, *extra: str, binary: str | None = None):
    return launch("64Mi", str(tmp_path / "vineyard.sock"), ["--spill-path", str(spill_dir), *extra],
                  quiet=True, binary=binary)


READER = textwrap.dedent("""
    import json, sys, zlib
    import numpy as np
    import vineyard
    c = vineyard.connect(sys.argv[1])
    bad = []
    for oid, crc in json.loads(sys.stdin.read()):
        a = c.get(vineyard.ObjectID(oid))
        if zlib.crc32(memoryview(np.ascontiguousarray(a)).cast("B")) != crc:
            bad.append(oid)
        del a
    print(json.dumps(bad))
""")


def test_four_times_the_arena_read_back_by_other_processes(tmp_path, spill_dir):
    with _daemon(tmp_path, spill_dir) as d:
        c = vineyard.connect(d.socket)
        held_arr = _array(10_000)
        held_id = c.put(held_arr)
        held = c.get(held_id)  # a view held while pressure builds
        objs = []
        for i in range(4 * SIZE // ARRAY):
            a = _array(i)
            objs.append((int(c.put(a)), _crc(a)))
            del a
        st = c.status
        assert st.spilled_objects > 0 and st.spilled_bytes > 0, st
        assert np.array_equal(held, held_arr)
        assert _spill_files(spill_dir)
        assert all(stat.S_IMODE(os.stat(spill_dir / f).st_mode) == 0o600 for f in _spill_files(spill_dir))
        half = len(objs) // 2
        procs = [subprocess.run([sys.executable, "-c", READER, d.socket], input=json.dumps(part),
                                check=False, capture_output=True, text=True, timeout=600)
                 for part in (objs[:half], objs[half:])]
        for p in procs:
            assert p.returncode == 0, p.stderr
            assert json.loads(p.stdout.strip().splitlines()[-1]) == []
        del held
        c.close()


def test_evict_load_unpin(tmp_path, spill_dir):
    with _daemon(tmp_path, spill_dir) as d:
        c = vineyard.connect(d.socket)
        a = _array(1)
        oid = c.put(a)
        c.evict([oid])
        assert c.status.spilled_objects == 1
        c.load([oid], pin=True)
        assert c.status.spilled_objects == 0
        c.evict(oid)  # pinned: stays
        assert c.status.spilled_objects == 0
        c.unpin([oid])
        c.evict(oid)
        assert c.status.spilled_objects == 1
        assert np.array_equal(c.get(oid), a)
        with pytest.raises(vineyard.ObjectNotExistsException):
            c.evict([vineyard.ObjectID(12345)])
        c.close()


def test_concurrent_gets_of_a_spilled_object_from_processes(tmp_path, spill_dir):
    with _daemon(tmp_path, spill_dir) as d:
        c = vineyard.connect(d.socket)
        a = _array(7)
        oid = c.put(a)
        c.evict([oid])
        assert c.status.spilled_objects == 1
        job = json.dumps([(int(oid), _crc(a))])
        procs = [subprocess.Popen([sys.executable, "-c", READER, d.socket], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
        for p in procs:  # all start, then all ask at once, as far as a test can arrange
            p.stdin.write(job)
        for p in procs:
            p.stdin.close()
        for p in procs:
            out, err = p.stdout.read(), p.stderr.read()
            assert p.wait(timeout=300) == 0, err
            assert json.loads(out.strip().splitlines()[-1]) == []
        assert c.status.spilled_objects == 0
        c.close()


def test_corrupt_and_missing_files_fail_clearly(tmp_path, spill_dir):
    with _daemon(tmp_path, spill_dir) as d:
        c = vineyard.connect(d.socket)
        good, bad, gone = _array(1), _array(2), _array(3)
        ids = [c.put(x) for x in (good, bad, gone)]
        file_of = {}
        for oid in ids:  # one at a time, to know whose file is whose
            before = set(_spill_files(spill_dir))
            c.evict([oid])
            (new,) = set(_spill_files(spill_dir)) - before
            file_of[oid] = spill_dir / new
        with open(file_of[ids[1]], "r+b") as f:
            f.seek(64 + 12345)
            f.write(b"\xde\xad\xbe\xef")
        os.remove(file_of[ids[2]])
        for oid in ids[1:]:
            with pytest.raises(vineyard.IOErrorException) as e:
                c.get(oid)
            assert "spill" in str(e.value)
        assert np.array_equal(c.get(ids[0]), good)
        c.delete(ids[1:])
        c.close()


def test_delete_removes_the_file_and_restart_removes_stale_ones(tmp_path, spill_dir):
    d = _daemon(tmp_path, spill_dir)
    c = vineyard.connect(d.socket)
    a, b = c.put(_array(1)), c.put(_array(2))
    c.evict([a, b])
    assert len(_spill_files(spill_dir)) == 2
    c.delete(a)
    for _ in range(1000):
        if len(_spill_files(spill_dir)) == 1:
            break
        time.sleep(0.005)  # the spiller removes it outside the store's lock
    assert len(_spill_files(spill_dir)) == 1
    c.close()
    d.proc.send_signal(signal.SIGKILL)  # a daemon that dies leaves its files
    d.proc.wait()
    d.kill()
    assert len(_spill_files(spill_dir)) == 1
    (spill_dir / "mine.txt").write_text("not a spill file")
    with _daemon(tmp_path, spill_dir):
        assert _spill_files(spill_dir) == []
        assert (spill_dir / "mine.txt").exists()


def test_spill_directory_is_checked(tmp_path):
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    with pytest.raises(vineyard.deploy.DaemonError) as e:
        _daemon(tmp_path, open_dir)
    assert "writable by group or others" in e.value.output


@pytest.mark.filterwarnings("ignore:No other vineyard instance")  # put's NotEnoughMemory, upstream's warning
def test_full_disk_pauses_spilling_and_loses_nothing(tmp_path, spill_dir):
    with _daemon(tmp_path, spill_dir, "--spill-wait", "2s") as d:
        # A file size limit set on the running daemon (its arena made) makes
        # the spill writes fail (EFBIG), as a full disk does (ENOSPC); Go
        # ignores SIGXFSZ.
        import resource

        _, hard = resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE)
        resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE, (1 << 20, hard))
        c = vineyard.connect(d.socket)
        kept = []
        with pytest.raises(vineyard.NotEnoughMemoryException) as e:
            for i in range(2 * SIZE // ARRAY):
                a = _array(i)
                oid = c.put(a)
                kept.append((oid, _crc(a)))
        assert "spilling is paused" in str(e.value), e.value
        assert kept
        resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE, (hard, hard))
        for oid, crc in kept:
            assert _crc(c.get(oid)) == crc
        # With room on disk again, spilling resumes and puts go through.
        for i in range(SIZE // ARRAY):
            kept.append((c.put(_array(100 + i)), _crc(_array(100 + i))))
        for oid, crc in kept:
            assert _crc(c.get(oid)) == crc
        c.close()


def test_init_takes_the_spill_settings(tmp_path, spill_dir):
    script = textwrap.dedent("""
        import sys
        import numpy as np
        import vineyard
        c = vineyard.init("64Mi", spill_path=sys.argv[1], spill_lower_rate=0.2, spill_upper_rate=0.5)
        oid = c.put(np.arange(1 << 20))
        c.evict([oid])
        print(c.status.spilled_objects)
        vineyard.shutdown()
    """)
    p = subprocess.run([sys.executable, "-c", script, str(spill_dir)], check=False, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "1"
