"""Runs one benchmark: baselines, the C figures, then ours and each peer in an agent."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any, Callable

from . import agents, baselines, cbench, values
from .plan import Figure, Mode, Selection, baseline_figures, c_figures, cpu_of, system_figures
from .results import FAILED, NA, OK, SKIPPED, Progress, Result

ROOT = agents.ROOT

# Warm puts of at most MEDIUM_TRIALS_UPTO bytes run at least MEDIUM_TRIALS trials.
MEDIUM_TRIALS_UPTO, MEDIUM_TRIALS = 16 << 20, 15


def library() -> Path:
    return Path(os.environ.get("V6D_LIBRARY") or ROOT / "build" / "libv6d.so")


def daemon_binary() -> str:
    return os.environ.get("VINEYARDD") or str(ROOT / "build" / "vineyardd")


class Runner:
    def __init__(self, mode: Mode, selection: Selection, peers: Sequence[str], work: Path) -> None:
        self.mode = mode
        self.sel = selection
        self.peers = list(peers)
        self.work = work  # logs and the compiled C program
        self.work.mkdir(parents=True, exist_ok=True)
        self.results: list[Result] = []
        self._floor_samples: dict[str, list[float]] = {}
        self._floor_errors: dict[str, str] = {}
        self._kept: dict[str, agents.AgentProcess] = {}
        self._floors: list[Figure] = []
        self._interleaved_rtt: list[float] = []
        self.systems: dict[str, dict[str, Any]] = {}
        self._cpu: dict[tuple[str, str | None], list[Figure]] = {}
        self.plan = self._plan()
        self.progress = Progress(sum(len(figs) for _, figs in self.plan) + sum(len(v) for v in self._cpu.values()))

    def _plan(self) -> list[tuple]:
        def pick(system: str, figs: list[Figure]) -> list[Figure]:
            return [f for f in figs if self.sel.wants(f.id, system)]

        plan = [("baseline", pick("baseline", baseline_figures(self.mode))), ("c", pick("ours", c_figures(self.mode)))]
        for name in ["ours"] + self.peers:
            figs = pick(name, system_figures(self.mode))
            # A CPU figure is measured by the command of the figure it belongs to.
            for f in figs:
                if f.group == "cpu":
                    self._cpu.setdefault((name, cpu_of(f.id)), []).append(f)
            plan.append((name, [f for f in figs if f.group != "cpu"]))
        return [(name, figs) for name, figs in plan if figs]

    def record_cpu(self, base: Figure, system: str, reply: dict[str, Any] | None,
                   samples: dict[str, list[float]] | None = None) -> None:
        """Records the CPU figures measured with base: from reply's cpu_client and
        cpu_daemon, or samples gathered over interleaved trials; n/a when the
        system reported none, failed when base's command did."""
        for f in self._cpu.pop((system, base.id), []):
            who = "cpu_" + f.id.rsplit(".", 1)[1]
            got = samples.get(who) if samples is not None else reply.get(who) if reply and reply.get("ok") else None
            if got:
                self.record(f, system, OK, got)
            elif reply is not None and not reply.get("ok") and "na" not in reply:
                self.record(f, system, FAILED, reason=f"{base.id} failed")
            else:
                self.record(f, system, NA, reason=f"{system} reports no {who.replace('_', ' ')} time")

    def record(self, fig: Figure, system: str, status: str, samples: Sequence[float] = (), reason: str = "") -> None:
        r = Result(fig, system, status, list(samples), reason)
        self.results.append(r)
        self.progress.record(r)

    def measure(self, fig: Figure, system: str, fn: Callable[[], Sequence[float]]) -> None:
        try:
            self.record(fig, system, OK, fn())
        except Exception as e:  # noqa: BLE001 - a figure that fails is reported, the run goes on
            self.record(fig, system, FAILED, reason=f"{type(e).__name__}: {e}")

    def run(self) -> list[Result]:
        floors = self._floors = [f for name, figs in self.plan if name == "baseline" for f in figs
                                 if f.id.startswith(("rtt.", "memcpy.warm."))]
        chunks = len(self.plan) + 1
        small = []
        try:
            for name, figs in self.plan:
                self._floor_chunk(floors, chunks)
                if name == "baseline":
                    self.run_baselines([f for f in figs if f not in floors])
                elif name == "c":
                    self.run_c(figs)
                else:
                    small.append((name, [f for f in figs if f.group == "small"]))
                    if any(f.group != "small" for f in figs):
                        self.run_system(name, [f for f in figs if f.group != "small"])
            self.run_interleaved(small)
        finally:
            for agent in self._kept.values():
                agent.close()
            self._kept.clear()
        self._floor_chunk(floors, chunks)
        for (name, _), figs in self._cpu.items():
            for f in figs:
                self.record(f, name, SKIPPED, reason="the figure whose command measures it did not run")
        self._cpu.clear()
        baselines.release()
        if self._interleaved_rtt:
            self._floor_samples["rtt.python"] = self._interleaved_rtt
            self._floor_errors.pop("rtt.python", None)
        for fig in floors:
            if fig.id in self._floor_errors:
                self.record(fig, "baseline", FAILED, reason=self._floor_errors[fig.id])
            else:
                self.record(fig, "baseline", OK, self._floor_samples[fig.id])
        return self.results

    def _floor_chunk(self, figs: list[Figure], chunks: int) -> None:
        """Some trials of the floors that ratios are taken against (socket round trips,
        warm memcpy). They run before, between and after the systems, so that each floor
        is measured throughout the run, under the same load as the figures it is
        compared with: the machine is shared and its load drifts."""
        m = self.mode
        for fig in figs:
            if fig.id in self._floor_errors:
                continue
            try:
                if fig.id == "rtt.python":
                    got = baselines.socket_rtt(-(-m.trials // chunks) + 1, m.rtt_inner)
                elif fig.id == "rtt.c":
                    got = cbench.socket_rtt(self.c_program(), -(-m.trials // chunks) + 1, m.rtt_inner)
                else:
                    got = baselines.memcpy_warm(fig.nbytes, -(-m.large_trials // chunks) + 1)
                self._floor_samples.setdefault(fig.id, []).extend(got)
            except Exception as e:  # noqa: BLE001 - reported as the figure's failure
                self._floor_errors[fig.id] = f"{type(e).__name__}: {e}"

    def run_baselines(self, figs: list[Figure]) -> None:
        m = self.mode
        for fig in figs:
            if fig.id.startswith("memcpy.cold."):
                self.measure(fig, "baseline", partial(baselines.memcpy_cold, fig.nbytes, m.cold_trials))

    _c_program: Path | None = None

    def c_program(self) -> Path:
        if self._c_program is None:
            self._c_program = cbench.build(library(), self.work / "bench_c")
        return self._c_program

    def run_c(self, figs: list[Figure]) -> None:
        m = self.mode
        sizes = sorted({f.nbytes for f in figs})
        try:
            got = cbench.client(self.c_program(), daemon_binary(), sizes, m.trials, m.inner, str(self.work / "c.log"))
        except Exception as e:  # noqa: BLE001 - reported against each C figure
            for fig in figs:
                self.record(fig, "ours", FAILED, reason=f"{type(e).__name__}: {e}")
            return
        for fig in figs:
            self.record(fig, "ours", OK, got[fig.nbytes][fig.id.split(".")[1]])

    # -- in an agent -------------------------------------------------------

    def python_for(self, name: str) -> str:
        if name in agents.REQUIREMENTS:
            with open(self.work / f"venv-{name}.log", "a") as log:
                return agents.ensure_venv(name, log)
        return sys.executable

    def _start_agent(self, name: str, figs: list[Figure]) -> agents.AgentProcess | None:
        """Starts the system's agent, or records its figures as skipped, with why."""
        agent = None
        try:
            agent = agents.AgentProcess(name, self.python_for(name), self.work / f"{name}.log")
            reply = agent.call("start", timeout=600, cfg={"arena": self.mode.arena(),
                                                           "prefault_ahead": self.mode.prefault_ahead(),
                                                           "log": str(self.work / f"{name}-daemon.log")})
            if reply["ok"]:
                self.systems[name] = {"status": OK, **reply["info"]}
                return agent
            reason = f"did not start: {reply.get('error') or reply.get('na')}"
        except Exception as e:  # noqa: BLE001 - the peer is skipped, with why
            reason = str(e)
        if agent is not None:
            agent.close()
        for fig in figs:
            self.record(fig, name, SKIPPED, reason=reason)
        self.systems[name] = {"status": SKIPPED, "reason": reason}
        return None

    def _fail_rest(self, name: str, figs: list[Figure], e: Exception) -> None:
        """The agent died: the figures it has not done fail."""
        done = {r.figure.id for r in self.results if r.system == name}
        for fig in figs:
            if fig.id not in done:
                self.record(fig, name, FAILED, reason=f"{type(e).__name__}: {e}")

    def run_system(self, name: str, figs: list[Figure]) -> None:
        agent = self._start_agent(name, figs)
        if agent is None:
            return
        try:
            self._agent_figures(agent, name, figs)
        except Exception as e:  # noqa: BLE001 - reported against each figure left
            self._fail_rest(name, figs, e)
            agent.close()
            return
        if self.mode.keep_agents:
            self._kept[name] = agent  # for run_interleaved: starting Ray again takes 10 s
        else:
            agent.close()  # its store may hold gigabytes of touched pages

    def run_interleaved(self, plan: list[tuple[str, list[Figure]]]) -> None:
        """The small put and get figures of every system, trial by trial in turn (the
        order rotating each round), so that each trial of each system sees about the
        same load: the figures the targets compare most closely."""
        m = self.mode
        live: dict[str, tuple[agents.AgentProcess, list[Figure]]] = {}
        echo = None
        if any(f.id == "rtt.python" for f in self._floors) and any(figs for _, figs in plan):
            echo = baselines.EchoPeer()  # the Python floor, one trial per round: see _interleave_figure
        for name, figs in plan:
            kept = self._kept.pop(name, None)
            if not figs:
                if kept is not None:
                    kept.close()
            elif kept is not None:
                live[name] = (kept, figs)
            elif self.systems.get(name, {}).get("status") != SKIPPED:
                agent = self._start_agent(name, figs)
                if agent is not None:
                    live[name] = (agent, figs)
            else:
                for fig in figs:
                    self.record(fig, name, SKIPPED, reason=self.systems[name].get("reason", ""))
        try:
            for fid in dict.fromkeys(f.id for _, figs in plan for f in figs):
                self._interleave_figure(fid, live, m, echo)
        finally:
            for agent, _ in live.values():
                agent.close()
            if echo is not None:
                echo.close()

    def _interleave_figure(self, fid: str, live: dict[str, tuple[agents.AgentProcess, list[Figure]]],
                           m: Mode, echo: baselines.EchoPeer | None) -> None:
        names = [n for n, (_, figs) in live.items() if any(f.id == fid for f in figs)]
        if not names:
            return
        fig = {n: next(f for f in live[n][1] if f.id == fid) for n in names}
        samples: dict[str, list[float]] = {n: [] for n in names}
        cpu: dict[str, dict[str, list[float]]] = {n: {"cpu_client": [], "cpu_daemon": []} for n in names}
        for rnd in range(m.trials):
            if echo is not None:
                # The Python socket round trip the small Python figures are held against,
                # measured in the same rounds, under the same load.
                self._interleaved_rtt.append(echo.trial(m.rtt_inner))
            for name in names[rnd % len(names):] + names[:rnd % len(names)]:
                if name not in samples:
                    continue
                f = fig[name]
                cmd = "put_small" if fid.startswith("put.") else "get"
                try:
                    reply = self._call(live[name][0], cmd, spec=values.array(f.nbytes), trials=1, inner=m.inner,
                                       warmup=rnd == 0)
                except Exception as e:  # noqa: BLE001 - the agent died: its figures fail
                    self.record(f, name, FAILED, reason=f"{type(e).__name__}: {e}")
                    self.record_cpu(f, name, {"ok": False, "error": str(e)})
                    del samples[name]
                    continue
                if reply["ok"]:
                    samples[name] += reply["samples"]
                    for who, got in cpu[name].items():
                        got += reply.get(who, [])
                else:
                    self._record_reply(f, name, reply)
                    self.record_cpu(f, name, reply)
                    del samples[name]
        for name, got in samples.items():
            self.record(fig[name], name, OK, got)
            self.record_cpu(fig[name], name, {"ok": True}, cpu[name])

    def _call(self, agent: agents.AgentProcess, cmd: str, **args: Any) -> dict[str, Any]:
        return agent.call(cmd, timeout=self.mode.timeout, **args)

    def _record_reply(self, fig: Figure, name: str, reply: dict[str, Any], key: str = "samples") -> None:
        if reply["ok"]:
            self.record(fig, name, OK, reply[key])
        elif "na" in reply:
            self.record(fig, name, NA, reason=reply["na"])
        else:
            with open(self.work / f"{name}.log", "a") as log:
                log.write(f"\n{fig.id}: {reply.get('trace', '')}\n")
            self.record(fig, name, FAILED, reason=reply["error"])

    def _agent_figures(self, agent: agents.AgentProcess, name: str, figs: list[Figure]) -> None:
        m = self.mode
        cold = [f for f in figs if f.id.startswith("put.cold.")]
        if cold:
            reply = self._call(agent, "put_cold", specs=[values.array(f.nbytes) for f in cold], trials=m.cold_trials)
            for f in cold:
                sub = dict(reply, samples=reply["samples"][str(f.nbytes)]) if reply["ok"] else reply
                self._record_reply(f, name, sub)
        frame = {"pandas": values.frame(m.frame_rows, m.frame_cols), "arrow": values.table(m.frame_rows, m.frame_cols)}
        for f in figs:
            group, _, rest = f.id.partition(".")
            if f.id.startswith("put.cold."):
                continue
            if f.id.startswith("put.warm."):
                # Medium puts take milliseconds: more trials cost little and steady the
                # median that issue 37's target holds against a warm memcpy.
                trials = m.large_trials if f.nbytes > MEDIUM_TRIALS_UPTO else max(m.large_trials, MEDIUM_TRIALS)
                reply = self._call(agent, "put_warm", spec=values.array(f.nbytes), trials=trials)
            elif f.id.startswith("get.8B.after."):
                ballast = max(m.large)
                reply = self._call(agent, "get", spec=values.array(8), trials=m.large_trials,
                                   inner=m.get_inner(ballast), prime=True, ballast=values.array(ballast))
            elif group == "get":
                reply = self._call(agent, "get", spec=values.array(f.nbytes),
                                   trials=m.trials if f.nbytes in m.small else m.large_trials,
                                   inner=m.get_inner(f.nbytes), prime=f.nbytes not in m.small)
            elif group == "conc":
                # One command measures both conc.Np.latency and conc.Np.rate; another
                # conc.Np.xrate, whose gets are of objects another process put.
                procs = int(rest.split("p.")[0])
                cross = rest.endswith(".xrate")
                pair = [g for g in figs if g.id.startswith(f"conc.{procs}p.") and g.id.endswith(".xrate") == cross]
                if f is not pair[0]:
                    continue
                reply = self._call(agent, "concurrency", spec=values.array(m.conc_size), procs=procs, ops=m.conc_ops,
                                   trials=m.conc_trials, cross=cross)
                for g in pair:
                    self._record_reply(g, name, reply, key="rate" if g.kind == "rate" else "samples")
                    self.record_cpu(g, name, reply)
                continue
            elif rest == "put":
                reply = self._call(agent, "put_warm", spec=frame[group], trials=m.frame_trials)
            elif rest == "get":
                reply = self._call(agent, "get", spec=frame[group], trials=m.frame_trials, inner=1, prime=True)
            else:
                raise ValueError(f"no command measures {f.id}")
            self._record_reply(f, name, reply)

