"""The ``vineyardctl`` console script: runs the vineyardctl bundled with this
package (or the one VINEYARDCTL names) with the arguments given."""

from __future__ import annotations

import os
import sys


def ctl_path() -> str:
    """The vineyardctl binary: env VINEYARDCTL, the package's
    bin/vineyardctl, or the checkout's build/vineyardctl."""
    here = os.path.dirname(os.path.abspath(__file__))
    tried: list[str] = []
    for cand in (os.environ.get("VINEYARDCTL"), os.path.join(here, "bin", "vineyardctl"),
                 os.path.join(os.path.dirname(os.path.dirname(here)), "build", "vineyardctl")):
        if cand:
            tried.append(cand)
            if os.access(cand, os.X_OK):
                return cand
    raise FileNotFoundError("vineyard: vineyardctl not found (tried {})".format(", ".join(tried)))


def main() -> None:
    try:
        path = ctl_path()
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        sys.exit(3)
    os.execv(path, [path, *sys.argv[1:]])


if __name__ == "__main__":
    main()
