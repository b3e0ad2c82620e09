"""Maintenance windows and pause/resume on the simulator, with its clock as the run's clock.

The simulated cluster's clock starts at 0 (1970-01-01 00:00 UTC), so a window written as
"daily 00:01-00:02 UTC" opens one simulated minute into the run. Every AlterPartitionReassignments
the run sends is stamped with the simulated time it reached the cluster.
"""
from __future__ import annotations

import time
from typing import Any

import pytest

from integration.test_executor_sim import FAST, RecordingAdmin, plan_to_456, snapshot
from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.run.reassign import run_reassignment
from kafka_reassign.throttle.record import MemoryRecordStore

SCALE = 20.0
#: 8 partitions of 400 MB at 20 MB/s, two steps at once: about 160 simulated seconds of copying,
#: longer than the first window, so steps are in flight when it closes.
SIZES = [400_000_000] * 8
PARAMS = {**FAST, "throttle_bytes_per_sec": 20_000_000, "max_movements_per_broker": 2, "poll_interval_seconds": 1.0}


class TimedAdmin(RecordingAdmin):
    """Records each submission's simulated time too."""

    def __init__(self, admin: KafkaAdmin, cluster: Any) -> None:
        super().__init__(admin)
        self.cluster = cluster
        self.submitted_at: list[float] = []

    def alter_partition_reassignments(self, targets: dict) -> dict:
        if any(v is not None for v in targets.values()):
            self.submitted_at.append(self.cluster.sim_time())
        return super().alter_partition_reassignments(targets)


def _run(cluster: Any, params: dict, **kwargs: Any) -> tuple[Any, TimedAdmin, list[Any]]:
    views: list[Any] = []
    # A short deadline per try: now and then a kafka-python call to the simulator gets no answer
    # (seen in CI; the deadline closes that client and retries), and this test is about windows.
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers, call_timeout_seconds=5.0) as admin:
        rec = TimedAdmin(admin, cluster)
        result = run_reassignment(rec, plan_to_456(len(SIZES)), params, MemoryRecordStore(),
                                  on_progress=views.append, on_event=lambda m: None, clock=cluster.sim_time,
                                  sleep=lambda s: time.sleep(s / SCALE), **kwargs)
    return result, rec, views


def _assert_each_step_submitted_once_and_done(cluster: Any, rec: TimedAdmin) -> None:
    # A resumed admission resubmits nothing: no (partition, target) is sent twice.
    assert len(rec.submitted) == len(set(rec.submitted)), rec.submitted
    for p, e in enumerate(plan_to_456(len(SIZES))["partitions"]):
        assert cluster.partition_state("t", p)["replicas"] == e["replicas"]


def test_no_step_starts_outside_the_windows_and_steps_in_flight_finish(sim_cluster):
    cluster = sim_cluster(snapshot(SIZES), time_scale=SCALE)
    windows = [(60.0, 120.0), (240.0, 420.0)]
    result, rec, views = _run(cluster, {**PARAMS, "maintenance_windows": [
        "daily 00:01-00:02 UTC", "cron:4 0 * * * for 3m UTC"]})
    assert result.progress.outcome == "done"
    assert rec.submitted_at, "nothing was submitted"
    outside = [t for t in rec.submitted_at if not any(a <= t < b + 1.0 for a, b in windows)]  # 1 s: one poll's I/O
    assert not outside, (outside, rec.submitted_at)
    assert any(t >= 240.0 for t in rec.submitted_at), "the run did not resume in the second window"
    # Steps submitted in the first window were still moving after it closed, and finished.
    closed = [v for v in views if 121.0 < v.updated_at < 239.0]
    assert closed and any(v.steps_in_flight for v in closed)
    assert all(v.held == "waiting for the window opening at 1970-01-01 00:04 UTC" for v in closed)
    assert all(v.reopens_at == 240.0 for v in closed)
    assert any(v.steps_done > closed[0].steps_done for v in closed), "steps in flight did not finish while closed"
    # Before the first opening nothing ran at all.
    assert min(rec.submitted_at) >= 60.0
    _assert_each_step_submitted_once_and_done(cluster, rec)


def test_pause_holds_new_steps_back_and_resume_submits_nothing_again(sim_cluster):
    cluster = sim_cluster(snapshot(SIZES), time_scale=SCALE)
    pause_from, pause_to = 30.0, 150.0

    def paused() -> bool:
        return pause_from <= cluster.sim_time() < pause_to

    result, rec, views = _run(cluster, PARAMS, paused=paused)
    assert result.progress.outcome == "done"
    # Read before each poll: one poll (1 s) may pass between the pause and the run seeing it.
    during = [t for t in rec.submitted_at if pause_from + 1.5 <= t < pause_to]
    assert not during, (during, rec.submitted_at)
    assert any(t < pause_from for t in rec.submitted_at) and any(t >= pause_to for t in rec.submitted_at)
    held = [v for v in views if pause_from + 1.5 <= v.updated_at < pause_to]
    assert held and all(v.held.startswith("paused by an operator") for v in held)
    assert any(v.steps_in_flight for v in held) and held[-1].steps_done > held[0].steps_done
    _assert_each_step_submitted_once_and_done(cluster, rec)


def test_a_rehearsal_predicts_the_moving_time_whatever_the_windows():
    """Its clock starts in 1970: a window is no part of what it predicts (the moving time)."""
    from sim_snapshots import make_snapshot

    from kafka_reassign.rehearsal.rehearse import rehearse

    snap = make_snapshot(brokers=6, topics={"t": {"partitions": 2, "rf": 3, "size_bytes": 20_000_000,
                                                  "replicas": [[1, 2, 3], [2, 3, 1]]}})
    plan = {"version": 1, "partitions": [{"topic": "t", "partition": p, "replicas": [4, 5, 6]} for p in (0, 1)]}
    limits = {"throttle_bytes_per_sec": 2_000_000, "poll_interval_seconds": 2.0}
    closed_for_days = rehearse(snap, plan, {**limits, "maintenance_windows": ["cron:0 0 2 1 * for 1h UTC"]})
    plain = rehearse(snap, plan, limits)
    assert closed_for_days.outcome == plain.outcome == "done"
    assert closed_for_days.predicted_seconds == pytest.approx(plain.predicted_seconds, rel=0.05)
