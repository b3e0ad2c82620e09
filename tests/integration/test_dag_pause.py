"""Pause and resume a kafka_reassign DAG run through the progress page's REST routes.

The run moves four partitions one KIP-435 step at a time. It is paused (``POST
/kafka-reassign/api/pause``, which sets the run's pause Variable) while its first step is in
flight: that step finishes, no new step is submitted while the pause holds (the simulator's
AlterPartitionReassignments count stays put), and after ``POST /api/resume`` the run finishes
the plan without submitting any step twice.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import airflow_env  # noqa: E402

airflow_env.configure_env()

from test_dag_reassign import FAST, airflow_db, in_flight, kafka_conn, placement, plan_of, six_broker_snapshot  # noqa: E402,F401

pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.timeout(300)]

ALTER_REASSIGNMENTS = 45
# four single-step moves (one replica replaced each), submitted one at a time
PLAN = plan_of(("orders", 0, [4, 2, 3]), ("orders", 1, [5, 3, 4]), ("orders", 2, [6, 4, 5]),
               ("orders", 3, [1, 5, 6]))
HELD_SECONDS = 4.0  # how long the paused run is watched with nothing in flight


def _submitted(cluster: Any) -> list[tuple[str, int, tuple[int, ...]]]:
    """Record every reassignment target the simulated controller accepts (cancellations apart)."""
    seen: list[tuple[str, int, tuple[int, ...]]] = []
    accept = cluster.model.alter_reassignments

    def recording(items: list[tuple[str, int, list[int] | None]], *args: Any, **kwargs: Any) -> Any:
        seen.extend((t, p, tuple(r)) for t, p, r in items if r is not None)
        return accept(items, *args, **kwargs)

    cluster.model.alter_reassignments = recording
    return seen


def _alter_requests(cluster: Any) -> int:
    return sum(n for (key, _client), n in cluster.request_counts.items() if key == ALTER_REASSIGNMENTS)


def _running_run_id() -> str | None:
    from sqlalchemy import select

    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    # the newest: earlier tests of the session (tests/dags) leave runs marked running in the same DB
    with create_session() as session:
        return session.scalars(select(DagRun.run_id).where(DagRun.dag_id == "kafka_reassign",
                                                           DagRun.state == "running")
                               .order_by(DagRun.id.desc())).first()


@pytest.fixture
def page_api(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The plugin's app as an operator allowed to edit the DAG's runs."""
    from fastapi.testclient import TestClient

    from kafka_reassign_airflow import plugin

    async def may_access_runs(request: Any, dag_id: str | None, method: str) -> bool:
        return True

    monkeypatch.setattr(plugin, "may_access_runs", may_access_runs)
    return TestClient(plugin.create_app())


class PauseScript:
    """Pause while the first step moves; watch the held run; resume. Runs in a Watcher thread."""

    def __init__(self, cluster: Any, api: Any) -> None:
        self.cluster, self.api = cluster, api
        self.run_id: str | None = None
        self.moving_at_pause: list[str] = []
        self.requests_when_idle = -1
        self.held_checks: list[tuple[int, list[str]]] = []

    def post(self, action: str) -> None:
        resp = self.api.post(f"/api/{action}", params={"dag_id": "kafka_reassign", "run_id": self.run_id})
        assert resp.status_code == 200, resp.text

    def first_step_moving(self) -> bool:
        return bool(in_flight(self.cluster)) and _running_run_id() is not None

    def pause(self) -> None:
        self.run_id = _running_run_id()
        self.post("pause")
        self.moving_at_pause = in_flight(self.cluster)

    def idle(self) -> bool:
        return not in_flight(self.cluster)

    def hold_then_resume(self) -> None:
        self.requests_when_idle = _alter_requests(self.cluster)
        until = time.monotonic() + HELD_SECONDS
        while time.monotonic() < until:
            self.held_checks.append((_alter_requests(self.cluster), in_flight(self.cluster)))
            time.sleep(0.2)
        self.post("resume")


def test_a_paused_run_submits_nothing_new_and_resumes_without_resubmitting(airflow_db, sim_cluster, kafka_conn,
                                                                           page_api, monkeypatch, capfd):
    from kafka_reassign_airflow.pause import is_paused
    from kafka_reassign_airflow.triggers import reassignment

    # a paused run with nothing in flight re-reads its pause every 2 s here (a minute in production)
    monkeypatch.setattr(reassignment, "PROGRESS_REFRESH_SECONDS", 2.0)
    # 50 MB at 10 MB/s = 5 simulated s per step, 2.5 s of wall time at x2: on a loaded machine the
    # watcher still sees the first step and pauses before it ends
    cluster = sim_cluster(six_broker_snapshot(size=50_000_000), time_scale=2.0)
    kafka_conn(cluster)
    submitted = _submitted(cluster)
    script = PauseScript(cluster, page_api)
    with airflow_env.Watcher([(script.first_step_moving, script.pause), (script.idle, script.hold_then_resume)],
                             interval=0.05, timeout=120) as watcher:
        dr = airflow_env.run_dag({"plan": PLAN, "throttle_bytes_per_sec": 10_000_000, "max_partition_movements": 1,
                                  **FAST})
    assert watcher.error is None and watcher.done == [0, 1], watcher.error
    assert dr.state == "success", airflow_env.task_states(dr)
    assert dr.run_id == script.run_id and not is_paused(dr.run_id)
    # paused with one step moving: that step finished, and nothing new went out until the resume
    assert len(script.moving_at_pause) == 1
    first = script.moving_at_pause[0]
    assert [f"{t}-{p}" for t, p, _r in submitted[:1]] == [first]
    assert script.held_checks and all(n == script.requests_when_idle and not moving
                                      for n, moving in script.held_checks), script.held_checks
    # resumed: the other three steps, each submitted once, the finished one not again
    assert len(submitted) == len(set(submitted)) == len(PLAN["partitions"]), submitted
    assert placement(cluster, PLAN) == {f"{e['topic']}-{e['partition']}": e["replicas"] for e in PLAN["partitions"]}
    assert "paused" in capfd.readouterr().out.lower()
