"""The reconciler over a fleet, and the cluster lock across connections, on simulated clusters.

- One reconciler run sweeps every cluster: it restores the throttle a dead run left on a
  simulated cluster although another cluster of the fleet is unreachable (a closed port); the
  unreachable one fails its own mapped task instance and the summary names it.
- Two connection ids to one cluster share one lock: a run through the second connection is
  refused at prepare, naming the run holding the lock, with zero writes to the cluster.
"""
from __future__ import annotations

import json
import socket
import time
from typing import Any, Callable

import pytest

import airflow_env
from sim_snapshots import dynamic_configs

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]

TOPICS = {"orders": {"partitions": 3, "rf": 3, "size_bytes": 4_000_000, "configs": {"min.insync.replicas": "2"}}}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _connect(monkeypatch: pytest.MonkeyPatch, conn_id: str, bootstrap: str) -> None:
    for key, value in airflow_env.kafka_conn_env(bootstrap, conn_id).items():
        monkeypatch.setenv(key, value)


def _leave_dead_run_throttle(bootstrap: str, run_id: str) -> None:
    """What a worker killed mid-run leaves: its throttle on the brokers, its record unrestored."""
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.run.prepare import prepare
    from kafka_reassign.throttle.apply import apply_throttle
    from kafka_reassign_airflow.record_store import VariableRecordStore

    admin = KafkaAdmin(bootstrap_servers=bootstrap.split(","))
    try:
        plan = {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [4, 2, 3]}]}
        prepared = prepare(admin, plan, {"throttle_bytes_per_sec": 10_000_000}, run_id=run_id)
        apply_throttle(admin, prepared, VariableRecordStore(), run_id)
    finally:
        admin.close()


def test_reconciler_cleans_one_cluster_while_another_is_unreachable(
        airflow_db: Any, sim_cluster: Callable[..., Any], snapshot_factory: Callable[..., dict],
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    cluster = sim_cluster(snapshot_factory(brokers=4, racks=2, topics=TOPICS))
    before = dynamic_configs(cluster)
    _connect(monkeypatch, "kafka_sim1", cluster.bootstrap_servers)
    _connect(monkeypatch, "kafka_gone", f"127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_REASSIGN_FLEET", json.dumps(["kafka_gone", "kafka_sim1"]))
    # Give up on the closed port quickly (the defaults retry for a minute).
    monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__ADMIN_BOOTSTRAP_TIMEOUT_MS", "1500")
    monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__ADMIN_RETRY_ATTEMPTS", "1")
    monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__ADMIN_RETRY_MAX_SECONDS", "2")
    run_id = f"manual__dead-run-{time.time_ns()}"
    _leave_dead_run_throttle(cluster.bootstrap_servers, run_id)
    assert dynamic_configs(cluster) != before

    dag = airflow_env.load_dag("kafka_throttle_reconciler")
    assert dag.params["kafka_conn_ids"] == ["kafka_gone", "kafka_sim1"]
    dag.task_dict["reconcile_throttles"].partial_kwargs["retries"] = 0  # no 2-minute retry wait in a test
    capfd.readouterr()
    dr = dag.test()
    out = capfd.readouterr().out

    states = airflow_env.task_states(dr)
    assert states["reconcile_throttles[0]"] == "failed", states      # kafka_gone
    assert states["reconcile_throttles[1]"] == "success", states     # kafka_sim1, not held up
    assert states["sweep_summary"] == "failed" and dr.state == "failed", states
    assert dynamic_configs(cluster) == before                         # the leftover throttle is gone
    assert airflow_env.read_record(run_id).restored
    report = airflow_env.xcom(dr, "reconcile_throttles", map_index=1)
    assert report["kafka_conn_id"] == "kafka_sim1" and [r["run_id"] for r in report["restored"]] == [run_id]
    assert "1 of 2 cluster(s) not reconciled: kafka_gone" in out
    assert "kafka_gone: NOT reconciled" in out and "kafka_sim1: 1 run(s) restored" in out


def test_two_connections_to_one_cluster_share_its_lock(
        airflow_db: Any, sim_cluster: Callable[..., Any], snapshot_factory: Callable[..., dict],
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign_airflow.record_store import ClusterLock

    cluster = sim_cluster(snapshot_factory(brokers=4, racks=2, topics=TOPICS))
    _connect(monkeypatch, "kafka_main", cluster.bootstrap_servers)
    _connect(monkeypatch, "kafka_main_alias", cluster.bootstrap_servers)
    admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers.split(","))
    try:
        cluster_id = admin.cluster_state().cluster_id
    finally:
        admin.close()
    holder = _running_run("kafka_reassign")
    # The holder took the lock through kafka_main; the lock is keyed by the cluster id, not the connection.
    ClusterLock(lambda dag_id, run_id: True).acquire(cluster_id, "kafka_reassign", holder)
    try:
        writes = cluster.write_count
        capfd.readouterr()
        plan = {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [4, 2, 3]}]}
        dr = airflow_env.run_dag({"kafka_conn_id": "kafka_main_alias", "plan": plan})
        out = capfd.readouterr().out
        states = airflow_env.task_states(dr)
        assert states["prepare"] == "failed" and dr.state == "failed", states
        assert f"Kafka cluster {cluster_id} is being reassigned by run {holder!r}" in out
        assert cluster.write_count == writes
        assert ClusterLock.holder(cluster_id)["run_id"] == holder
    finally:
        ClusterLock.release(cluster_id, holder)


def _running_run(dag_id: str) -> str:
    """A run of ``dag_id`` the metadata DB says is running (the lock's holder)."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState
    from airflow.utils.types import DagRunTriggeredByType, DagRunType

    airflow_env.load_dag(dag_id)
    run_id = f"manual__holder-{time.time_ns()}"
    with create_session() as session:
        session.add(DagRun(dag_id=dag_id, run_id=run_id, run_type=DagRunType.MANUAL, state=DagRunState.RUNNING,
                           triggered_by=DagRunTriggeredByType.TEST))
    return run_id
