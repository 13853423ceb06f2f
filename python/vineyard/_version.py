"""The package version, written in one place: the repository's VERSION file.

A checkout (PYTHONPATH=python) reads VERSION two directories up; an installed
package reads its metadata, which setup.py/pyproject.toml took from VERSION.
"""

from __future__ import annotations

import os


def _read() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        with open(os.path.join(os.path.dirname(os.path.dirname(here)), "VERSION")) as f:
            return f.read().strip()
    except OSError:
        pass
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("vineyard-go")
    except (ImportError, PackageNotFoundError):
        return "0+unknown"


__version__ = _read()
