"""One result per (figure, system): its samples and status, and the progress line."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .plan import Figure
from .stats import summarize
from .units import fmt_rate, fmt_seconds

OK, FAILED, SKIPPED, NA = "ok", "failed", "skipped", "n/a"


@dataclass
class Result:
    figure: Figure
    system: str
    status: str = OK
    samples: list[float] = field(default_factory=list)  # seconds per op; ops/s for kind "rate"
    reason: str = ""

    def summary(self) -> dict[str, float] | None:
        return summarize(self.samples) if self.status == OK and self.samples else None

    def value(self, which: str = "median") -> float | None:
        """The figure in its display unit: seconds (latency), bytes/s (bandwidth), ops/s
        (rate). p10/p90 of a bandwidth come from p90/p10 of its seconds."""
        s = self.summary()
        if s is None:
            return None
        if self.figure.kind == "bandwidth":
            flip = {"median": "median", "p10": "p90", "p90": "p10"}[which]
            return self.figure.nbytes / s[flip]
        return s[which]

    def text(self, which: str = "median") -> str:
        v = self.value(which)
        if v is None:
            return self.status
        if self.figure.kind == "bandwidth":
            return fmt_rate(v)
        if self.figure.kind == "rate":
            return f"{v:,.0f} ops/s"
        return fmt_seconds(v)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"figure": self.figure.id, "system": self.system, "title": self.figure.title,
                               "kind": self.figure.kind, "group": self.figure.group, "nbytes": self.figure.nbytes,
                               "status": self.status}
        if self.reason:
            out["reason"] = self.reason
        if self.status == OK:
            out["unit"] = {"latency": "s", "bandwidth": "B/s", "rate": "ops/s"}[self.figure.kind]
            out.update({k: self.value(k) for k in ("median", "p10", "p90")})
            out["samples"] = self.samples
            if self.figure.kind != "rate":
                out["seconds"] = self.summary()
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Result:
        fig = Figure(d["figure"], d["title"], d["kind"], d.get("nbytes", 0), d.get("group", ""))
        return cls(fig, d["system"], d["status"], list(d.get("samples", [])), d.get("reason", ""))


class Progress:
    """Prints one line per result as it is recorded."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.t0 = time.monotonic()

    def record(self, r: Result) -> None:
        self.done += 1
        detail = r.text()
        if r.status == OK and r.figure.kind != "rate":
            detail += f"  (p10 {r.text('p10')}, p90 {r.text('p90')})"
        elif r.reason:
            detail += f": {r.reason}"
        width = len(str(self.total))
        print(f"[{self.done:{width}d}/{self.total}] {time.monotonic() - self.t0:6.1f}s  {r.system:<8} "
              f"{r.figure.id:<22} {detail}", flush=True)
