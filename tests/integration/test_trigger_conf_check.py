"""A bad conf is refused by the REST API (the path the UI's trigger form uses too) before a run
exists, with the problem in the DAG's own param names; a good conf still triggers.

Real api-server + scheduler + dag-processor (tests/integration/airflow_stack.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from airflow_stack import AirflowApiError, AirflowStack

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.airflow, pytest.mark.timeout(600)]


@pytest.fixture
def stack(tmp_path: Path, sim_cluster: Callable[..., Any], small_snapshot: dict):
    cluster = sim_cluster(small_snapshot)
    conn = {"conn_type": "kafka", "extra": {"bootstrap.servers": cluster.bootstrap_servers}}
    with AirflowStack(home=tmp_path / "airflow", dags_folder=ROOT / "dags", connections={"kafka_default": conn}) as s:
        yield s


def _refused(stack: AirflowStack, conf: dict[str, Any]) -> str:
    with pytest.raises(AirflowApiError) as err:
        stack.trigger("kafka_reassign", conf)
    assert err.value.status == 400, err.value
    return str(err.value)


def test_bad_conf_is_refused_before_a_run_exists(stack: AirflowStack) -> None:
    stack.wait_for_dag("kafka_reassign")
    assert "give either 'plan'" in _refused(stack, {})
    assert "needs 'brokers'" in _refused(stack, {"goal": "remove-brokers"})
    assert "did you mean 'throttle_bytes_per_sec'" in _refused(stack, {"goal": "rebalance", "throttle": 5})
    assert "param plan" in _refused(stack, {"plan": {"version": 2, "partitions": []}})  # Airflow's own check
    runs = stack.request("GET", "/api/v2/dags/kafka_reassign/dagRuns")
    assert runs["total_entries"] == 0, runs
    # Without a token the middleware says nothing: Airflow's 401 comes first.
    with pytest.raises(AirflowApiError) as err:
        stack.request("POST", "/api/v2/dags/kafka_reassign/dagRuns", {"logical_date": None, "conf": {}}, auth=False)
    assert err.value.status == 401
    run = stack.trigger("kafka_reassign", {"plan": {"version": 1, "partitions": []}, "dry_run": True})
    assert run["conf"]["dry_run"] is True
