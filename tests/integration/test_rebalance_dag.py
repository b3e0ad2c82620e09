"""kafka_rebalance end to end: planned on Spark, against the simulated cluster over TCP.

A balanced cluster: the run succeeds and writes nothing (simulator write counter stays 0).
A skewed one (broker 4 empty, like a freshly added broker): the run moves replicas onto it
through kafka_reassign's tasks, the balance improves and the throttles are gone afterwards.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from dag_runner import DagRunner

pytestmark = [pytest.mark.slow, pytest.mark.airflow, pytest.mark.spark, pytest.mark.timeout(900)]

THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


def _replica_counts(cluster: Any) -> dict[int, int]:
    counts = {b["id"]: 0 for b in cluster.snapshot()["brokers"]}
    for t in cluster.snapshot()["topics"]:
        for p in t["partitions"]:
            for r in p["replicas"]:
                counts[r] += 1
    return counts


def _assert_planned_through_spark_submit(runner: DagRunner, log: str) -> None:
    """The plan task spark-submitted planner/spark_job.py, which wrote the run's plan files."""
    plans = list((runner.home / "kafka_reassign" / "kafka_rebalance").glob("*/PLAN.json"))
    assert len(plans) == 1, plans
    assert (plans[0].parent / "PLAN.summary.json").is_file() and (plans[0].parent / "snapshot.jsonl").is_file()
    assert "Spark-Submit cmd" in log and "spark_job.py" in log, log[-4000:]
    assert '"balance_before"' in log  # the job's summary line


def _conf(**kw: Any) -> dict[str, Any]:
    conf = {"throttle_bytes_per_sec": 100_000_000, "poll_interval_seconds": 1, "batch_timeout_minutes": 10,
            "max_partition_movements": 4, "balance_threshold": 1.10}
    conf.update(kw)
    return conf


def test_balanced_cluster_is_left_alone(tmp_path: Path, sim_cluster: Callable[..., Any],
                                        snapshot_factory: Callable[..., dict]) -> None:
    # 4 partitions x RF 3 over 4 brokers: 3 replicas and 1 leader each, equal sizes.
    replicas = [[1, 2, 3], [2, 3, 4], [3, 4, 1], [4, 1, 2]]
    snapshot = snapshot_factory(brokers=4, racks=2, topics={
        "orders": {"partitions": 4, "rf": 3, "size_bytes": 50_000_000, "replicas": replicas}})
    cluster = sim_cluster(snapshot, time_scale=1.0)
    runner = DagRunner(tmp_path / "airflow", cluster.bootstrap_servers)
    rc, log = runner.run("kafka_rebalance", _conf())
    runs = runner.runs("kafka_rebalance")
    assert runs and runs[-1]["state"] == "success", f"{runs}\n{log[-4000:]}"
    tasks = runs[-1]["tasks"]
    assert tasks["snapshot"] == "success" and tasks["plan"] == "success" and tasks["should_rebalance"] == "success"
    _assert_planned_through_spark_submit(runner, log)
    for t in ("approval_gate", "prepare", "throttle_set", "report"):
        assert tasks.get(t) in ("skipped", None), tasks
    assert cluster.write_count == 0, dict(cluster.writes)
    assert "within bounds" in log or "Nothing to move" in log


def test_skewed_cluster_is_rebalanced(tmp_path: Path, sim_cluster: Callable[..., Any],
                                      snapshot_factory: Callable[..., dict]) -> None:
    # Everything on brokers 1-3; broker 4 (rack-1) holds nothing.
    replicas = [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 2, 3], [2, 3, 1], [3, 1, 2]]
    snapshot = snapshot_factory(brokers=4, racks=2, topics={
        "orders": {"partitions": 6, "rf": 3, "size_bytes": 30_000_000, "replicas": replicas,
                   "configs": {"min.insync.replicas": "2"}}})
    cluster = sim_cluster(snapshot, time_scale=1.0)
    before = _replica_counts(cluster)
    assert before[4] == 0
    throttles_before = {b: {k: v for k, v in cluster.broker_configs(b).items() if k in THROTTLE_KEYS}
                        for b in before}
    runner = DagRunner(tmp_path / "airflow", cluster.bootstrap_servers)
    rc, log = runner.run("kafka_rebalance", _conf())
    runs = runner.runs("kafka_rebalance")
    assert runs and runs[-1]["state"] == "success", f"{runs}\n{log[-6000:]}"
    tasks = runs[-1]["tasks"]
    assert tasks["plan"] == "success" and tasks["should_rebalance"] == "success"
    _assert_planned_through_spark_submit(runner, log)
    assert tasks["approval_gate"] == "success" and tasks["approve_plan"] == "skipped"
    assert tasks["prepare"] == "success" and tasks["throttle_remove"] == "success" and tasks["report"] == "success"
    assert tasks["execute"] == "success"

    after = _replica_counts(cluster)
    print(f"replicas per broker before {before} after {after}")
    assert after[4] >= 3, after
    assert max(after.values()) - min(after.values()) < max(before.values()) - min(before.values())
    assert sum(after.values()) == sum(before.values())
    for t in cluster.snapshot()["topics"]:
        for p in t["partitions"]:
            state = cluster.partition_state(t["name"], p["partition"])
            assert sorted(state["isr"]) == sorted(state["replicas"]) and not state["adding"]
    assert {b: {k: v for k, v in cluster.broker_configs(b).items() if k in THROTTLE_KEYS}
            for b in before} == throttles_before
