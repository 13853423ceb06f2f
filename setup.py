"""Builds libv6d.so, vineyardd and vineyardctl with the Go toolchain into the package.

Set VINEYARD_SKIP_GO_BUILD=1 to package prebuilt python/vineyard/libv6d.so,
python/vineyard/bin/vineyardd and python/vineyard/bin/vineyardctl instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(ROOT, "python", "vineyard")


def go_build() -> None:
    go = shutil.which("go")
    if go is None:
        raise SystemExit("vineyard: building needs the Go toolchain ('go' is not on PATH); "
                         "install Go >= 1.26 or set VINEYARD_SKIP_GO_BUILD=1 with prebuilt artifacts")
    env = dict(os.environ, CGO_ENABLED="1")
    with open(os.path.join(ROOT, "VERSION")) as f:
        version = f.read().strip()  # the one place the version is written
    stamp = f"-X main.version={version} -X github.com/v6d-io/v6d-go/internal/client.Version={version}"
    script = os.path.join(ROOT, "libv6d", "v6d.map")
    lib = os.path.join(PKG, "libv6d.so")
    subprocess.run([go, "build", "-trimpath", "-buildmode=c-shared",
                    "-ldflags", f"-s -w {stamp} '-extldflags=-Wl,--version-script={script} -Wl,-soname,libv6d.so'",
                    "-o", lib, "./libv6d"], cwd=ROOT, env=env, check=True)
    header = os.path.join(PKG, "libv6d.h")
    if os.path.exists(header):
        os.remove(header)
    os.makedirs(os.path.join(PKG, "bin"), exist_ok=True)
    daemon = os.path.join(PKG, "bin", "vineyardd")
    subprocess.run([go, "build", "-trimpath", "-ldflags", stamp, "-o", daemon, "./cmd/vineyardd"], cwd=ROOT, env=env, check=True)
    os.chmod(daemon, 0o755)
    ctl = os.path.join(PKG, "bin", "vineyardctl")  # static, as in the container image
    subprocess.run([go, "build", "-trimpath", "-ldflags", f"-s -w {stamp}", "-o", ctl, "./cmd/vineyardctl"], cwd=ROOT,
                   env=dict(env, CGO_ENABLED="0"), check=True)
    os.chmod(ctl, 0o755)


class BuildPy(build_py):
    def run(self) -> None:
        if not os.environ.get("VINEYARD_SKIP_GO_BUILD"):
            go_build()
        super().run()


class BinaryDistribution(Distribution):
    def has_ext_modules(self) -> bool:
        return True


cmdclass = {"build_py": BuildPy}
try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # older setuptools
    from wheel.bdist_wheel import bdist_wheel  # type: ignore


class BdistWheel(bdist_wheel):
    def get_tag(self):  # type: ignore[no-untyped-def]
        return "py3", "none", sysconfig.get_platform().replace("-", "_").replace(".", "_")


cmdclass["bdist_wheel"] = BdistWheel
setup(cmdclass=cmdclass, distclass=BinaryDistribution)
