"""Bad params and bad plans given to the kafka_reassign DAG are refused before any write.

Each case is a real DAG run (dag.test) against one simulated cluster; the simulator's write
counter proves the cluster was never written to, and the task log names the entry and the
reason. (The domain tests cover many more kinds against ClusterState directly.)
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import airflow_env  # noqa: E402

airflow_env.configure_env()

from test_dag_reassign import FAST, plan_of, six_broker_snapshot  # noqa: E402

pytestmark = [pytest.mark.airflow]

OK_MOVE = ("orders", 0, [4, 2, 3])

CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("unknown topic", {"plan": plan_of(("nope", 0, [1, 2, 3]))}, ["nope"]),
    ("unknown partition", {"plan": plan_of(("orders", 42, [1, 2, 3]))}, ["orders-42"]),
    ("unknown broker", {"plan": plan_of(("orders", 0, [1, 2, 77]))}, ["77"]),
    ("RF change not allowed", {"plan": plan_of(("orders", 0, [1, 2, 3, 4]))}, ["orders-0", "replication"]),
    ("duplicate replicas", {"plan": plan_of(("orders", 0, [4, 4, 3]))}, ["orders-0", "more than once"]),
    ("duplicate partition entries", {"plan": plan_of(OK_MOVE, ("orders", 0, [5, 2, 3]))}, ["orders-0"]),
    ("log dir not on the broker", {"plan": {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [4, 2, 3], "log_dirs": ["/nope", "any", "any"]}]}},
     ["/nope"]),
    ("typo in a conf key", {"plan": plan_of(OK_MOVE), "throttle_byte_per_sec": 10}, ["throttle_byte_per_sec"]),
    ("no plan and no goal", {"plan": None}, ["goal"]),
]


@pytest.fixture(scope="module")
def cluster(airflow_db_module, sim_cluster_module):
    return sim_cluster_module


@pytest.fixture(scope="module")
def airflow_db_module() -> Path:
    return airflow_env.migrate_once()


@pytest.fixture(scope="module")
def sim_cluster_module():
    import os

    from kafka_sim import SimulatedCluster

    c = SimulatedCluster(six_broker_snapshot(), time_scale=10.0)
    c.start()
    env = airflow_env.kafka_conn_env(c.bootstrap_servers)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield c
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    c.stop()


@pytest.mark.parametrize("name,conf,expect", CASES, ids=[c[0] for c in CASES])
def test_rejected_before_any_write(cluster, capfd, name, conf, expect):
    writes = cluster.write_count
    dr = airflow_env.run_dag({**FAST, **conf})
    out = "".join(capfd.readouterr())
    states = airflow_env.task_states(dr)
    assert dr.state == "failed", states
    # Without a plan the planning step is the first to refuse; with one, prepare is.
    rejecting = "snapshot" if conf.get("plan") is None else "prepare"
    assert states[rejecting] == "failed", states
    assert states["throttle_set"] == "upstream_failed"
    assert cluster.write_count == writes, f"{name}: the cluster was written to"
    for word in expect:
        assert word in out, f"{name}: {word!r} not in the task log"


def test_invalid_param_types_refused_by_airflow(cluster):
    """Airflow's typed params refuse a wrong type, and a plan not in Kafka's format, before a run
    even exists (the plan param carries the plan's JSON schema)."""
    from airflow.sdk.exceptions import ParamValidationError

    writes = cluster.write_count
    for bad in ({"throttle_bytes_per_sec": "fast"}, {"max_movements_per_broker": 0}, {"goal": "shuffle"},
                {"plan": {"version": 2, "partitions": []}},
                {"plan": {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": ["4", 2, 3]}]}}):
        with pytest.raises(ParamValidationError):
            airflow_env.run_dag({"plan": plan_of(OK_MOVE), **bad})
    with pytest.raises(ParamValidationError, match="param plan"):
        airflow_env.run_dag({"plan": {"version": 2, "partitions": []}})
    assert cluster.write_count == writes


def test_foreign_reassignment_in_flight_is_refused_by_name(cluster, capfd):
    """Another tool is moving orders-1 (slowly, under its own throttle): a plan touching it is
    refused, naming it, and the other tool's move is left alone."""
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.throttle.specs import ConfigChange

    theirs = [ConfigChange("broker", "6", "follower.replication.throttled.rate", None, "1024"),
              ConfigChange("topic", "orders", "follower.replication.throttled.replicas", None, "1:6")]
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.alter_configs(theirs)
        admin.alter_partition_reassignments({("orders", 1): [6, 3, 4]})
    try:
        writes = cluster.write_count
        dr = airflow_env.run_dag({**FAST, "plan": plan_of(OK_MOVE, ("orders", 1, [5, 3, 4]))})
        out = "".join(capfd.readouterr())
        assert dr.state == "failed"
        assert cluster.write_count == writes
        assert "orders-1" in out and "someone else" in out
        assert cluster.partition_state("orders", 1)["adding"] == [6]
    finally:
        with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.alter_partition_reassignments({("orders", 1): None})
            admin.alter_configs([ConfigChange(c.resource_type, c.name, c.key, c.value, None) for c in theirs])
