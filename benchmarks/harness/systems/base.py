"""What a system under test provides, and the generic consumer process.

A system is driven by one agent process (the producer). Gets are timed in a consumer:
by default a process started with the ``spawn`` method (the Go runtime inside libv6d
does not survive ``fork``) that attaches to the system on its own, receives references
over a pipe and times ``get`` + drop of each. Every timed get is the first get of that
object in the consumer, so no system can answer from a per-process cache.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing as mp
import time
from collections.abc import Callable
from typing import Any


class NotApplicable(Exception):
    """The figure does not apply to this system (e.g. a DataFrame in raw shared memory)."""


class Consumer:
    """Times gets in a process other than the producer's."""

    def time_gets(self, refs: list[Any], expect_nbytes: int, primers: list[Any] | None = None) -> list[float]:
        """Gets each ref once (get, then drop the value); returns each duration in
        seconds. Fails if a value does not hold ``expect_nbytes`` bytes. With primers
        (one per ref), gets and drops primers[i] untimed right before refs[i]."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class System:
    """One store as seen from one process."""

    name = ""
    kinds = frozenset({"array", "frame", "table"})  # the value kinds it can store
    can_put = True  # False: nothing is stored by a put (the pickle pipe)
    concurrent = True  # attach() works in spawned worker processes

    def start(self, cfg: dict[str, Any]) -> dict[str, Any]:
        """Starts what the system needs (daemon, cluster) and connects; returns facts
        for the report (``version``, ...). cfg: ``arena`` bytes, ``log`` path."""
        return {}

    def stop(self) -> None:
        pass

    def attach_info(self) -> Any:
        """What another process needs to attach (picklable)."""
        return None

    @classmethod
    def attach(cls, info: Any) -> System:
        """A client of the running system, in another process."""
        raise NotImplementedError

    def detach(self) -> None:
        pass

    def put(self, value: Any) -> Any:
        """Stores value; returns a picklable reference."""
        raise NotImplementedError

    def get(self, ref: Any) -> Any:
        raise NotImplementedError

    def delete(self, refs: list[Any]) -> None:
        """Frees what the refs name (memory may then be reused)."""

    def daemon_pid(self) -> int | None:
        """The pid of the system's daemon, whose CPU is reported per operation (None:
        no daemon of one process)."""
        return None

    def settle(self) -> None:
        """Waits until the daemon handled every request this client sent (a put may
        return before the daemon read it), so that its CPU time read next counts them."""

    def consumer(self) -> Consumer:
        return ProcessConsumer(type(self), self.attach_info())

    def run_concurrent(self, procs: int, ops: int, spec: dict[str, Any], trials: int,
                       handed: list[list[list[Any]]] | None = None) -> list[list[list[float]]]:
        """Runs ``procs`` client processes at once, each doing ``ops`` times put + get
        (+ drop) of its own ``spec`` value, ``trials`` times (all starting together);
        returns, per trial, the ``[start, end, cpu, daemon0, daemon1]`` of each process:
        wall-clock times, its CPU seconds in the loop, and the daemon's CPU seconds
        (harness.cpu) at its start and once the daemon handled its loop (None without
        a daemon).

        With handed (per process, per trial, ``ops`` refs that another process put),
        each op still puts the process's own value but gets the next handed ref
        instead: a cross-process get."""
        if not self.concurrent:
            raise NotApplicable(f"{self.name} has no store that several clients can share")
        ctx = mp.get_context("spawn")
        barrier = ctx.Barrier(procs)
        queue = ctx.Queue()
        cls = type(self)
        workers = [ctx.Process(target=_worker_main, args=(cls.__module__, cls.__name__, self.attach_info(), spec,
                                                          ops, trials, barrier, queue, handed[i] if handed else None,
                                                          self.daemon_pid()),
                               daemon=True) for i in range(procs)]
        for w in workers:
            w.start()
        try:
            out = [queue.get(timeout=600) for _ in workers]
        finally:
            for w in workers:
                w.join(60)
                if w.is_alive():
                    w.kill()
        errors = [o for o in out if isinstance(o, str)]
        if errors:
            raise RuntimeError(errors[0])
        return [[o[t] for o in out] for t in range(trials)]

    def check_kind(self, kind: str) -> None:
        if kind not in self.kinds:
            raise NotApplicable(f"{self.name} does not store {kind} values")


class DaemonClient(System):
    """A system with a daemon this agent starts, and a client per process."""

    def __init__(self) -> None:
        self.daemon: Any = None  # a daemons.Daemon, in the producer only
        self.client: Any = None

    def daemon_pid(self) -> int | None:
        return self.daemon.proc.pid if self.daemon is not None else None

    @classmethod
    def connect(cls, socket: str) -> Any:
        raise NotImplementedError

    def stop(self) -> None:
        if self.client is not None:
            self.detach()
            self.client = None
        if self.daemon is not None:
            self.daemon.stop()
            self.daemon = None

    def attach_info(self) -> Any:
        return self.daemon.socket

    @classmethod
    def attach(cls, info: Any) -> System:
        self = cls()
        self.client = cls.connect(info)
        return self

    def detach(self) -> None:
        with contextlib.suppress(Exception):  # best effort at teardown
            self.client.close()


def time_gets(name: str, get: Callable[[Any], Any], refs: list[Any], expect: int,
              primers: list[Any] | None = None) -> list[float]:
    """Times get + drop of each ref (the size check in between is not timed). A primer
    is got and dropped, untimed, right before its ref: see Agent.get."""
    from .. import values

    times = []
    for i, ref in enumerate(refs):
        if primers:
            v = get(primers[i])
            del v
        t0 = time.perf_counter()
        v = get(ref)
        t1 = time.perf_counter()
        n = values.size_of(v)
        del v
        t2 = time.perf_counter()
        if n != expect:
            raise AssertionError(f"{name}: get returned {n} bytes, expected {expect}")
        times.append((t1 - t0) + (time.perf_counter() - t2))
    return times


def _consumer_main(module: str, cls_name: str, info: Any, conn: Any) -> None:
    system = getattr(importlib.import_module(module), cls_name).attach(info)
    try:
        while True:
            msg = conn.recv()
            if msg[0] == "quit":
                break
            _, refs, expect, primers = msg
            try:
                conn.send(("ok", time_gets(system.name, system.get, refs, expect, primers)))
            except Exception as e:  # noqa: BLE001 - reported to the producer
                conn.send(("error", f"{type(e).__name__}: {e}"))
    finally:
        system.detach()


def _worker_main(module: str, cls_name: str, info: Any, spec: dict[str, Any], ops: int, trials: int,
                 barrier: Any, queue: Any, handed: list[list[Any]] | None, daemon: int | None = None) -> None:
    from .. import cpu, values

    def daemon_cpu() -> float | None:
        return cpu.process_seconds(daemon) if daemon is not None else None

    try:
        system = getattr(importlib.import_module(module), cls_name).attach(info)
        value = values.make(spec)
        refs = []
        for _ in range(3):
            refs.append(system.put(value))
            system.get(refs[-1])
        spans = []
        for trial in range(trials):
            gets = handed[trial] if handed else None
            barrier.wait(timeout=300)
            d0, c0, t0 = daemon_cpu(), time.process_time(), time.time()
            for i in range(ops):
                ref = system.put(value)
                v = system.get(ref if gets is None else gets[i])
                del v
                refs.append(ref)
            t1, c1 = time.time(), time.process_time()
            system.settle()
            spans.append([t0, t1, c1 - c0, d0, daemon_cpu()])
            # Deletes only once every process's loop is over: one client's deletes
            # never count in another's loop, as none count in a single client's.
            barrier.wait(timeout=300)
            system.delete(refs)
            refs.clear()
        system.detach()
        queue.put(spans)
    except Exception as e:  # noqa: BLE001 - reported to the producer
        barrier.abort()
        queue.put(f"{type(e).__name__}: {e}")


class ProcessConsumer(Consumer):
    """A spawned process attached to the system, timing gets."""

    def __init__(self, cls: type, info: Any) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc: Any | None = ctx.Process(target=_consumer_main, args=(cls.__module__, cls.__name__, info, child),
                                                daemon=True)
        self._proc.start()
        child.close()

    def time_gets(self, refs: list[Any], expect_nbytes: int, primers: list[Any] | None = None) -> list[float]:
        self._conn.send(("get", refs, expect_nbytes, primers))
        status, payload = self._conn.recv()
        if status != "ok":
            raise RuntimeError(payload)
        return payload

    def close(self) -> None:
        if self._proc is not None:
            try:
                self._conn.send(("quit",))
            except OSError:
                pass
            self._proc.join(30)
            if self._proc.is_alive():
                self._proc.kill()
            self._proc = None
