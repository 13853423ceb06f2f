"""Summaries of repeated trials: every figure is a median, with p10 and p90."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear between closest ranks."""
    if not samples:
        raise ValueError("no samples")
    xs = sorted(samples)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(samples: Sequence[float]) -> dict[str, float]:
    """median, p10, p90, min, max and n of the samples."""
    return {
        "median": percentile(samples, 50),
        "p10": percentile(samples, 10),
        "p90": percentile(samples, 90),
        "min": min(samples),
        "max": max(samples),
        "n": len(samples),
    }
