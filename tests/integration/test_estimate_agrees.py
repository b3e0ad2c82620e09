"""One estimator: the planner's summary, the dry run (prepare) and the UI give one plan the same ETA.

The planner computes its summary's ``estimated_seconds`` through kafka_reassign.planning.estimate
(the executor's KIP-435 steps, in-sync replication counted); prepare reads the same snapshot back
from a simulated cluster over TCP and estimates the same plan at the same throttle.
"""
from __future__ import annotations

import re

import pytest

from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.cluster.state import rates_from_snapshot
from kafka_reassign.planning.estimate import Estimate
from kafka_reassign.planning.spark import plan
from kafka_reassign.run.prepare import prepare
from kafka_reassign.units import format_duration
from kafka_reassign_airflow.plan_view import plan_summary_view
from sim_snapshots import make_snapshot

MB = 1_000_000
THROTTLE = 20 * MB


def _written_snapshot() -> dict:
    """6 brokers, RF 3; ``orders`` written at 1-3 MB/s per partition, ``logs`` idle."""
    snap = make_snapshot(brokers=6, racks=3, dirs_per_broker=1, topics={
        "orders": {"partitions": 4, "rf": 3, "size_bytes": 200 * MB, "configs": {"min.insync.replicas": "2"}},
        "logs": {"partitions": 3, "rf": 3, "size_bytes": 80 * MB}})
    for p in snap["topics"][0]["partitions"]:
        p["bytes_in_per_sec"] = (1 + p["partition"] % 3) * MB
    return snap


def _dry_run_eta(sim_cluster, snap: dict, plan_obj) -> tuple[float, str]:
    """(prepare's estimated seconds, the dry run's estimate line) for ``plan_obj`` on ``snap``."""
    cluster = sim_cluster(snap, time_scale=0.0)
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers, client_id="estimate-agrees") as admin:
        prepared = prepare(admin, plan_obj, {"throttle_bytes_per_sec": THROTTLE, "allow_rf_change": True},
                           produce_rates=rates_from_snapshot(snap))
    return prepared.estimated_seconds, Estimate.from_json(prepared.estimate).describe()


@pytest.mark.parametrize("goal, extra", [
    ("replication-factor", {"replication_factor": 4, "topics": ["orders"]}),  # driver side, produce counted
    ("remove-brokers", {"brokers": [6]}),                                       # the balancing flow
])
def test_summary_dry_run_and_ui_give_one_plan_the_same_eta(sim_cluster, goal, extra):
    snap = _written_snapshot()
    result = plan(snap, goal, engine="local", throttle_bytes_per_sec=THROTTLE, **extra)
    summary = result.summary
    assert result.plan.moves and summary["estimated_seconds"], summary
    seconds, dry_run_line = _dry_run_eta(sim_cluster, snap, result.plan)
    assert summary["estimated_seconds"] == pytest.approx(seconds, abs=0.05)
    shown = format_duration(summary["estimated_seconds"])
    ui = {h["label"]: h["value"] for h in plan_summary_view(summary)["headline"]}
    assert ui["Estimated time"] == shown == format_duration(seconds)
    assert re.search(rf"estimated moving time: {re.escape(shown)}\b", dry_run_line), dry_run_line
