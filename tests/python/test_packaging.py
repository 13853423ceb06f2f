"""The wheel carries libv6d.so and an executable daemon, with a platform tag."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_contents(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path), str(ROOT)], check=True, timeout=600)
    (wheel,) = tmp_path.glob("*.whl")
    assert not wheel.name.endswith("-any.whl"), wheel.name
    version = (ROOT / "VERSION").read_text().strip()  # the one place the version is written
    assert wheel.name.startswith(f"vineyard_go-{version}-"), wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = {i.filename: i for i in z.infolist()}
        assert "vineyard/libv6d.so" in names
        daemon = names["vineyard/bin/vineyardd"]
        assert (daemon.external_attr >> 16) & stat.S_IXUSR
        ctl = names["vineyard/bin/vineyardctl"]
        assert (ctl.external_attr >> 16) & stat.S_IXUSR
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = z.read(entry_points).decode()
        assert "vineyardctl = vineyard._ctl:main" in scripts and "vineyardd = vineyard.__main__:main" in scripts, scripts
        assert "vineyard/__init__.py" in names
        # upstream's module layout (docs/protocol.md, "Upstream's own test suite")
        for name in ("vineyard/core/__init__.py", "vineyard/core/resolver.py", "vineyard/deploy/local.py",
                     "vineyard/deploy.py", "vineyard/conftest.py", "vineyard/_C.py", "vineyard/data/pickle.py"):
            assert name in names, name


def test_check_prereqs_names_each_missing_tool_and_its_fix():
    script = ROOT / "scripts" / "check-prereqs.sh"
    ok = subprocess.run([str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert ok.returncode == 0 and "all prerequisites found" in ok.stdout, ok.stdout + ok.stderr
    env = dict(os.environ, GO="no-such-go", PYTHON="no-such-python3", CC="no-such-cc")
    bad = subprocess.run([str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, env=env)
    assert bad.returncode == 1, bad
    for tool, fix in (("go", "install Go"), ("cc", "apt-get install -y gcc"),
                      ("python", "apt-get install -y python3 python3-venv")):
        line = next(ln for ln in bad.stderr.splitlines() if ln.startswith(f"check: {tool} "))
        assert "MISSING" in line, line
        assert fix in bad.stderr, (fix, bad.stderr)
    assert "3 prerequisite(s) missing" in bad.stderr
