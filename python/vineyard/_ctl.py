"""The ``vineyardctl`` console script: runs the vineyardctl bundled with this
package (or the one VINEYARDCTL names) with the arguments given."""

from __future__ import annotations

import os
import sys

from vineyard.deploy import binary_path


def ctl_path() -> str:
    """The vineyardctl binary: env VINEYARDCTL, the package's
    bin/vineyardctl, or the checkout's build/vineyardctl."""
    return binary_path("vineyardctl", "VINEYARDCTL")


def main() -> None:
    try:
        path = ctl_path()
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        sys.exit(3)
    os.execv(path, [path, *sys.argv[1:]])


if __name__ == "__main__":
    main()
