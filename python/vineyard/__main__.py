"""``python -m vineyard [flags]``: runs the vineyardd bundled with this package
(or the one VINEYARDD names) with the flags; ``--help`` lists them."""

from __future__ import annotations

import os
import sys

from .deploy import daemon_path


def main() -> None:
    path = daemon_path()
    args = sys.argv[1:]
    if any(a in ("-h", "--help", "-help") for a in args):
        me = os.path.basename(sys.argv[0])
        me = "python -m vineyard" if me in ("__main__.py", "") else me  # or the vineyardd console script
        print(f"{me} [flags]: runs the Vineyard daemon {path} with the flags below.\n"
              "Python clients then connect with vineyard.connect(SOCKET), or vineyard.connect()\n"
              "with VINEYARD_IPC_SOCKET=SOCKET in their environment.\n", flush=True)
    os.execv(path, [path, *args])


if __name__ == "__main__":
    main()
