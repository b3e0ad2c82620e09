"""The REST API path an operator's tooling uses, end to end, against real Airflow processes.

The session's shared stack (conftest.py): api-server + scheduler + dag-processor + triggerer
as subprocesses (SQLite, LocalExecutor, simple auth manager with a known admin password),
kafka_default created over REST. The test gets a JWT from ``POST
/auth/token``, triggers ``kafka_reassign`` with ``POST /api/v2/dags/kafka_reassign/dagRuns``
and a reassignment plan in ``conf`` (the curl example of the operators' guide, in Python),
polls the run until it succeeds, and checks on the simulated cluster - a real TCP server
in this test process - that the replicas moved and the throttles are gone again.
"""
from __future__ import annotations

import json
import time
from typing import Any, Callable

import pytest

from airflow_stack import AirflowStack

pytestmark = [pytest.mark.slow, pytest.mark.airflow, pytest.mark.timeout(600)]

THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                 "replica.alter.log.dirs.io.max.bytes.per.second")


def _throttles(cluster: Any) -> dict[int, dict[str, str]]:
    """Throttle configs per broker now, as the simulator holds them."""
    out = {}
    for b in cluster.snapshot()["brokers"]:
        cfg = cluster.broker_configs(b["id"])
        out[b["id"]] = {k: v for k, v in cfg.items() if k in THROTTLE_KEYS}
    return out


@pytest.fixture
def cluster(sim_cluster: Callable[..., Any], snapshot_factory: Callable[..., dict]) -> Any:
    snapshot = snapshot_factory(brokers=4, racks=2, topics={
        "orders": {"partitions": 3, "rf": 3, "size_bytes": 20_000_000, "configs": {"min.insync.replicas": "2"}},
        "clicks": {"partitions": 2, "rf": 2, "size_bytes": 5_000_000},
    })
    return sim_cluster(snapshot, time_scale=1.0)


@pytest.fixture
def stack(shared_stack: AirflowStack, cluster: Any) -> AirflowStack:
    """The session's shared stack (conftest.py), kafka_default pointing at ``cluster``."""
    shared_stack.put_connection("kafka_default", cluster.bootstrap_servers)
    return shared_stack


def test_trigger_reassignment_over_rest(stack: AirflowStack, cluster: Any) -> None:
    # Without a token the API refuses; with a wrong password no token is issued.
    with pytest.raises(Exception) as err:
        stack.request("GET", "/api/v2/dags", auth=False)
    assert getattr(err.value, "status", None) == 401
    with pytest.raises(Exception) as err:
        stack.request("POST", "/auth/token", {"username": stack.username, "password": "wrong"},
                      auth=False, expect=(200, 201))
    assert getattr(err.value, "status", None) in (401, 403)

    before = {p: cluster.partition_state("orders", p)["replicas"] for p in range(3)}
    throttles_before = _throttles(cluster)
    # Move partition 0 and 1 of orders to the broker each lacks; both stay on two racks.
    targets = {0: [4, 2, 3], 1: [1, 3, 4]}
    assert before[0] != targets[0] and before[1] != targets[1]
    plan = {"version": 1, "partitions": [
        {"topic": "orders", "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)} for p, r in targets.items()]}

    dag = stack.wait_for_dag("kafka_reassign")
    assert dag["dag_id"] == "kafka_reassign"
    t0 = time.monotonic()
    run = stack.trigger("kafka_reassign", {
        "plan": plan,
        "throttle_bytes_per_sec": 50_000_000,
        "max_partition_movements": 1,        # two batches, so the sequence is exercised
        "poll_interval_seconds": 1,
        "batch_timeout_minutes": 5,
    })
    assert run["state"] in ("queued", "running")
    assert run["conf"]["plan"] == plan
    final = stack.wait_for_run("kafka_reassign", run["dag_run_id"], timeout=420)
    elapsed = time.monotonic() - t0
    tis = {ti["task_id"] + (f"[{ti['map_index']}]" if ti.get("map_index", -1) >= 0 else ""): ti["state"]
           for ti in stack.task_instances("kafka_reassign", run["dag_run_id"])}
    assert final["state"] == "success", f"run ended {final['state']}: {json.dumps(tis, indent=1)}\n{stack.diagnostics()}"
    print(f"REST-triggered kafka_reassign run succeeded in {elapsed:.1f} s; tasks: {tis}")

    for p, r in targets.items():
        state = cluster.partition_state("orders", p)
        assert state["replicas"] == r, f"orders-{p}: {state}"
        assert sorted(state["isr"]) == sorted(r)
        assert not state["adding"] and not state["removing"]
    assert cluster.partition_state("orders", 2)["replicas"] == before[2]
    assert _throttles(cluster) == throttles_before, "throttles were not restored"
    for topic in ("orders", "clicks"):
        cfg = cluster.topic_configs(topic)
        assert "leader.replication.throttled.replicas" not in cfg
        assert "follower.replication.throttled.replicas" not in cfg
