"""A bad conf is refused by the REST API (the path the UI's trigger form uses too) before a run
exists, with the problem in the DAG's own param names; a good conf still triggers.

Real api-server + scheduler + dag-processor: the session's shared stack (conftest.py)."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from airflow_stack import AirflowApiError, AirflowStack

pytestmark = [pytest.mark.slow, pytest.mark.airflow, pytest.mark.timeout(600)]


@pytest.fixture
def stack(shared_stack: AirflowStack, sim_cluster: Callable[..., Any], small_snapshot: dict) -> AirflowStack:
    """The session's shared stack (conftest.py), kafka_default pointing at a fresh simulated cluster."""
    shared_stack.put_connection("kafka_default", sim_cluster(small_snapshot).bootstrap_servers)
    return shared_stack


def _run_count(stack: AirflowStack) -> int:
    return int(stack.request("GET", "/api/v2/dags/kafka_reassign/dagRuns")["total_entries"])


def _refused(stack: AirflowStack, conf: dict[str, Any]) -> str:
    with pytest.raises(AirflowApiError) as err:
        stack.trigger("kafka_reassign", conf)
    assert err.value.status == 400, err.value
    return str(err.value)


def test_bad_conf_is_refused_before_a_run_exists(stack: AirflowStack) -> None:
    stack.wait_for_dag("kafka_reassign")
    runs_before = _run_count(stack)  # the shared stack keeps other modules' runs
    assert "give either 'plan'" in _refused(stack, {})
    assert "needs 'brokers'" in _refused(stack, {"goal": "remove-brokers"})
    assert "did you mean 'throttle_bytes_per_sec'" in _refused(stack, {"goal": "rebalance", "throttle": 5})
    assert "param plan" in _refused(stack, {"plan": {"version": 2, "partitions": []}})  # Airflow's own check
    assert _run_count(stack) == runs_before, "a refused conf created a run"
    # Without a token the middleware says nothing: Airflow's 401 comes first.
    with pytest.raises(AirflowApiError) as err:
        stack.request("POST", "/api/v2/dags/kafka_reassign/dagRuns", {"logical_date": None, "conf": {}}, auth=False)
    assert err.value.status == 401
    run = stack.trigger("kafka_reassign", {"plan": {"version": 1, "partitions": []}, "dry_run": True})
    assert run["conf"]["dry_run"] is True
    assert _run_count(stack) == runs_before + 1
    # Ended before the cluster stops, so the next module on the shared stack finds no run of ours.
    stack.wait_for_run("kafka_reassign", run["dag_run_id"], timeout=240)
