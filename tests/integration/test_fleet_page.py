"""The fleet page of the UI plugin, served by a real Airflow, seen by headless Chromium.

Three clusters in the fleet Variable: ``kafka_a`` (simulated) with a throttled reassignment in
flight, ``kafka_b`` (simulated) whose last run ended leaving its throttle record unrestored
(what a teardown that never ran leaves), and ``kafka_gone``, a connection to a closed port.
The page reads stored state only, so the unreachable cluster neither fails nor slows it: each
row must carry its own status word, and the screenshot must be a real page.

Runs on the session's shared stack (conftest.py): the connections and the fleet Variable are
created over the REST API, as an operator would; the page reads the Variable on each request.
"""
from __future__ import annotations

import json
import shutil
import socket
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from airflow_stack import AirflowApiError, AirflowStack
from test_ui_plugin import chromium, screenshot_stats

ROOT = Path(__file__).resolve().parents[2]
FLEET = ["kafka_a", "kafka_b", "kafka_gone"]
FLEET_VARIABLE = "kafka_reassign_fleet"
#: task states of a task instance still at work
ACTIVE = {"running", "deferred", "queued", "scheduled", "up_for_retry", "up_for_reschedule", "restarting"}

pytestmark = [pytest.mark.slow, pytest.mark.airflow, pytest.mark.timeout(600)]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def stack(shared_stack: AirflowStack) -> Iterator[AirflowStack]:
    """The shared stack; afterwards without the fleet Variable the test sets.

    While the Variable is set, the DAG files parse one rebalance DAG per fleet cluster instead of
    kafka_rebalance: wait until kafka_rebalance is parsed again, for the modules after this one.
    """
    yield shared_stack
    shared_stack.request("DELETE", f"/api/v2/variables/{FLEET_VARIABLE}", expect=(204, 404))

    def rebalance_dag_back() -> bool:
        try:
            return not shared_stack.request("GET", "/api/v2/dags/kafka_rebalance")["is_stale"]
        except AirflowApiError as err:
            if err.status == 404:
                return False
            raise

    shared_stack.wait_for(rebalance_dag_back, 120, "kafka_rebalance to be parsed again", interval=1.0)


def _end_moving_run(stack: AirflowStack, run_id: str) -> None:
    """Mark the run still moving failed and wait for its teardown (cancels the move, restores the
    throttle), so nothing of this test keeps working on the shared stack after its clusters stop."""
    stack.request("PATCH", f"/api/v2/dags/kafka_reassign/dagRuns/{run_id}", {"state": "failed"})

    def settled() -> bool:
        states = {ti["task_id"]: ti["state"] for ti in stack.task_instances("kafka_reassign", run_id)}
        return states.get("throttle_remove") in ("success", "failed") and not set(states.values()) & ACTIVE

    stack.wait_for(settled, 240, f"the teardown of run {run_id}", interval=1.0)


def _cluster(sim_cluster: Callable[..., Any], snapshot_factory: Callable[..., dict], cluster_id: str) -> Any:
    snapshot = snapshot_factory(brokers=4, racks=2, topics={
        "orders": {"partitions": 3, "rf": 3, "size_bytes": 400_000_000, "configs": {"min.insync.replicas": "2"}},
        "clicks": {"partitions": 2, "rf": 2, "size_bytes": 2_000_000}})
    return sim_cluster({**snapshot, "cluster_id": cluster_id}, time_scale=1.0)


def _leave_throttle_unrestored(stack: AirflowStack, run_id: str) -> dict[str, Any]:
    """The run's throttle record as a run whose teardown never ran leaves it: unrestored."""
    from kafka_reassign_airflow.record_store import VariableRecordStore

    key = VariableRecordStore().key_for(run_id)
    record = json.loads(stack.request("GET", f"/api/v2/variables/{key}")["value"])
    assert record["changes"], f"run {run_id} recorded no throttle: {record}"
    record.update(restored=False, restored_at=None)
    stack.request("PATCH", f"/api/v2/variables/{key}", {"key": key, "value": json.dumps(record)})
    return record


def test_fleet_page_shows_three_clusters(tmp_path: Path, stack: AirflowStack, sim_cluster: Callable[..., Any],
                                         snapshot_factory: Callable[..., dict]) -> None:
    a = _cluster(sim_cluster, snapshot_factory, "fleet-sim-a")
    b = _cluster(sim_cluster, snapshot_factory, "fleet-sim-b")
    # The connections first: the DAG files check the fleet's connections when they parse.
    for conn_id, bootstrap in (("kafka_a", a.bootstrap_servers), ("kafka_b", b.bootstrap_servers),
                               ("kafka_gone", f"127.0.0.1:{_closed_port()}")):
        stack.put_connection(conn_id, bootstrap)
    stack.request("POST", "/api/v2/variables", {"key": FLEET_VARIABLE, "value": json.dumps(FLEET)}, expect=(200, 201))
    stack.wait_for_dag("kafka_reassign")
    # kafka_b: a small move that finishes; kafka_a: 400 MB at 2 MB/s, still moving while the page is read.
    run_b = stack.trigger("kafka_reassign", {"kafka_conn_id": "kafka_b", "plan": {"version": 1, "partitions": [
        {"topic": "clicks", "partition": 0, "replicas": [3, 4]}]}, "throttle_bytes_per_sec": 50_000_000,
        "poll_interval_seconds": 1})["dag_run_id"]
    run_a = stack.trigger("kafka_reassign", {"kafka_conn_id": "kafka_a", "plan": {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [4, 2, 3]}]}, "throttle_bytes_per_sec": 2_000_000,
        "poll_interval_seconds": 1, "batch_timeout_minutes": 30})["dag_run_id"]
    try:
        assert stack.wait_for_run("kafka_reassign", run_b, timeout=300)["state"] == "success", stack.diagnostics()
        record = _leave_throttle_unrestored(stack, run_b)
        assert record["cluster_id"] == "fleet-sim-b"

        def a_moving() -> dict[str, Any] | None:
            rows = {r["conn_id"]: r for r in stack.request("GET", "/kafka-reassign/api/fleet")["clusters"]}
            flight = rows["kafka_a"]["in_flight"]
            ready = flight and flight["percent"] is not None and flight["percent"] < 100 and flight["eta_seconds"]
            return rows if ready else None

        a_moving_rows = stack.wait_for(a_moving, 240, "kafka_a's run to report progress", interval=1.0)
        started = time.monotonic()
        view = stack.request("GET", "/kafka-reassign/api/fleet")
        elapsed = time.monotonic() - started
        rows = {r["conn_id"]: r for r in view["clusters"]}
        assert list(rows) == FLEET and view["configured"] is True
        assert elapsed < 5.0, f"the fleet view took {elapsed:.1f} s with a cluster unreachable"
        _check_rows(rows, run_a, run_b)
        assert a_moving_rows["kafka_a"]["in_flight"]["run_id"] == run_a
        _check_page(stack, tmp_path, run_a, run_b)
    finally:
        _end_moving_run(stack, run_a)


def _check_rows(rows: dict[str, dict[str, Any]], run_a: str, run_b: str) -> None:
    moving, left, gone = rows["kafka_a"], rows["kafka_b"], rows["kafka_gone"]
    assert moving["status"] == "moving", moving
    assert moving["cluster_id"] == "fleet-sim-a"
    assert moving["in_flight"]["run_id"] == run_a and moving["in_flight"]["dag_id"] == "kafka_reassign"
    assert moving["in_flight"]["eta_seconds"] and moving["in_flight"]["eta_seconds"] > 0, moving["in_flight"]
    assert [t["run_id"] for t in moving["throttles"]] == [run_a] and moving["throttles"][0]["run_active"]

    assert left["status"] == "throttle left", left
    assert left["cluster_id"] == "fleet-sim-b" and left["in_flight"] is None
    assert [(t["run_id"], t["run_active"]) for t in left["throttles"]] == [(run_b, False)]
    assert left["throttles"][0]["settings"] > 0

    assert gone["status"] == "unknown", gone
    assert gone["cluster_id"] is None and gone["in_flight"] is None and gone["throttles"] == []


def _check_page(stack: AirflowStack, tmp_path: Path, run_a: str, run_b: str) -> None:
    url = f"{stack.base_url}/kafka-reassign/?refresh_ms=60000#token={stack.token()}"
    dom = chromium(["--virtual-time-budget=8000", "--dump-dom", url], tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-fleet="1"' in dom.stdout, dom.stdout[-3000:]
    # The fleet table alone (the run picker above it lists the runs too).
    html = dom.stdout[dom.stdout.index('<section id="fleet"'):]
    html = html[:html.index("</section>")]
    for conn, word in (("kafka_a", "moving"), ("kafka_b", "throttle left"), ("kafka_gone", "unknown")):
        assert f'data-conn="{conn}" data-status="{word}"' in html, f"{conn} not shown as {word}"
    assert "fleet-sim-a" in html and "fleet-sim-b" in html and "3 cluster(s)" in html
    # Each run is named and links to its run page.
    for run_id in (run_a, run_b):
        assert run_id in html, f"{run_id} not shown"
    assert "./?dag_id=kafka_reassign&amp;run_id=" in html
    # A fleet and no cluster picked: the overview reads no cluster live (kafka_default is no cluster here).
    assert 'id="cluster-view" hidden' in dom.stdout and "Fleet overview" in dom.stdout

    shot = tmp_path / "fleet.png"
    out = chromium(["--virtual-time-budget=8000", f"--screenshot={shot}", "--window-size=1400,900", url], tmp_path)
    assert out.returncode == 0 and shot.exists(), out.stderr[-2000:]
    stats = screenshot_stats(shot)
    print(f"fleet page screenshot {shot}: {stats}")
    assert stats["width"] == 1400 and stats["height"] == 900
    assert stats["ink"] > 0.03 and stats["colours"] > 20, f"page looks blank: {stats}"
    keep = ROOT / "out"
    keep.mkdir(exist_ok=True)
    shutil.copyfile(shot, keep / "ui-fleet.png")
