"""Ray (``ray.put`` / ``ray.get``), run in its own virtual environment.

The producer is the driver; the consumer is an actor, so that every timed get is in
another process and goes through Ray's object store: a get in the putting process
could be answered from the owner's in-process memory store. The refs reach the actor
wrapped in a list (Ray would otherwise resolve them before the call) and each is got
once. Concurrency runs one actor per client, each putting its own objects and getting them
(or, cross-process, objects the driver put).
"""

from __future__ import annotations

import time
from typing import Any

from .base import Consumer, System, time_gets


def _loop(spec: dict[str, Any], ops: int, start_at: float, gets: list[Any] | None = None) -> list[float]:
    """put + get of the worker's own small objects, ops times, from ``start_at``; with
    gets (ops refs another process put), each op gets the next of those instead."""
    import ray

    from .. import values

    value = values.make(spec)
    ray.get(ray.put(value))
    while time.time() < start_at:
        time.sleep(0.001)
    t0 = time.time()
    for i in range(ops):
        ref = ray.put(value)
        v = ray.get(ref if gets is None else gets[i])
        del v, ref
    return [t0, time.time()]


class _ActorConsumer(Consumer):
    def __init__(self) -> None:
        import ray

        self._actor = ray.remote(num_cpus=0)(_Getter).remote()
        ray.get(self._actor.ready.remote())

    def time_gets(self, refs: list[Any], expect_nbytes: int, primers: list[Any] | None = None) -> list[float]:
        import ray

        return ray.get(self._actor.time_gets.remote([refs, primers or []], expect_nbytes))

    def close(self) -> None:
        import ray

        ray.kill(self._actor)


class _Getter:
    def ready(self) -> bool:
        return True

    def time_gets(self, wrapped: list[list[Any]], expect: int) -> list[float]:
        import ray

        return time_gets("ray", ray.get, wrapped[0], expect, wrapped[1])

    def loop(self, spec: dict[str, Any], ops: int, start_at: float, wrapped: list[Any]) -> list[float]:
        return _loop(spec, ops, start_at, wrapped[0] if wrapped else None)


class Ray(System):
    name = "ray"

    def __init__(self) -> None:
        self._clients: list[Any] = []

    def start(self, cfg: dict[str, Any]) -> dict[str, Any]:
        import ray

        ray.init(num_cpus=4, include_dashboard=False, object_store_memory=int(cfg["arena"]),
                 log_to_driver=False, logging_level="warning")
        return {"version": ray.__version__}

    def stop(self) -> None:
        import ray

        for a in self._clients:
            ray.kill(a)
        ray.shutdown()

    def put(self, value: Any) -> Any:
        import ray

        return ray.put(value)

    def get(self, ref: Any) -> Any:
        import ray

        return ray.get(ref)

    def delete(self, refs: list[Any]) -> None:
        pass  # Ray frees an object once no reference is left; the agent drops its refs

    def consumer(self) -> Consumer:
        return _ActorConsumer()

    def run_concurrent(self, procs: int, ops: int, spec: dict[str, Any], trials: int,
                       handed: list[list[list[Any]]] | None = None) -> list[list[list[float]]]:
        import ray

        # Actors are kept from one client count to the next: starting one takes seconds.
        while len(self._clients) < procs:
            self._clients.append(ray.remote(num_cpus=0)(_Getter).remote())
        actors = self._clients[:procs]
        ray.get([a.ready.remote() for a in actors])
        out = []
        for trial in range(trials):
            start_at = time.time() + 0.2
            # Handed refs reach the actor wrapped in a list, so that Ray does not resolve them.
            out.append(ray.get([a.loop.remote(spec, ops, start_at, [handed[i][trial]] if handed else [])
                                for i, a in enumerate(actors)]))
        return out


SYSTEM = Ray
