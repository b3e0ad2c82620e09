"""A rebalance over a fleet of three simulated clusters, of which only one is over its threshold:
each cluster's own DAG (kafka_rebalance__<conn_id>) runs, and only the skewed cluster is moved.

dag.test runs each DAG's run in-process (not the scheduler), with the planner's local engine.
"""
from __future__ import annotations

import json
from typing import Any, Callable

import pytest

import airflow_env

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(900)]

BALANCED = [[1, 2, 3], [2, 3, 4], [3, 4, 1], [4, 1, 2]]      # 3 replicas and 1 leader per broker
SKEWED = [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 2, 3]]        # broker 4 holds nothing
CONF = {"planner_engine": "local", "throttle_bytes_per_sec": 100_000_000, "poll_interval_seconds": 1,
        "batch_timeout_minutes": 10, "max_partition_movements": 4}


def _replicas_on(cluster: Any, broker: int) -> int:
    return sum(p["replicas"].count(broker) for t in cluster.snapshot()["topics"] for p in t["partitions"])


def test_only_the_cluster_over_its_threshold_is_moved(
        airflow_db: Any, sim_cluster: Callable[..., Any], snapshot_factory: Callable[..., dict],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__WORK_DIR", str(tmp_path))
    clusters = {}
    for conn_id, layout in (("kafka_f1", BALANCED), ("kafka_f2", SKEWED), ("kafka_f3", BALANCED)):
        clusters[conn_id] = sim_cluster(snapshot_factory(brokers=4, racks=2, topics={
            "orders": {"partitions": 4, "rf": 3, "size_bytes": 4_000_000, "replicas": layout,
                       "configs": {"min.insync.replicas": "2"}}}))
        for key, value in airflow_env.kafka_conn_env(clusters[conn_id].bootstrap_servers, conn_id).items():
            monkeypatch.setenv(key, value)
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_REASSIGN_FLEET", json.dumps(
        [{"conn_id": "kafka_f1", "balance_threshold": 1.10}, {"conn_id": "kafka_f2", "balance_threshold": 1.10},
         {"conn_id": "kafka_f3", "balance_threshold": 1.05, "schedule": "0 4 * * *"}]))

    results, runs = {}, {}
    for conn_id, cluster in clusters.items():
        writes = cluster.write_count
        dr = airflow_env.load_dag(f"kafka_rebalance__{conn_id}").test(run_conf=CONF)
        results[conn_id] = (dr.state, airflow_env.task_states(dr), cluster.write_count - writes)
        runs[conn_id] = dr

    for conn_id in ("kafka_f1", "kafka_f3"):
        state, tasks, writes = results[conn_id]
        assert state == "success" and tasks["should_rebalance"] == "success", tasks
        assert tasks["prepare"] == "skipped" and writes == 0, (conn_id, tasks, writes)
        assert _replicas_on(clusters[conn_id], 4) == 3
    state, tasks, writes = results["kafka_f2"]
    assert state == "success" and tasks["report"] == "success", tasks
    assert writes > 0 and _replicas_on(clusters["kafka_f2"], 4) > 0
    assert airflow_env.xcom(runs["kafka_f2"], "prepare")["partitions"] > 0
