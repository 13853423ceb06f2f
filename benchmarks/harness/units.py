"""Sizes and durations: parsing (``64Mi``) and human-readable formatting."""

from __future__ import annotations

import re

_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
           "KI": 1 << 10, "MI": 1 << 20, "GI": 1 << 30, "TI": 1 << 40}


def parse_size(text: str) -> int:
    """Parses ``1024``, ``64Mi``, ``1GiB``, ``2G`` into bytes (``i``: powers of 1024)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]i?)?B?\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"not a size: {text!r}")
    return int(m.group(1)) * _SUFFIX[(m.group(2) or "").upper()]


def size_label(n: int) -> str:
    """``8 B``, ``1 KiB``, ``64 MiB``, ``1 GiB`` (exact binary multiples only)."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def size_key(n: int) -> str:
    """The size as it appears in figure ids: ``8B``, ``1KiB``, ``64MiB``."""
    return size_label(n).replace(" ", "")


def fmt_seconds(s: float) -> str:
    """A duration with a unit that keeps three significant digits."""
    if s < 1e-3:
        return f"{s * 1e6:.3g} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def fmt_rate(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e9:.3g} GB/s"
