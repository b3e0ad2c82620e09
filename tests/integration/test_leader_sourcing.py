"""Leader-aware sourcing on the simulator: copies come from the chosen in-sync replica, leaders go back."""
from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.errors import ParamError
from kafka_reassign.execution.store import MemoryExecutionStore
from kafka_reassign.run.reassign import run_reassignment
from kafka_reassign.throttle.record import MemoryRecordStore

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.sourcing import decommission_layout  # noqa: E402

MB = 1_000_000
PARAMS = {"throttle_bytes_per_sec": 10 * MB, "poll_interval_seconds": 0.2, "produce_sample_seconds": 0,
          "stall_window_seconds": 120}


class Leaders(threading.Thread):
    """Samples, from the cluster's side, the leader of each partition while a replica is being added to it."""

    def __init__(self, cluster: Any, partitions: int) -> None:
        super().__init__(daemon=True)
        self.cluster, self.partitions = cluster, partitions
        self.while_adding: dict[int, set[int]] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for p in range(self.partitions):
                st = self.cluster.partition_state("t", p)
                if st["adding"]:
                    self.while_adding.setdefault(p, set()).add(st["leader"])
            self.done.wait(0.01)


@pytest.fixture
def decommission(sim_cluster):
    from sim_snapshots import make_snapshot

    current, target = decommission_layout()
    cluster = sim_cluster(make_snapshot(brokers=8, topics={"t": {"partitions": len(current), "rf": 3,
                                                                 "size_bytes": 20 * MB, "replicas": current}}),
                          time_scale=10.0)
    plan = {"version": 1, "partitions": [{"topic": "t", "partition": p, "replicas": r} for p, r in enumerate(target)]}
    return cluster, plan, current, target


class CallLog:
    """A real KafkaAdmin that notes each request it sends, in order, with the run's clock."""

    def __init__(self, admin: KafkaAdmin, clock: Any) -> None:
        self._admin, self._clock = admin, clock
        self.calls: list[tuple[float, str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._admin, name)
        if not callable(method):
            return method

        def noted(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((self._clock(), name, args[0] if args else None))
            return method(*args, **kwargs)
        return noted


def watched_run(cluster: Any, plan: dict, params: dict, calls: list | None = None) -> tuple[Any, Leaders]:
    """``run_reassignment`` of ``plan`` while :class:`Leaders` samples the cluster.

    :param calls: filled with (simulated time, admin method, first argument) of every request
    """
    watch = Leaders(cluster, len(plan["partitions"]))
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        logged = CallLog(admin, cluster.sim_time)
        watch.start()
        try:
            result = run_reassignment(logged, plan, params, MemoryRecordStore(), exec_store=MemoryExecutionStore(),
                                      on_event=lambda m: None)
            if calls is not None:
                calls += logged.calls
        finally:
            watch.done.set()
            watch.join(5)
    return result, watch


def test_copies_come_from_the_chosen_sources_and_the_plan_leaders_come_back(decommission):
    cluster, plan, current, target = decommission
    calls: list = []
    result, watch = watched_run(cluster, plan, {**PARAMS, "leader_sourcing": True}, calls)
    assert result.progress is not None and result.progress.outcome == "done"
    _assert_each_lead_step_is_elected_at_once(result, calls)
    lead_steps = [s for s in result.prepared.steps if s.is_leader_only]
    sourced = {s.partition: s.target[0] for s in lead_steps}
    assert sourced and all(current[p][0] == 8 or b != current[p][0] for p, b in sourced.items())
    for p, src in sourced.items():
        assert watch.while_adding.get(p) == {src}, (p, src, watch.while_adding.get(p))
    # Broker 8 sent 7 as the fixed leader; now no more than the busiest receiver takes in (4).
    received = max(sum(1 for c, t in zip(current, target) if b in t and b not in c) for b in range(1, 8))
    sent_by_8 = sum(1 for p, c in enumerate(current) if c[0] == 8 and p not in sourced)
    assert received == 4 and sent_by_8 <= received
    # Every partition ends at its planned replicas, led by the plan's preferred leader.
    for p, replicas in enumerate(target):
        st = cluster.partition_state("t", p)
        assert st["replicas"] == replicas and st["leader"] == replicas[0], (p, st)
    assert result.progress.leader_changes >= 2 * len(lead_steps)


def _assert_each_lead_step_is_elected_at_once(result: Any, calls: list) -> None:
    """Kafka completes a lead step as it accepts it: one listing confirms it and the election
    follows in the same refill, with no wait for the next check or poll in between."""
    lead = {(s.topic, s.partition): tuple(s.target) for s in result.prepared.steps if s.is_leader_only}
    checked = 0
    for n, (t, name, targets) in enumerate(calls):
        if name != "alter_partition_reassignments":
            continue
        for key in [k for k, v in targets.items() if v is not None and tuple(v) == lead.get(k)]:
            m = next(m for m in range(n + 1, len(calls))
                     if calls[m][1] == "elect_preferred_leaders" and key in list(calls[m][2]))
            between = [name for _, name, _ in calls[n + 1:m]]
            assert between == ["list_partition_reassignments"], (key, between)
            assert calls[m][0] - t < 0.5, (key, t, calls[m][0])  # simulated seconds
            checked += 1
    assert checked == len(lead) > 0


def test_sourcing_off_moves_no_leader_before_the_copy(decommission):
    cluster, plan, current, _ = decommission
    result, watch = watched_run(cluster, plan, PARAMS)
    assert not any(s.is_leader_only for s in result.prepared.steps)
    assert all(leaders == {current[p][0]} for p, leaders in watch.while_adding.items())


def test_bad_sourcing_input_is_refused_before_any_write(decommission):
    cluster, plan, _, _ = decommission
    before = cluster.write_count
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        with pytest.raises(ParamError, match="max_leader_movements"):
            run_reassignment(admin, plan, {**PARAMS, "leader_sourcing": True, "max_leader_movements": 0},
                             MemoryRecordStore(), exec_store=MemoryExecutionStore(), on_event=lambda m: None)
    assert cluster.write_count == before
