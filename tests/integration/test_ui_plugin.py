"""The progress page of the UI plugin, served by a real api-server, seen by headless Chromium.

A throttled reassignment runs on the simulated cluster while the page is open: the JSON
endpoint must list the moving partitions with bytes left and the throttles, the rendered
DOM must show them, and the screenshot must be a real page (not blank). The per-run view
is exercised with a kafka_reassign run triggered over the REST API, and its Pause button
clicked in Chromium (over the DevTools protocol, tests/integration/cdp_browser.py).
"""
from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from urllib.parse import quote
from typing import Any, Callable

import pytest

from airflow_stack import AirflowStack
from kafka_reassign.planning.estimate import SOURCE_FORMULA, SOURCE_REHEARSAL

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

pytestmark = [pytest.mark.slow, pytest.mark.airflow, pytest.mark.timeout(600)]


def chromium(args: list[str], tmp: Path, timeout: float = 90.0) -> subprocess.CompletedProcess:
    """Run headless Chromium once (own profile dir, nothing phoning home)."""
    profile = tmp / f"chromium-profile-{time.monotonic_ns()}"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
           f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def screenshot_stats(path: Path) -> dict[str, float]:
    """Share of non-background pixels and number of distinct colours of a PNG."""
    from PIL import Image

    img = Image.open(path).convert("RGB")
    small = img.resize((img.width // 4, img.height // 4))
    pixels = list(small.getdata())
    background = max(set(pixels), key=pixels.count)
    ink = sum(1 for p in pixels if sum(abs(a - b) for a, b in zip(p, background)) > 60)
    return {"ink": ink / len(pixels), "colours": len(set(pixels)), "width": img.width, "height": img.height}


def page_screenshot(url: str, tmp: Path, name: str, budget_ms: int) -> dict[str, float]:
    """A 1400x1000 screenshot of ``url`` in headless Chromium (tmp/name); its :func:`screenshot_stats`."""
    shot = tmp / name
    out = chromium([f"--virtual-time-budget={budget_ms}", f"--screenshot={shot}", "--window-size=1400,1000", url],
                   tmp)
    assert out.returncode == 0 and shot.exists(), out.stderr[-2000:]
    stats = screenshot_stats(shot)
    print(f"screenshot {shot}: {stats}")
    return stats


def start_slow_move(cluster: Any, run_id: str = "ui-test-move") -> None:
    """Start a throttled reassignment directly through the domain package (no Airflow)."""
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.run.prepare import prepare
    from kafka_reassign.run.reassign import executor_for
    from kafka_reassign.throttle.apply import apply_throttle
    from kafka_reassign.throttle.record import MemoryRecordStore

    admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers.split(","))
    try:
        plan = {"version": 1, "partitions": [
            {"topic": "orders", "partition": 0, "replicas": [4, 2, 3]},
            {"topic": "orders", "partition": 1, "replicas": [1, 3, 4]}]}
        # A 300 s poll makes each broker's byte budget 600 s of the throttle (1.2 GB), so both 400 MB
        # moves (broker 1 sends one and receives the other) start in the one tick.
        prepared = prepare(admin, plan, {"throttle_bytes_per_sec": 2_000_000, "max_partition_movements": 10,
                                         "poll_interval_seconds": 300}, run_id=run_id)
        records = MemoryRecordStore()
        apply_throttle(admin, prepared, records, run_id)
        executor_for(prepared, run_id, records).tick(admin)  # submits both moves
    finally:
        admin.close()


def click_pause_then_resume(stack: AirflowStack, url: str, run_id: str, tmp_path: Path) -> None:
    """Click the run page's Pause button in Chromium: the page and the saved pause Variable say
    paused; click again (Resume): both say running. Done while the first move copies, so the
    resume comes before the run would idle paused."""
    from cdp_browser import Browser
    from kafka_reassign_airflow.pause import pause_key

    variable = f"/api/v2/variables/{quote(pause_key(run_id), safe='')}"
    progress = f"/kafka-reassign/api/progress?dag_id=kafka_reassign&run_id={quote(run_id, safe='')}"
    button = "document.getElementById('pause-btn').textContent"
    with Browser(CHROMIUM, tmp_path / "cdp-profile") as page:
        page.open(url.replace("/?", "/?refresh_ms=1000&", 1))
        assert page.wait_js(f"document.body.dataset.loaded === '1' && {button}") == "Pause new moves"
        page.click("#pause-btn")
        assert page.wait_js(f"{button} === 'Resume new moves' && {button}", timeout=15)
        saved = stack.request("GET", variable)
        assert "progress page" in saved["value"], saved  # who paused it, kept for the audit trail
        assert stack.request("GET", progress)["run"]["paused"] is True
        page.click("#pause-btn")
        assert page.wait_js(f"{button} === 'Pause new moves' && {button}", timeout=15)
        stack.request("GET", variable, expect=(404,))
        assert stack.request("GET", progress)["run"]["paused"] is False


@pytest.fixture
def cluster(sim_cluster: Callable[..., Any], snapshot_factory: Callable[..., dict]) -> Any:
    snapshot = snapshot_factory(brokers=4, racks=2, topics={
        "orders": {"partitions": 3, "rf": 3, "size_bytes": 400_000_000, "configs": {"min.insync.replicas": "2"}},
        "clicks": {"partitions": 2, "rf": 2, "size_bytes": 5_000_000},
    })
    return sim_cluster(snapshot, time_scale=1.0)


@pytest.fixture
def stack(shared_stack: AirflowStack, cluster: Any) -> AirflowStack:
    """The session's shared stack (conftest.py), kafka_default pointing at ``cluster``."""
    shared_stack.put_connection("kafka_default", cluster.bootstrap_servers)
    return shared_stack


def test_cluster_wide_page_shows_live_move(tmp_path: Path, cluster: Any, stack: AirflowStack) -> None:
    # Unauthenticated JSON is refused; the page shell (no data) is served.
    with pytest.raises(Exception) as err:
        stack.request("GET", "/kafka-reassign/api/progress", auth=False)
    assert getattr(err.value, "status", None) in (401, 403)
    html = stack.request("GET", "/kafka-reassign/", auth=False)
    assert "Kafka reassignment" in html

    start_slow_move(cluster)
    first = stack.request("GET", "/kafka-reassign/api/progress")
    time.sleep(2.0)
    view = stack.request("GET", "/kafka-reassign/api/progress")
    moving = {(p["topic"], p["partition"]) for p in view["partitions"]}
    assert moving == {("orders", 0), ("orders", 1)}, view["partitions"]
    assert view["summary"]["partitions_in_flight"] == 2
    assert view["summary"]["bytes_left"] > 0
    assert view["summary"]["bytes_left"] < first["summary"]["bytes_left"], "bytes left do not fall"
    assert view["summary"]["rate_bytes_per_sec"] and view["summary"]["rate_bytes_per_sec"] > 0
    assert view["summary"]["eta_seconds"] and view["summary"]["eta_seconds"] > 0
    for p in view["partitions"]:
        assert p["bytes_left"] > 0 and p["bytes_total"] >= p["bytes_left"]
        assert any(r["role"] == "adding" and r["status"].startswith("Behind") for r in p["replicas"])
    throttled = {t["broker"]: t for t in view["throttles"]}
    assert set(throttled) == {1, 2, 3, 4}
    assert all(t["leader_rate"] == 2_000_000 and t["follower_rate"] == 2_000_000 for t in throttled.values())
    assert view["under_min_isr"] == []

    url = f"{stack.base_url}/kafka-reassign/?refresh_ms=1000#token={stack.token()}"
    dom = chromium(["--virtual-time-budget=6000", "--dump-dom", url], tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-loaded="1"' in dom.stdout, dom.stdout[-3000:]
    for name in ("orders-0", "orders-1", "adding: behind", "2.0 MB/s", "Moving"):
        assert name in dom.stdout, f"{name!r} not rendered"

    stats = page_screenshot(url, tmp_path, "progress.png", 6000)
    assert stats["width"] == 1400 and stats["height"] == 1000
    assert stats["ink"] > 0.03, f"page looks blank: {stats}"
    assert stats["colours"] > 20, f"page looks blank: {stats}"
    keep = ROOT / "out"
    keep.mkdir(exist_ok=True)
    shutil.copyfile(tmp_path / "progress.png", keep / "ui-progress-cluster.png")


def test_run_page_shows_the_progress_of_a_running_dag(tmp_path: Path, cluster: Any, stack: AirflowStack) -> None:
    """A kafka_reassign run triggered over REST, watched on its run page (the executor's saved progress)."""
    stack.wait_for_dag("kafka_reassign")
    plan = {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [4, 2, 3]},
        {"topic": "orders", "partition": 1, "replicas": [1, 3, 4]}]}
    # 400 MB partitions at 40 MB/s, one move at a time: each runs ~10 s, enough to watch it.
    run = stack.trigger("kafka_reassign", {"plan": plan, "throttle_bytes_per_sec": 40_000_000,
                                           "max_partition_movements": 1, "poll_interval_seconds": 1,
                                           "batch_timeout_minutes": 10})
    run_id = run["dag_run_id"]
    path = f"/kafka-reassign/api/progress?dag_id=kafka_reassign&run_id={quote(run_id, safe='')}"

    def moving() -> dict[str, Any] | None:
        view = stack.request("GET", path)
        busy = [p for p in view["partitions"] if p["status"].startswith("Moving") and p["bytes_left"] > 0]
        return view if busy and view["summary"].get("rate_bytes_per_sec") else None

    view = stack.wait_for(moving, 240, "a move of the run to be copying data", interval=0.5)
    assert view["run"]["run_id"] == run_id and view["run"]["dag_id"] == "kafka_reassign"
    assert view["summary"]["steps_total"] == 2 and view["summary"]["steps_in_flight"] == 1
    assert {(p["topic"], p["partition"]) for p in view["partitions"]} <= {("orders", 0), ("orders", 1)}
    assert any(t["set_by"].startswith("this run") for t in view["throttles"]), view["throttles"]
    # Prepare's estimate is shown next to the plan, saying where it comes from.
    estimate = view["estimate"]["estimate"]
    assert estimate["source"] in (SOURCE_FORMULA, SOURCE_REHEARSAL) and estimate["text"], estimate

    # Unencoded, as the Airflow UI substitutes {RUN_ID} into the external view's href.
    url = f"{stack.base_url}/kafka-reassign/?dag_id=kafka_reassign&run_id={run_id}#token={stack.token()}"
    click_pause_then_resume(stack, url, run_id, tmp_path)
    stats = page_screenshot(url, tmp_path, "run-progress.png", 5000)
    assert stats["ink"] > 0.03 and stats["colours"] > 20, stats
    keep = ROOT / "out"
    keep.mkdir(exist_ok=True)
    shutil.copyfile(tmp_path / "run-progress.png", keep / "ui-progress-run.png")

    final = stack.wait_for_run("kafka_reassign", run_id, timeout=300)
    assert final["state"] == "success", stack.diagnostics()
    done = stack.request("GET", path)
    assert done["summary"]["outcome"] == "done" and done["summary"]["steps_done"] == 2, done["summary"]
    assert done["summary"]["bytes_left"] == 0 and done["throttles"] == []
