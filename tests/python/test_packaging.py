"""The wheel carries libv6d.so and an executable daemon, with a platform tag."""

from __future__ import annotations

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
        assert "vineyard/__init__.py" in names
