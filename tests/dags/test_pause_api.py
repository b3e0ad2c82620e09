"""Pausing a DAG run: the Variable the execute task reads, and the progress page's REST routes."""
from __future__ import annotations

import time
from typing import Any

import pytest


def _running_run(run_id: str) -> None:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState
    from airflow.utils.types import DagRunTriggeredByType, DagRunType

    with create_session() as session:
        session.add(DagRun(dag_id="kafka_reassign", run_id=run_id, run_type=DagRunType.MANUAL,
                           state=DagRunState.RUNNING, triggered_by=DagRunTriggeredByType.TEST))


def test_pause_is_a_variable_with_the_run_id_encoded(airflow_db: Any) -> None:
    from airflow.models.variable import Variable

    from kafka_reassign_airflow.pause import is_paused, pause, pause_key, resume

    run_id = f"manual__2026-11-26T05:00:00+00:00-{time.time_ns()}"
    assert pause_key(run_id).startswith("kafka_reassign.pause.manual__2026-11-26T05~3A00")
    assert not is_paused(run_id) and resume(run_id) is False
    pause(run_id, by="test")
    assert is_paused(run_id) and Variable.get(pause_key(run_id)) is not None
    assert resume(run_id) is True and not is_paused(run_id)


@pytest.fixture
def client(airflow_db: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The plugin's app, with the auth manager's answer replaced by a record of what was asked."""
    from fastapi.testclient import TestClient

    from kafka_reassign_airflow import plugin

    asked: list[tuple[str | None, str]] = []

    async def may_access_runs(request: Any, dag_id: str | None, method: str) -> bool:
        asked.append((dag_id, method))
        return request.headers.get("x-test-user") == "operator"

    monkeypatch.setattr(plugin, "may_access_runs", may_access_runs)
    c = TestClient(plugin.create_app())
    c.asked = asked  # type: ignore[attr-defined]
    return c


def test_pause_and_resume_routes_set_and_delete_the_variable(client: Any) -> None:
    from kafka_reassign_airflow.pause import is_paused

    run_id = f"manual__pause-{time.time_ns()}"
    _running_run(run_id)
    q = {"dag_id": "kafka_reassign", "run_id": run_id}
    assert client.post("/api/pause", params=q).status_code == 403 and not is_paused(run_id)
    resp = client.post("/api/pause", params=q, headers={"x-test-user": "operator"})
    assert resp.status_code == 200 and resp.json()["paused"] is True and is_paused(run_id)
    assert ("kafka_reassign", "PUT") in client.asked   # editing runs, not only reading them
    resp = client.post("/api/resume", params=q, headers={"x-test-user": "operator"})
    assert resp.status_code == 200 and not is_paused(run_id)
    missing = client.post("/api/pause", params={**q, "run_id": "no-such-run"}, headers={"x-test-user": "operator"})
    assert missing.status_code == 404 and "no-such-run" in missing.json()["detail"]
