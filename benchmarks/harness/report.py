"""The report: issue 15's targets, then latest.json, latest.md and latest.png.

Everything is rendered from the JSON document (``document``), so that a report can be
re-made from a saved run and the self-check can compare the two.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from .results import OK, Result
from .systems import PEERS
from .units import fmt_seconds, size_key, size_label

SYSTEMS = ("ours",) + PEERS
PEER_TITLES = {"shm": "shared_memory", "pickle": "pickle + Pipe", "ray": "Ray", "upstream": "upstream Vineyard"}


class Table:
    """Results by (figure id, system)."""

    def __init__(self, results: list[Result]) -> None:
        self.results = results
        self.by = {(r.figure.id, r.system): r for r in results}

    def get(self, fig: str, system: str) -> Result | None:
        return self.by.get((fig, system))

    def value(self, fig: str, system: str) -> float | None:
        r = self.get(fig, system)
        return r.value() if r is not None else None

    def figures(self) -> list[Result]:
        """One result per figure id, in the order first recorded."""
        seen: dict[str, Result] = {}
        for r in self.results:
            seen.setdefault(r.figure.id, r)
        return list(seen.values())


# -- targets ---------------------------------------------------------------------


def _target(name: str, ratio: float | None, limit: float, at_most: bool, how: str) -> dict[str, Any]:
    ok = None if ratio is None else (ratio <= limit if at_most else ratio >= limit)
    return {"target": name, "measured": how, "ratio": ratio, "limit": f"{'≤' if at_most else '≥'} {limit:g}×",
            "ok": ok}


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


# Issue 15's limits, each the ratio of two figures of one run.
GET_RTT, GET_PEER, GET_SHM = 1.0, 10.0, 2.0  # Python get ÷ rtt.python; peer ÷ ours; ours ÷ shm attach
C_GET_RTT = 0.2  # C get ÷ rtt.c
LARGE_GET = 1.2  # get of the largest size ÷ get of 8 B
PUT_RTT, PUT_PEER = 2.0, 5.0  # Python put ÷ rtt.python; peer ÷ ours
BIG_PUT = 64 << 20  # puts from this size on are held against a warm memcpy
COLD_PUT, WARM_PUT = 0.7, 0.8  # put bandwidth ÷ warm memcpy bandwidth
SCALING = {2: 1.4, 4: 1.6}  # clients: aggregate put+get rate ÷ one client's
CONC_PEER = 5.0  # ours' aggregate rate ÷ Ray's
# Issue 37's.
MEDIUM_PUT = 0.6  # warm put bandwidth of 1 MiB up to BIG_PUT ÷ warm memcpy bandwidth
DAEMON_CPU_PUT = 3e-6  # the daemon's CPU seconds per small put
CPU_BOUND = 0.9  # aggregate rate of 4 clients ÷ cores ÷ (client + daemon CPU per put + get)


def _is_control(figure_id: str) -> bool:
    """A control figure (``get.8B.after.1GiB``): a small get measured the way a large
    one is, not a point of the size series."""
    return ".after." in figure_id


def targets(results: list[Result], cores: int | None = None) -> list[dict[str, Any]]:
    """Issue 15's targets, each a ratio of two figures of this run (None: not measured).
    A target appears when ours measured its figure; a peer or floor that did not run
    leaves its ratio None, with why."""
    t = Table(results)
    out: list[dict[str, Any]] = []
    rtt_py, rtt_c = t.value("rtt.python", "baseline"), t.value("rtt.c", "baseline")
    small = sorted({r.figure.nbytes for r in results if r.figure.group == "small"})

    def vs_peer(name: str, fig: str, peer: str, limit: float, ours: float) -> None:
        """theirs ÷ ours ≥ limit: ours is limit times faster."""
        theirs = t.value(fig, peer)
        out.append(_target(f"{name}: ≥ {limit:g}× faster than {PEER_TITLES[peer]}", _div(theirs, ours), limit,
                           False, f"{peer} {_s(theirs)} / ours {_s(ours)}" if theirs else
                           f"{peer}: {_status(t.get(fig, peer))}"))

    def small_python(op: str, n: int, rtt_limit: float, peer_limit: float) -> float | None:
        """ours ≤ rtt_limit × the Python round trip and peer_limit × faster than Ray and
        upstream, for op (get, put) of n bytes; ours, None when not measured."""
        fig, name = f"{op}.{size_key(n)}", f"{op} {size_label(n)}, Python"
        ours = t.value(fig, "ours")
        if ours is None:
            return None
        out.append(_target(f"{name}: ≤ {rtt_limit:g}× the Python socket round trip", _div(ours, rtt_py), rtt_limit,
                           True, f"ours {_s(ours)} / round trip {_s(rtt_py)}"))
        for peer in ("ray", "upstream"):
            vs_peer(name, fig, peer, peer_limit, ours)
        return ours

    for n in small:  # 1: Python gets
        ours = small_python("get", n, GET_RTT, GET_PEER)
        if ours is None:
            continue
        fig, name = f"get.{size_key(n)}", f"get {size_label(n)}, Python"
        shm = t.value(fig, "shm")
        out.append(_target(f"{name}: within {GET_SHM:g}× of a shared_memory attach", _div(ours, shm), GET_SHM, True,
                           f"ours {_s(ours)} / shm {_s(shm)}" if shm else f"shm: {_status(t.get(fig, 'shm'))}"))
    for n in small:  # 2: C gets
        c_get = t.value(f"c.get.{size_key(n)}", "ours")
        if c_get is not None:
            out.append(_target(f"get {size_label(n)}, C: ≤ {C_GET_RTT:g}× the C socket round trip",
                               _div(c_get, rtt_c), C_GET_RTT, True, f"ours {_s(c_get)} / round trip {_s(rtt_c)}"))
    gets = sorted((r.figure.nbytes, r) for r in results  # 3: a large get costs what a small one does
                  if r.system == "ours" and r.figure.id.startswith("get.") and r.figure.group == "large"
                  and not _is_control(r.figure.id))
    small_get = t.value("get.8B", "ours")
    if gets and small_get is not None:
        n, big = gets[-1]
        name = f"get {size_label(n)} within {LARGE_GET:g}× the time of a get of 8 B"
        if n != 1 << 30:
            name += " (the issue asks 1 GiB; this run's largest size)"
        out.append(_target(name, _div(big.value(), small_get), LARGE_GET, True,
                           f"{_s(big.value())} / {_s(small_get)}"))
        control = t.value(f"get.8B.after.{size_key(n)}", "ours")
        if control is not None:
            out.append(_target(f"(control) get {size_label(n)} within {LARGE_GET:g}× the time of a get of 8 B "
                               f"made right after a put of {size_label(n)}", _div(big.value(), control), LARGE_GET,
                               True, f"{_s(big.value())} / {_s(control)}"))
    for n in small:  # 4: Python puts
        small_python("put", n, PUT_RTT, PUT_PEER)
    for r in results:  # issue 37: medium warm puts against a warm memcpy of the same size
        if r.system != "ours" or not (1 << 20) <= r.figure.nbytes < BIG_PUT or not r.figure.id.startswith("put.warm."):
            continue
        memcpy = t.value(f"memcpy.warm.{size_key(r.figure.nbytes)}", "baseline")
        out.append(_target(f"put {size_label(r.figure.nbytes)} into a warm store: ≥ {MEDIUM_PUT:g}× a warm NumPy "
                           "memcpy", _div(r.value(), memcpy), MEDIUM_PUT, False,
                           f"ours {_bw(r.value())} / memcpy {_bw(memcpy)}"))
    for n in small:  # issue 37: the daemon's CPU per small put
        cpu = t.value(f"put.{size_key(n)}.cpu.daemon", "ours")
        if cpu is not None:
            out.append(_target(f"put {size_label(n)}, Python: daemon CPU per put ≤ {_s(DAEMON_CPU_PUT)}",
                               cpu / DAEMON_CPU_PUT, 1.0, True, f"ours {_s(cpu)} / {_s(DAEMON_CPU_PUT)}"))
    for procs in (4,):  # issue 37: the rate the CPUs allow at the measured CPU per op
        rate = t.value(f"conc.{procs}p.rate", "ours")
        mine, theirs = t.value(f"conc.{procs}p.cpu.client", "ours"), t.value(f"conc.{procs}p.cpu.daemon", "ours")
        if rate is None or mine is None or theirs is None or not cores:
            continue
        bound = cores / (mine + theirs)
        out.append(_target(f"put + get, {procs} clients: ≥ {CPU_BOUND:g}× the rate {cores} CPUs allow at the "
                           "measured CPU per put + get", rate / bound, CPU_BOUND, False,
                           f"{_ops(rate)} / ({cores} CPUs ÷ (clients {_s(mine)} + daemon {_s(theirs)}) = "
                           f"{_ops(bound)})"))
    for r in results:  # 5: large puts against a warm memcpy of the same size
        if r.system != "ours" or r.figure.nbytes < BIG_PUT or not r.figure.id.startswith(("put.cold.", "put.warm.")):
            continue
        cold = r.figure.id.startswith("put.cold.")
        limit = COLD_PUT if cold else WARM_PUT
        memcpy = t.value(f"memcpy.warm.{size_key(r.figure.nbytes)}", "baseline")
        out.append(_target(f"put {size_label(r.figure.nbytes)} into a {'cold' if cold else 'warm'} store: "
                           f"≥ {limit:g}× a warm NumPy memcpy", _div(r.value(), memcpy), limit, False,
                           f"ours {_bw(r.value())} / memcpy {_bw(memcpy)}"))
    for kind, what in (("rate", "own objects"), ("xrate", "objects another process put")):  # 6: clients at once
        one = t.value(f"conc.1p.{kind}", "ours")
        for procs, limit in SCALING.items():
            many = t.value(f"conc.{procs}p.{kind}", "ours")
            if t.get(f"conc.{procs}p.{kind}", "ours") is None:
                continue
            out.append(_target(f"put + get, {what}: {procs} clients ≥ {limit:g}× one client's rate",
                               _div(many, one), limit, False, f"{_ops(many)} / {_ops(one)}"))
    for r in results:
        if r.system == "ours" and r.figure.id.startswith("conc.") and r.figure.id.endswith("p.rate"):
            procs = int(r.figure.id.split(".")[1][:-1])
            ray = t.value(r.figure.id, "ray")
            clients = "1 client" if procs == 1 else f"{procs} clients"
            out.append(_target(f"put + get, {clients}: ≥ {CONC_PEER:g}× Ray's rate", _div(r.value(), ray),
                               CONC_PEER, False, f"ours {_ops(r.value())} / ray {_ops(ray)}" if ray else
                               f"ray: {_status(t.get(r.figure.id, 'ray'))}"))
    return out


def _s(v: float | None) -> str:
    return fmt_seconds(v) if v is not None else "—"


def _bw(v: float | None) -> str:
    return f"{v / 1e9:.3g} GB/s" if v is not None else "—"


def _ops(v: float | None) -> str:
    return f"{v:,.0f} ops/s" if v is not None else "—"


def _status(r: Result | None) -> str:
    if r is None:
        return "not run"
    return f"{r.status} ({r.reason})" if r.reason else r.status


# -- document and Markdown ---------------------------------------------------------


def document(machine: dict[str, Any], mode: str, systems: dict[str, Any], results: list[Result]) -> dict[str, Any]:
    return {"format": 1, "mode": mode, "machine": machine, "systems": systems,
            "targets": targets(results, machine.get("cores")), "results": [r.to_json() for r in results]}


def _cell(r: Result | None, ours: Result | None) -> str:
    """A value, and for a peer how many times better ours is (>1: ours is better)."""
    if r is None:
        return ""
    if r.status != OK:
        return "n/a" if r.status == "n/a" else r.status
    text = r.text()
    if ours is not None and ours is not r and ours.status == OK:
        a, b = ours.value(), r.value()
        if a and b:
            better = b / a if r.figure.kind == "latency" else a / b
            text += f" ({better:.2g}×)"
    return text


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return lines


def machine_line(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    v = m["versions"]
    ram = m.get("ram_bytes", 0) / (1 << 30)
    return (f"{m['cpu']}, {m['cores']} cores, {ram:.0f} GiB RAM, Linux {m['kernel']}; Python {v['python']}, "
            f"{v['go']}, NumPy {v['numpy']}, pandas {v.get('pandas')}, pyarrow {v.get('pyarrow')}; "
            f"commit {m['commit']}; {m['date']}; load average {m.get('load_before')} before, "
            f"{m.get('load_after')} after")


def markdown(doc: dict[str, Any]) -> str:
    results = [Result.from_json(d) for d in doc["results"]]
    t = Table(results)
    lines = [f"# v6d-go benchmark ({doc['mode']} run)", "",
             f"Machine: {machine_line(doc)}.", "",
             f"Command: `{' '.join(doc['machine']['argv'])}`" + (f" (`{doc['command']}`)" if doc.get("command") else ""),
             ""]
    sysl = []
    for name in SYSTEMS:
        s = doc["systems"].get(name)
        if s is None:
            continue
        title = "ours" if name == "ours" else PEER_TITLES[name]
        sysl.append(f"{title} {s.get('version', '')}".strip() if s.get("status") == OK
                    else f"{title}: skipped ({s.get('reason', '')})")
        if s.get("status") == OK and s.get("prefault"):
            sysl[-1] += f" ({s['prefault']})"
    if sysl:
        lines += ["Systems: " + "; ".join(sysl) + ".", ""]
    lines += ["Each figure is the median of repeated trials (p10 and p90 are in latest.json). Peer cells show",
              "how many times better ours is (latency: theirs ÷ ours; bandwidth and rate: ours ÷ theirs).",
              "docs/performance.md says what each figure measures.", "", "## Targets (issue 15)", ""]
    rows = []
    for tg in doc["targets"]:
        mark = {True: "✓", False: "✗", None: "–"}[tg["ok"]]
        ratio = f"{tg['ratio']:.2f}×" if tg["ratio"] is not None else "—"
        rows.append([tg["target"], tg["measured"], ratio, tg["limit"], mark])
    lines += _md_table(["target", "measured", "ratio", "limit", ""], rows) + [""]

    lines += ["## Baselines", ""]
    rows = [[r.figure.title, r.text(), r.text("p10"), r.text("p90")]
            for r in t.figures() if r.system == "baseline"]
    lines += _md_table(["figure", "median", "p10", "p90"], rows) + [""]

    rows = []
    for r in t.figures():
        if r.figure.group != "c":
            continue
        rtt = t.value("rtt.c", "baseline")
        v = r.value()
        rows.append([r.figure.title, r.text(), f"{v / rtt:.2f}" if v is not None and rtt else "—"])
    if rows:
        lines += ["## C client (ours)", ""] + _md_table(["figure", "median", "÷ C round trip"], rows) + [""]

    present = [s for s in SYSTEMS if any(r.system == s for r in results)]
    header = ["figure"] + [("ours" if s == "ours" else PEER_TITLES[s]) for s in present]
    rows = []
    for r in t.figures():
        if r.system in ("baseline",) or r.figure.group == "c":
            continue
        ours = t.get(r.figure.id, "ours")
        rows.append([r.figure.title] + [_cell(t.get(r.figure.id, s), ours) for s in present])
    if rows:
        lines += ["## Python: ours and the peers", ""] + _md_table(header, rows) + [""]

    notes = [r for r in results if r.status not in (OK, "n/a") and r.reason]
    if notes:
        lines += ["## Not measured", ""]
        seen = set()
        for r in notes:
            key = (r.system, r.reason)
            if key not in seen:
                seen.add(key)
                lines.append(f"- {r.system} {r.figure.id}: {r.status}: {r.reason}")
        lines.append("")
    return "\n".join(lines)


# -- chart -------------------------------------------------------------------------


def chart(doc: dict[str, Any], path: Path) -> str | None:
    """Writes the PNG; returns why not if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return f"no chart: matplotlib is missing ({e}); pip install -r requirements-dev.txt"
    t = Table([Result.from_json(d) for d in doc["results"]])
    fig, axes = plt.subplots(2, 2, figsize=(14, 10))
    _bars_panel(axes[0][0], t, "small", "µs", 1e6, "small put / get latency (lower is better)")
    rtt = t.value("rtt.python", "baseline")
    if rtt:
        axes[0][0].axhline(rtt * 1e6, color="black", linestyle="--", label="Python socket round trip")
    _legend(axes[0][0])
    _series_panel(axes[0][1], t, "put bandwidth (higher is better)", "GB/s", [
        ("ours", "put.warm.", "ours, warm"), ("ours", "put.cold.", "ours, cold"),
        ("baseline", "memcpy.warm.", "memcpy, warm"), ("baseline", "memcpy.cold.", "memcpy, first touch"),
        ("shm", "put.warm.", "shared_memory"), ("ray", "put.warm.", "Ray, warm"),
        ("upstream", "put.warm.", "upstream, warm")], lambda v: v / 1e9, log_y=True)
    _series_panel(axes[1][0], t, "get latency vs size, another process (lower is better)", "µs", [
        (s, "get.", PEER_TITLES.get(s, s)) for s in SYSTEMS], lambda v: v * 1e6, log_y=True)
    _bars_panel(axes[1][1], t, "frames", "ms", 1e3, "DataFrame / Arrow Table put and get (lower is better)")
    _legend(axes[1][1])
    fig.suptitle(f"v6d-go benchmark ({doc['mode']}): {doc['machine']['cpu']}, {doc['machine']['date']}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return None


def _bars_panel(ax: Any, t: Table, group: str, unit: str, scale: float, title: str) -> None:
    """One bar per system for each figure of the group."""
    figs = [r.figure.id for r in t.figures() if r.figure.group == group]
    width = 0.8 / len(SYSTEMS)
    for i, s in enumerate(SYSTEMS):
        ys = [(t.value(f, s) or 0) * scale for f in figs]
        ax.bar([x + i * width for x in range(len(figs))], ys, width, label=PEER_TITLES.get(s, s))
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(figs))], figs, rotation=30)
    ax.set_yscale("log")
    ax.set_ylabel(unit)
    ax.set_title(title)


def _series_panel(ax: Any, t: Table, title: str, unit: str, series: list[tuple[str, str, str]],
                  scale: Callable[[float], float], log_y: bool = False) -> None:
    for system, prefix, label in series:
        pts = sorted((r.figure.nbytes, scale(v)) for r in t.results
                     if r.system == system and r.figure.id.startswith(prefix) and r.figure.kind != "rate"
                     and not _is_control(r.figure.id) and r.figure.nbytes and (v := r.value()) is not None)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    ax.set_xscale("log", base=2)
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel("bytes")
    ax.set_ylabel(unit)
    ax.set_title(title)
    _legend(ax)


def _legend(ax: Any) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)


# -- files -------------------------------------------------------------------------


def write(doc: dict[str, Any], out: Path) -> list[str]:
    """Writes latest.json, latest.md and latest.png into out; returns notes to print."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "latest.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    (out / "latest.md").write_text(markdown(doc))
    why = chart(doc, out / "latest.png")
    return [why] if why else []


def self_check(out: Path) -> list[str]:
    """Re-reads what write() wrote and returns the problems found (none: [])."""
    problems = []
    doc = json.loads((out / "latest.json").read_text())
    md = (out / "latest.md").read_text()
    if md != markdown(doc):
        problems.append("latest.md differs from the Markdown rendered again from latest.json")
    for d in doc["results"]:
        if d["title"] not in md:
            problems.append(f"{d['figure']} ({d['system']}) is missing from latest.md")
        if d["status"] == OK and not (d["p10"] <= d["median"] <= d["p90"]):
            problems.append(f"{d['figure']} ({d['system']}): p10/median/p90 out of order")
    return problems
