"""The modes (how much to measure) and the figures every run reports.

A figure id names what is measured, e.g. ``get.64KiB``; each system (ours, a peer, or
the physical baselines) gets one result per figure. ``--only`` selects figures by id or
system, so the table of figures below is the one place that lists them.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from .units import size_key, size_label

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class Mode:
    name: str
    trials: int  # trials of each small-object figure (each the mean of `inner` ops)
    inner: int  # operations per trial of small-object figures
    small: Sequence[int] = (8, KiB, 64 * KiB)
    large: Sequence[int] = (MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB, GiB)
    large_trials: int = 5  # warm put, large get and memcpy trials
    large_inner: int = 4  # objects got per large-get trial, at most 1 GiB of them (see get_inner)
    cold_trials: int = 3
    rtt_inner: int = 2000
    frame_rows: int = 10_000_000
    frame_cols: int = 10
    frame_trials: int = 3
    procs: Sequence[int] = (1, 2, 4)
    conc_ops: int = 2000
    conc_trials: int = 3
    conc_size: int = KiB
    peers: bool = True
    keep_agents: bool = False  # keep each agent from its own figures to the interleaved ones (small stores only)
    timeout: float = 1800  # seconds allowed for one agent command

    def arena(self) -> int:
        """Bytes of store each system gets: room for the whole cold series (nothing is
        deleted during it), or two copies of a frame, plus slack."""
        frame = self.frame_rows * self.frame_cols * 8
        return max(self.cold_trials * sum(self.large), 3 * frame, 2 * GiB, 2 * max(self.large)) + 512 * MiB

    def prefault_ahead(self) -> int:
        """Our daemon's --prefault-ahead: the whole cold series, which puts into memory
        no put touched before (the run waits for the background pre-fault first)."""
        return self.cold_trials * sum(self.large) + 64 * MiB

    def get_inner(self, nbytes: int) -> int:
        """Objects got per trial of a get figure: many small ones, a few large ones
        (at most 1 GiB of them, to bound memory and the time copying peers take)."""
        if nbytes in self.small:
            return self.inner
        return max(1, min(self.large_inner, GiB // nbytes))


MODES = {
    "full": Mode("full", trials=7, inner=200),
    "quick": Mode("quick", trials=5, inner=50, large=(MiB, 8 * MiB, 64 * MiB), large_trials=3, cold_trials=3,
                  large_inner=2, rtt_inner=500, frame_rows=1_000_000, conc_ops=200, conc_trials=2, keep_agents=True,
                  timeout=600),
    "smoke": Mode("smoke", trials=2, inner=3, large=(MiB, 2 * MiB), large_trials=2, cold_trials=1, rtt_inner=20,
                  large_inner=1, frame_rows=1000, frame_cols=3, frame_trials=1, procs=(1, 2), conc_ops=5, conc_trials=1,
                  peers=False, keep_agents=True, timeout=300),
}


def mode(name: str, sizes: Sequence[int] = ()) -> Mode:
    m = MODES[name]
    return replace(m, large=tuple(sorted(sizes))) if sizes else m


@dataclass(frozen=True)
class Figure:
    """One measured quantity. kind: ``latency`` (seconds per op, lower is better),
    ``bandwidth`` (bytes/s from seconds per op of ``nbytes``) or ``rate`` (ops/s)."""

    id: str
    title: str
    kind: str = "latency"
    nbytes: int = 0
    group: str = ""


@dataclass
class Selection:
    patterns: list[str] = field(default_factory=list)

    def wants(self, figure_id: str, system: str) -> bool:
        if not self.patterns:
            return True
        return any(fnmatch.fnmatchcase(figure_id, p) or fnmatch.fnmatchcase(system, p) or p in figure_id
                   for p in self.patterns)


def baseline_figures(m: Mode) -> list[Figure]:
    figs = [Figure("rtt.python", "socket round trip, Python ↔ Python, 64 B", group="baseline"),
            Figure("rtt.c", "socket round trip, C ↔ C, 64 B", group="baseline")]
    for n in m.large:
        figs.append(Figure(f"memcpy.warm.{size_key(n)}", f"NumPy memcpy {size_label(n)}, warm destination",
                           "bandwidth", n, "baseline"))
    for n in m.large:
        figs.append(Figure(f"memcpy.cold.{size_key(n)}", f"NumPy memcpy {size_label(n)}, first touch",
                           "bandwidth", n, "baseline"))
    return figs


def c_figures(m: Mode) -> list[Figure]:
    figs = []
    for n in m.small:
        s = size_label(n)
        figs += [Figure(f"c.put.{size_key(n)}", f"C put {s} (create + write + seal)", nbytes=n, group="c"),
                 Figure(f"c.get.{size_key(n)}", f"C get + release {s} (other connection)", nbytes=n, group="c"),
                 Figure(f"c.cycle.{size_key(n)}", f"C create + seal + get {s}", nbytes=n, group="c"),
                 Figure(f"c.put1.{size_key(n)}", f"C put {s} in one call (v6d_put_inline)", nbytes=n, group="c"),
                 Figure(f"c.cycle1.{size_key(n)}", f"C put_inline + get {s}", nbytes=n, group="c")]
    return figs


def system_figures(m: Mode) -> list[Figure]:
    """Figures measured for ours and every peer, in the order an agent runs them (the
    cold series first, on a fresh store)."""
    figs = []
    for n in m.large:
        figs.append(Figure(f"put.cold.{size_key(n)}", f"put {size_label(n)}, cold store", "bandwidth", n, "large"))
    for n in m.large:
        figs.append(Figure(f"put.warm.{size_key(n)}", f"put {size_label(n)}, warm store", "bandwidth", n, "large"))
    for n in m.small:
        figs.append(Figure(f"put.{size_key(n)}", f"put {size_label(n)}", nbytes=n, group="small"))
    for n in m.small:
        figs.append(Figure(f"get.{size_key(n)}", f"get {size_label(n)} (another process)", nbytes=n, group="small"))
    for n in m.small:  # measured with put.S (cpu_figures)
        for who in ("client", "daemon"):
            figs.append(Figure(f"put.{size_key(n)}.cpu.{who}", f"put {size_label(n)}: {who} CPU per put", nbytes=n,
                               group="cpu"))
    for n in m.large:
        figs.append(Figure(f"get.{size_key(n)}", f"get {size_label(n)} (another process)", nbytes=n, group="large"))
    if m.large:
        # The control of the largest get: a get of 8 B timed the same way, right after
        # the producer put (untimed) a value of the largest size (Agent.get's ballast).
        n = max(m.large)
        figs.append(Figure(f"get.8B.after.{size_key(n)}", f"get 8 B right after a put of {size_label(n)} "
                                                          "(another process)", nbytes=8, group="large"))
    for p in m.procs:
        figs.append(Figure(f"conc.{p}p.latency", f"{p} client(s) at once: put + get {size_label(m.conc_size)}, "
                                                 "per op", nbytes=m.conc_size, group="concurrency"))
        figs.append(Figure(f"conc.{p}p.rate", f"{p} client(s) at once: put + get {size_label(m.conc_size)}, total",
                           "rate", m.conc_size, "concurrency"))
        figs.append(Figure(f"conc.{p}p.xrate", f"{p} client(s) at once: put + get {size_label(m.conc_size)}, "
                                               "got from another process, total", "rate", m.conc_size, "concurrency"))
        for who in ("client", "daemon"):  # measured with conc.Np.rate (cpu_figures)
            figs.append(Figure(f"conc.{p}p.cpu.{who}", f"{p} client(s) at once: {who} CPU per put + get "
                                                       f"{size_label(m.conc_size)}", nbytes=m.conc_size, group="cpu"))
    shape = f"{m.frame_rows:,} × {m.frame_cols}"
    for kind, label in (("pandas", "pandas DataFrame"), ("arrow", "Arrow Table")):
        figs.append(Figure(f"{kind}.put", f"put {label} {shape}", nbytes=m.frame_rows * m.frame_cols * 8,
                           group="frames"))
        figs.append(Figure(f"{kind}.get", f"get {label} {shape} (another process)",
                           nbytes=m.frame_rows * m.frame_cols * 8, group="frames"))
    return figs


def cpu_of(figure_id: str) -> str | None:
    """The figure whose command measures the CPU figure figure_id (``put.8B`` for
    ``put.8B.cpu.daemon``, ``conc.4p.rate`` for ``conc.4p.cpu.client``), None when
    figure_id is not a CPU figure."""
    base, sep, _ = figure_id.partition(".cpu.")
    if not sep:
        return None
    return base + ".rate" if base.startswith("conc.") else base
