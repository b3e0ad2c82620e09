"""The progress page of a finished kafka_rebalance run, in headless Chromium: the plan summary
table (moves, data, leaders, balance per broker, estimated time) and the planner's before/after
chart, and a finished page that says so (no "ETA 0 s" with a full bar). Real api-server,
scheduler and dag-processor; the plan is computed by the planner (local engine)."""
from __future__ import annotations

import re
import shutil
import urllib.request
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

import pytest

from airflow_stack import AirflowStack
from test_ui_plugin import chromium, screenshot_stats

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.airflow, pytest.mark.timeout(600)]


def test_finished_run_page_shows_plan_summary_and_chart(tmp_path: Path, shared_stack: AirflowStack,
                                                          sim_cluster: Callable[..., Any],
                                                          snapshot_factory: Callable[..., dict]) -> None:
    # Everything on brokers 1-3; broker 4 is empty: the planner moves replicas there.
    replicas = [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 2, 3], [2, 3, 1], [3, 1, 2]]
    cluster = sim_cluster(snapshot_factory(brokers=4, racks=2, topics={
        "orders": {"partitions": 6, "rf": 3, "size_bytes": 30_000_000, "replicas": replicas}}))
    # The session's shared stack (conftest.py; kafka_rebalance unscheduled there), kafka_default over REST.
    stack = shared_stack
    stack.put_connection("kafka_default", cluster.bootstrap_servers)
    stack.wait_for_dag("kafka_rebalance")
    # A threshold no cluster exceeds: plan, show the plan, then stop quietly (nothing moves).
    run = stack.trigger("kafka_rebalance", {"planner_engine": "local", "balance_threshold": 1000.0})
    final = stack.wait_for_run("kafka_rebalance", run["dag_run_id"], timeout=300)
    assert final["state"] == "success", stack.diagnostics()
    run_id = run["dag_run_id"]

    # The plan task links to its summary and chart.
    links = stack.request("GET", f"/api/v2/dags/kafka_rebalance/dagRuns/{quote(run_id)}/taskInstances/plan/links")
    assert links["extra_links"]["Plan summary & chart"] == f"/kafka-reassign/?dag_id=kafka_rebalance&run_id={quote(run_id)}#plan"
    view = stack.request("GET", f"/kafka-reassign/api/progress?dag_id=kafka_rebalance&run_id={quote(run_id)}")
    plan = view["plan"]
    labels = {h["label"]: h["value"] for h in plan["headline"]}
    assert labels["Goal"] == "rebalance" and " → " in labels["Disk balance (max / mean)"]
    assert {b["broker"] for b in plan["brokers"]} == {1, 2, 3, 4} and plan["chart"] is True
    assert [b for b in plan["brokers"] if b["broker"] == 4][0]["disk_before"] == "0.0 %"
    assert view["summary"]["eta_seconds"] is None  # nothing moving: no ETA, not "0 s"
    req = urllib.request.Request(f"{stack.base_url}/kafka-reassign/api/chart?dag_id=kafka_rebalance"
                                 f"&run_id={quote(run_id)}", headers={"Authorization": f"Bearer {stack.token()}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.headers["Content-Type"] == "image/png" and resp.read(8) == b"\x89PNG\r\n\x1a\n"

    url = (f"{stack.base_url}/kafka-reassign/?dag_id=kafka_rebalance&run_id={quote(run_id)}"
           f"&refresh_ms=60000#token={stack.token()}")
    dom = chromium(["--virtual-time-budget=8000", "--dump-dom", url], tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert 'data-loaded="1"' in html and 'data-chart="1"' in html, html[-3000:]
    for text in ("Plan", "Disk balance (max / mean)", "Estimated time", "Leader changes", "idle: nothing to move",
                 "kafka_default"):
        assert text in html, f"{text!r} not rendered"
    assert "0 s" not in html.split('id="cards"')[1].split("</section>")[0]
    bar = re.search(r'id="overall-bar"[^>]*style="width: ([0-9.]+)%', html) or re.search(
        r'style="width: ([0-9.]+)%;?"[^>]*id="overall-bar"', html)
    assert bar and float(bar.group(1)) == 0.0, "the overall bar must be empty when nothing moves"

    shot = tmp_path / "plan-page.png"
    out = chromium(["--virtual-time-budget=8000", f"--screenshot={shot}", "--window-size=1400,1400", url], tmp_path)
    assert out.returncode == 0 and shot.exists(), out.stderr[-2000:]
    stats = screenshot_stats(shot)
    print(f"screenshot {shot}: {stats}")
    assert stats["ink"] > 0.05 and stats["colours"] > 40, f"page or chart looks blank: {stats}"
    keep = ROOT / "out"
    keep.mkdir(exist_ok=True)
    shutil.copyfile(shot, keep / "ui-plan-chart.png")
