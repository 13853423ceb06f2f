"""The agent: drives one system from inside that system's Python environment.

Run as ``python -m harness.agent NAME`` with benchmarks/ on the path (and, for ours,
python/). It answers the JSON-lines commands of harness/jsonlines.py (one per line on
stdin, one reply per line on the stdout it was started with; everything else the process
prints goes to stderr). A reply is ``{"ok": true, ...}``, ``{"ok": false, "na": why}``
when the figure does not apply to the system, or ``{"ok": false, "error": ..., "trace": ...}``.

Every timed loop runs with the garbage collector off (as ``timeit`` does) and times only
the operation named; making values, handing references over and deleting are outside.
Each command returns per-operation durations in seconds, one per trial; a warm-up trial
is run first and not reported (put_small and get skip it when told ``warmup=False``: the
runner interleaves their trials across systems and warms each up once).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import sys
import time
from collections.abc import Iterator
from typing import Any, Callable

from . import cpu, jsonlines, values
from .systems import NAMES
from .systems.base import Consumer, NotApplicable, System


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class Agent:
    def __init__(self, system: System) -> None:
        self.system = system
        self._consumer: Consumer | None = None
        self._stopped = False

    def consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = self.system.consumer()
        return self._consumer

    def _value(self, spec: dict[str, Any], put: bool = True) -> Any:
        self.system.check_kind(spec["kind"])
        if put and not self.system.can_put:
            raise NotApplicable(f"{self.system.name} stores nothing on put")
        return values.make(spec)

    # -- commands ----------------------------------------------------------

    def start(self, cfg: dict[str, Any]) -> dict[str, Any]:
        return {"info": self.system.start(cfg)}

    def stop(self) -> dict[str, Any]:
        """Stops the consumer and the system. Idempotent."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        if not self._stopped:
            self._stopped = True
            self.system.stop()
        return {}

    def _daemon_cpu(self) -> float | None:
        pid = self.system.daemon_pid()
        return cpu.process_seconds(pid) if pid is not None else None

    def put_small(self, spec: dict[str, Any], trials: int, inner: int, warmup: bool = True) -> dict[str, Any]:
        """inner puts of distinct objects per trial; then they are deleted. Also the CPU
        seconds per put of this process (``cpu_client``) and of the daemon
        (``cpu_daemon``, none without one), read around the loop; the daemon's after it
        handled the loop's puts (System.settle)."""
        value = self._value(spec)
        out: list[float] = []
        mine: list[float] = []
        theirs: list[float] = []
        for trial in range(0 if warmup else 1, trials + 1):
            refs: list[Any] = []
            with _no_gc():
                d0, c0 = self._daemon_cpu(), time.process_time()
                t0 = time.perf_counter()
                for _ in range(inner):
                    refs.append(self.system.put(value))
                dt = time.perf_counter() - t0
                c1 = time.process_time()
                self.system.settle()
                d1 = self._daemon_cpu()
            self.system.delete(refs)
            refs.clear()
            if trial:
                out.append(dt / inner)
                mine.append((c1 - c0) / inner)
                if d0 is not None and d1 is not None:
                    theirs.append((d1 - d0) / inner)
        return {"samples": out, "cpu_client": mine, "cpu_daemon": theirs}

    def put_warm(self, spec: dict[str, Any], trials: int) -> dict[str, Any]:
        """put, then delete, trials times: each put reuses memory the last one freed.
        The garbage collector is off for the whole series, collected once before it:
        a collection right before each put (as ``_no_gc`` per put did) walks the
        process's heap and evicts the caches, and timed a 1 MiB put at 2-2.5x its
        time in a series of puts, for every system (docs/performance.md, issue 37)."""
        value = self._value(spec)
        out = []
        with _no_gc():
            for trial in range(trials + 1):
                t0 = time.perf_counter()
                ref = self.system.put(value)
                dt = time.perf_counter() - t0
                refs = [ref]
                del ref
                self.system.delete(refs)
                refs.clear()
                if trial:
                    out.append(dt)
        return {"samples": out}

    def put_cold(self, specs: list[dict[str, Any]], trials: int) -> dict[str, Any]:
        """trials puts of each spec, smallest first, deleting nothing until the end, so
        that every put lands on memory no put touched before (call it first)."""
        kept: list[Any] = []
        out: dict[str, list[float]] = {}
        try:
            for spec in specs:
                value = self._value(spec)
                samples = []
                for _ in range(trials):
                    with _no_gc():
                        t0 = time.perf_counter()
                        kept.append(self.system.put(value))
                        samples.append(time.perf_counter() - t0)
                out[str(values.nbytes(spec))] = samples
                del value
        finally:
            self.system.delete(kept)
            kept.clear()
        return {"samples": out}

    def get(self, spec: dict[str, Any], trials: int, inner: int, warmup: bool = True,
            prime: bool = False, ballast: dict[str, Any] | None = None) -> dict[str, Any]:
        """Per trial: inner distinct objects are put here (untimed), their refs handed to
        the consumer process, which times get + drop of each; then they are deleted.

        With prime, each timed get is preceded (untimed) by the get of a distinct 8-byte
        object. For large values: a single get timed right after the producer copied
        hundreds of megabytes finds the CPU caches and TLB full of that copy, and measures
        that (for every system alike, shared_memory included), not the get; the small
        gets amortise it over many. A primer warms the get path again first.

        With ballast (a spec), each trial first puts one value of it (untimed, deleted
        with the rest), so that the gets of small objects follow the same large copy a
        get of a large one does: the control that tells the size's cost from the
        copy's."""
        value = self._value(spec, put=False)
        expect = values.size_of(value)
        primer = values.make(values.array(8)) if prime else None
        consumer = self.consumer()
        out = []
        heavy = values.make(ballast) if ballast is not None else None
        # The warm-up trial is a whole one for small values, as the puts' is: a young
        # consumer process pays for mapping pages its first gets touch (for ours, some
        # 160 page faults in its first 200 gets, none a few trials later), which
        # benchmarks/first_gets.py measures on its own. Large values warm up with three.
        warm = min(inner, 3) if prime else inner
        for trial in range(0 if warmup else 1, trials + 1):
            weight = [self.system.put(heavy)] if heavy is not None else []
            refs = [self.system.put(value) for _ in range(inner if trial else warm)]
            primers = [self.system.put(primer) for _ in refs] if primer is not None else []
            try:
                times = consumer.time_gets(refs, expect, primers or None)
            finally:
                self.system.delete(refs + primers + weight)
                refs.clear()
                primers.clear()
                weight.clear()
            if trial:
                out.append(sum(times) / len(times))
        return {"samples": out}

    def concurrency(self, spec: dict[str, Any], procs: int, ops: int, trials: int,
                    cross: bool = False) -> dict[str, Any]:
        """procs clients at once, each ops x (put + get) of its own objects. Reports the
        per-op latency (median over clients), the aggregate rate in ops/s, and the CPU
        seconds per put + get of the clients (``cpu_client``) and of the daemon
        (``cpu_daemon``: from the first client's start to the last one's end).

        cross: each op still puts the client's own object, but gets one this process put
        before the trial (untimed), ops distinct objects per client: every get is of an
        object another process put. Each trial then has processes of its own, so that at
        most one trial's objects are stored (and, for shm, open) at a time."""
        value = self._value(spec)
        if cross:
            spans = []
            for _ in range(trials):
                handed = [[self.system.put(value) for _ in range(ops)] for _ in range(procs)]
                try:
                    spans += self.system.run_concurrent(procs, ops, spec, 1, [[refs] for refs in handed])
                finally:
                    self.system.delete([r for refs in handed for r in refs])
                    handed.clear()
        else:
            spans = self.system.run_concurrent(procs, ops, spec, trials)
        latency, rate, mine, theirs = [], [], [], []
        for trial in spans:
            per_op = sorted((s[1] - s[0]) / ops for s in trial)
            latency.append(per_op[len(per_op) // 2])
            wall = max(s[1] for s in trial) - min(s[0] for s in trial)
            rate.append(procs * ops / wall)
            if all(len(s) > 2 for s in trial):
                mine.append(sum(s[2] for s in trial) / (procs * ops))
                if all(s[3] is not None and s[4] is not None for s in trial):
                    theirs.append((max(s[4] for s in trial) - min(s[3] for s in trial)) / (procs * ops))
        return {"samples": latency, "rate": rate, "cpu_client": mine, "cpu_daemon": theirs}


def main() -> int:
    replies = jsonlines.take_stdout()  # before the system's modules are imported
    agent = Agent(importlib.import_module(NAMES[sys.argv[1]]).SYSTEM())
    handlers: dict[str, Callable[..., dict[str, Any]]] = {
        "start": agent.start, "stop": agent.stop, "put_small": agent.put_small, "put_warm": agent.put_warm,
        "put_cold": agent.put_cold, "get": agent.get, "concurrency": agent.concurrency,
    }
    try:
        jsonlines.serve(handlers, replies=replies, answers={NotApplicable: "na"}, last=("stop",))
    finally:
        # The harness went away without a stop (Ctrl-C, a crash): stop the daemons and
        # consumers anyway, so that none outlives the run.
        with contextlib.suppress(Exception):
            agent.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
