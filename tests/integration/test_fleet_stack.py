"""A fleet through a real Airflow (the session's shared stack of api-server, scheduler,
dag-processor and triggerer subprocesses, conftest.py).

- Two reassignments on two clusters overlap in time: both runs' ``execute`` tasks are seen
  running or deferred at once (``max_active_runs`` is fleet-sized).
- A third run on a busy cluster, through a second connection to it, is refused at prepare
  naming the run holding the lock, with zero writes to that cluster and no throttle record.
- The api-server created the planning pool on start.
"""
from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from airflow_stack import AirflowApiError, AirflowStack

BUSY = ("running", "deferred", "queued", "scheduled", "up_for_reschedule")

pytestmark = [pytest.mark.slow, pytest.mark.airflow, pytest.mark.timeout(900)]

# One 40 MB move at 1 MB/s: about 40 s in flight, long enough to watch the other runs.
PLAN = {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [4, 2, 3]}]}
CONF = {"plan": PLAN, "throttle_bytes_per_sec": 1_000_000, "poll_interval_seconds": 1, "batch_timeout_minutes": 10}


def _states(stack: AirflowStack, run_id: str) -> dict[str, str | None]:
    return {ti["task_id"]: ti["state"] for ti in stack.task_instances("kafka_reassign", run_id)}


def _variable(stack: AirflowStack, key: str) -> Any:
    try:
        return json.loads(stack.request("GET", f"/api/v2/variables/{key}")["value"])
    except AirflowApiError as err:
        if err.status == 404:
            return None
        raise


def test_runs_on_two_clusters_overlap_and_a_third_on_a_busy_cluster_is_refused(
        shared_stack: AirflowStack, sim_cluster: Callable[..., Any], snapshot_factory: Callable[..., dict]) -> None:
    from kafka_reassign_airflow.record_store import ClusterLock, VariableRecordStore

    snapshot = snapshot_factory(brokers=4, racks=2, topics={
        "orders": {"partitions": 3, "rf": 3, "size_bytes": 40_000_000, "configs": {"min.insync.replicas": "2"}}})
    c1, c2 = sim_cluster(snapshot), sim_cluster(snapshot)
    # The session's shared stack (conftest.py); the connections are created over REST.
    stack = shared_stack
    for conn_id, cluster in (("kafka_c1", c1), ("kafka_c2", c2), ("kafka_c1_alias", c1)):
        stack.put_connection(conn_id, cluster.bootstrap_servers)
    pool = stack.request("GET", "/api/v2/pools/kafka_reassign_planning")
    assert pool["slots"] == 4, pool
    stack.wait_for_dag("kafka_reassign")
    run_a = stack.trigger("kafka_reassign", {**CONF, "kafka_conn_id": "kafka_c1"})["dag_run_id"]
    run_b = stack.trigger("kafka_reassign", {**CONF, "kafka_conn_id": "kafka_c2"})["dag_run_id"]

    def both_executing() -> bool:
        return all(_states(stack, r).get("execute") in ("running", "deferred") for r in (run_a, run_b))

    stack.wait_for(both_executing, 240, "both runs' execute tasks at once", interval=1.0)
    # ...and their moves are in flight on both clusters at the same time.
    stack.wait_for(lambda: c1.partition_state("orders", 0)["adding"] and c2.partition_state("orders", 0)["adding"],
                   60, "moves in flight on both clusters at once", interval=0.2)

    writes = c1.write_count
    run_c = stack.trigger("kafka_reassign", {**CONF, "kafka_conn_id": "kafka_c1_alias"})["dag_run_id"]
    final_c = stack.wait_for_run("kafka_reassign", run_c, timeout=240)
    states_c = _states(stack, run_c)
    assert final_c["state"] == "failed" and states_c["prepare"] == "failed", states_c
    assert states_c.get("throttle_set") in (None, "upstream_failed", "skipped"), states_c
    assert _states(stack, run_a)["execute"] in BUSY, "run A ended before C was refused: the check proves nothing"
    assert c1.write_count == writes, "the refused run wrote to the cluster"
    assert _variable(stack, VariableRecordStore().key_for(run_c)) is None
    cluster_id = _cluster_id(c1)
    assert _variable(stack, ClusterLock.key_for(cluster_id))["run_id"] == run_a
    log = stack.request("GET", f"/api/v2/dags/kafka_reassign/dagRuns/{run_c}/taskInstances/prepare/logs/1")
    assert f"is being reassigned by run {run_a!r}" in json.dumps(log), json.dumps(log)[-3000:]

    for run_id in (run_a, run_b):
        final = stack.wait_for_run("kafka_reassign", run_id, timeout=300)
        assert final["state"] == "success", (_states(stack, run_id), stack.diagnostics())
    for cluster in (c1, c2):
        assert cluster.partition_state("orders", 0)["replicas"] == [4, 2, 3]


def _cluster_id(cluster: Any) -> str:
    """The cluster id Kafka reports (what the lock is keyed by)."""
    from kafka_reassign.cluster.admin import KafkaAdmin

    admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers.split(","))
    try:
        return str(admin.cluster_state().cluster_id)
    finally:
        admin.close()
