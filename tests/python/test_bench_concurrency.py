"""The benchmark harness's concurrency runner (benchmarks/harness) against a real daemon
and real client processes: conc.Np.xrate's clients get the objects another process put."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from harness import values
from harness.agent import Agent
from harness.systems.ours import Ours

SPEC = values.array(1024)


@pytest.fixture
def ours(tmp_path):
    """Ours as an agent starts it: its own daemon, and a client in this process."""
    system = Ours()
    system.start({"arena": 256 << 20, "log": str(tmp_path / "daemon.log")})
    yield system
    system.stop()


def test_cross_process_rate_gets_what_the_producer_put(ours):
    before = ours.client.status.memory_usage
    got = Agent(ours).concurrency(SPEC, procs=2, ops=5, trials=2, cross=True)
    assert len(got["rate"]) == 2 and all(r > 0 for r in got["rate"])
    same = Agent(ours).concurrency(SPEC, procs=2, ops=5, trials=1)
    assert len(same["rate"]) == 1 and len(same["samples"]) == 1
    assert ours.client.status.memory_usage <= before, "the handed objects are deleted after each trial"


def test_a_client_fails_on_a_handed_ref_that_is_gone(ours):
    value = values.make(SPEC)
    handed = [[[ours.put(value) for _ in range(3)]]]
    ours.delete(handed[0][0])
    with pytest.raises(RuntimeError):
        ours.run_concurrent(1, 3, SPEC, 1, handed)
