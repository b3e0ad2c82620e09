"""The kafka_reassign DAG with a maintenance window that opens during the run: the execute task
waits deferred, submits nothing before the opening, then finishes the plan."""
from __future__ import annotations

import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import airflow_env  # noqa: E402

airflow_env.configure_env()

from test_dag_reassign import FAST, airflow_db, in_flight, kafka_conn, placement, plan_of, six_broker_snapshot  # noqa: E402,F401

pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.timeout(600)]

PLAN = plan_of(("orders", 0, [4, 5, 6]), ("orders", 1, [5, 3, 6]))


def _next_minute(margin: float = 15.0) -> float:
    """The next whole UTC minute at least ``margin`` seconds away."""
    now = time.time()
    opening = (int(now) // 60 + 1) * 60
    return float(opening if opening - now >= margin else opening + 60)


def test_execute_waits_deferred_for_the_window_and_submits_nothing_before(airflow_db, sim_cluster, kafka_conn,
                                                                          capfd):
    cluster = sim_cluster(six_broker_snapshot(size=20_000_000), time_scale=10.0)
    kafka_conn(cluster)
    opens = _next_minute()
    start, end = (datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M") for t in (opens, opens + 300))
    moving_at: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            if in_flight(cluster):
                moving_at.append(time.time())
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        dr = airflow_env.run_dag({"plan": PLAN, "throttle_bytes_per_sec": 10_000_000, **FAST,
                                  "maintenance_windows": [f"daily {start}-{end} UTC"]})
    finally:
        done.set()
        sampler.join(5)
    states = airflow_env.task_states(dr)
    out = capfd.readouterr().out
    assert dr.state == "success", states
    assert moving_at and min(moving_at) >= opens - 0.5, (opens, moving_at[:3])
    assert "waiting for the window opening at" in out
    assert placement(cluster, PLAN) == {f"{e['topic']}-{e['partition']}": e["replicas"] for e in PLAN["partitions"]}
