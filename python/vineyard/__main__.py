"""``python -m vineyard [flags]``: runs the bundled vineyardd with the flags."""

from __future__ import annotations

import os
import sys

from .deploy import daemon_path


def main() -> None:
    path = daemon_path()
    os.execv(path, [path, *sys.argv[1:]])


if __name__ == "__main__":
    main()
