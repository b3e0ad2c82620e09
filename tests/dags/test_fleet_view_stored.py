"""The fleet page's columns read from what the DAGs really store: a rebalance run's plan summary
(XCom), the reconciler's per-cluster reports (mapped XCom) and the task instance of a cluster it
could not reach - never from Kafka.

dag.test runs each DAG in-process (the planner's local engine); then the page's reader runs
against the same metadata DB.
"""
from __future__ import annotations

import json
from typing import Any, Callable

import pytest

import airflow_env
from test_fleet_rebalance import BALANCED, CONF
from test_fleet_reconciler import _closed_port

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]


def test_balance_last_rebalance_and_reconciler_sweep_come_from_stored_state(
        airflow_db: Any, sim_cluster: Callable[..., Any], snapshot_factory: Callable[..., dict],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from kafka_reassign_airflow.fleet_view import collect_fleet

    monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__WORK_DIR", str(tmp_path))
    snapshot = snapshot_factory(brokers=4, racks=2, topics={
        "orders": {"partitions": 4, "rf": 3, "size_bytes": 4_000_000, "replicas": BALANCED,
                   "configs": {"min.insync.replicas": "2"}}})
    cluster = sim_cluster({**snapshot, "cluster_id": "fleet-view-v1"})
    for conn_id, bootstrap in (("kafka_v1", cluster.bootstrap_servers), ("kafka_vgone", f"127.0.0.1:{_closed_port()}")):
        for key, value in airflow_env.kafka_conn_env(bootstrap, conn_id).items():
            monkeypatch.setenv(key, value)
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_REASSIGN_FLEET", json.dumps(
        [{"conn_id": "kafka_v1", "balance_threshold": 1.10}, "kafka_vgone"]))
    monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__ADMIN_BOOTSTRAP_TIMEOUT_MS", "1500")
    monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__ADMIN_RETRY_ATTEMPTS", "1")
    monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__ADMIN_RETRY_MAX_SECONDS", "2")

    rebalance = airflow_env.load_dag("kafka_rebalance__kafka_v1").test(run_conf=CONF)
    assert airflow_env.task_states(rebalance)["should_rebalance"] == "success"
    reconciler = airflow_env.load_dag("kafka_throttle_reconciler")
    reconciler.task_dict["reconcile_throttles"].partial_kwargs["retries"] = 0  # no 2-minute retry wait
    sweep = reconciler.test()
    assert sweep.state == "failed"  # kafka_vgone is unreachable

    view = collect_fleet()
    rows = {r["conn_id"]: r for r in view["clusters"]}
    assert list(rows) == ["kafka_v1", "kafka_vgone"]
    v1, gone = rows["kafka_v1"], rows["kafka_vgone"]
    assert v1["status"] == "balanced", v1
    assert v1["cluster_id"] == "fleet-view-v1"          # from the reconciler's report
    assert v1["balance"]["disk"] is not None and v1["balance"]["disk"] <= 1.10, v1["balance"]
    assert v1["balance"]["from_run"] == rebalance.run_id and v1["balance"]["threshold"] == 1.10
    assert v1["last_rebalance"]["run_id"] == rebalance.run_id and v1["last_rebalance"]["state"] == "success"
    assert v1["reconciler"]["reconciled"] is True and v1["reconciler"]["run_id"] == sweep.run_id
    assert gone["status"] == "unknown" and gone["cluster_id"] is None
    assert gone["reconciler"] == {"run_id": sweep.run_id, "state": "failed", "reconciled": False,
                                  "text": "not reconciled in the last sweep (unreachable or failed)"}
