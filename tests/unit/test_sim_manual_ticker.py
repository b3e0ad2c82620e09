"""In manual time the server's ticker leaves the physics to ``advance_by`` (issue 22).

A rehearsal drives the simulator in virtual time; a wall-clock tick running the physics between
two admin requests made its answers depend on where the 10 ms ticks fell.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from kafka_sim.server import SimulatedCluster

from test_sim_model_helpers import MB, snapshot, topic


def _counting(time_scale: float) -> tuple[SimulatedCluster, list[int]]:
    """A cluster whose model counts the ticker's ``advance`` calls (one 500 MB partition moving)."""
    cluster = SimulatedCluster(snapshot(brokers=4, topics=[topic("t", [[1, 2]], size=500 * MB)]),
                               time_scale=time_scale)
    calls: list[int] = []
    original = cluster.model.advance

    def advance() -> None:
        calls.append(1)
        original()
    cluster.model.advance = advance  # type: ignore[method-assign]
    return cluster, calls


def _wait_ticks(cluster: SimulatedCluster, ticks: int) -> None:
    """Wait until the ticker has run ``ticks`` times (each swaps the runtime's change event)."""
    runtime: Any = cluster._runtime
    deadline = time.monotonic() + 30
    for _ in range(ticks):
        seen = runtime._change
        while runtime._change is seen:
            assert time.monotonic() < deadline, "the ticker did not tick"
            time.sleep(0.002)


def _long_poll(cluster: SimulatedCluster, seconds: float) -> Any:
    """A request waiting for changes (as a long-poll fetch does: it re-checks and waits again
    until its deadline) on the cluster's loop."""
    runtime: Any = cluster._runtime

    async def poll() -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await runtime.wait_change(deadline - time.monotonic())
    return asyncio.run_coroutine_threadsafe(poll(), cluster._loop)


def test_manual_time_ticks_without_running_the_physics() -> None:
    cluster, calls = _counting(0.0)
    cluster.start()
    try:
        model = cluster.model
        assert model.alter_reassignments([("t", 0, [3, 4])])[0][2] == 0
        waiting = _long_poll(cluster, 0.5)
        _wait_ticks(cluster, 3)  # the ticks wake the waiter, who re-checks
        waiting.result(timeout=30)
        assert calls == []
        assert model.sim_time() == 0.0
        assert model.partition("t", 0).replica(3).exact_bytes() == 0.0
        model.advance_by(1.0)  # the physics runs when the clock is moved, and only then
        assert model.sim_time() == 1.0
        assert model.partition("t", 0).replica(3).exact_bytes() > 0.0
    finally:
        cluster.stop()


def test_wall_time_ticks_run_the_physics() -> None:
    cluster, calls = _counting(1.0)
    cluster.start()
    try:
        _wait_ticks(cluster, 3)
        assert len(calls) >= 3  # a tick runs the physics before it swaps the event
    finally:
        cluster.stop()


def test_manual_time_does_not_tick_while_nobody_waits() -> None:
    """A rehearsal sends no long polls: its ticker stays asleep instead of taking the interpreter
    lock from the rehearsal 100 times a second, and wakes for the first request that waits."""
    cluster, _calls = _counting(0.0)
    cluster.start()
    try:
        runtime: Any = cluster._runtime
        seen = runtime._change
        time.sleep(0.3)  # 30 ticks' worth
        assert runtime._change is seen
        waiting = _long_poll(cluster, 0.5)
        _wait_ticks(cluster, 3)
        waiting.result(timeout=30)
    finally:
        cluster.stop()
