"""A run killed mid-way (SIGKILL of the process running it) and started again.

The killed run still holds the cluster lock and its throttle is still set: a new run is
refused while the old one counts as running, and after the operator marks the old run
failed, a new run of the same plan finishes the job without moving the partitions the
killed run had already finished, and puts every config back to its value before either run.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import airflow_env  # noqa: E402

airflow_env.configure_env()

from test_dag_reassign import FAST, in_flight, placement, plan_of, set_foreign_throttle, six_broker_snapshot  # noqa: E402

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

# Four single-step moves (one replica replaced each), one per batch.
PLAN = plan_of(("orders", 0, [4, 2, 3]), ("orders", 1, [5, 3, 4]), ("orders", 2, [6, 4, 5]),
               ("orders", 3, [1, 5, 6]))
CONF = {"plan": PLAN, "throttle_bytes_per_sec": 10_000_000, "max_partition_movements": 1, **FAST}

RUNNER = """
import json, sys
sys.path.insert(0, {tests!r})
import airflow_env
airflow_env.configure_env()
airflow_env.migrate_once()
dr = airflow_env.run_dag(json.loads(sys.argv[1]))
print("RUN_ID=" + dr.run_id, flush=True)
"""


@pytest.fixture(scope="module")
def airflow_db() -> Path:
    return airflow_env.migrate_once()


def _running_runs() -> list[str]:
    from sqlalchemy import select

    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        return list(session.scalars(select(DagRun.run_id).where(DagRun.dag_id == "kafka_reassign",
                                                                DagRun.state == "running")))


def _mark_failed(run_id: str) -> None:
    """What an operator does in the UI for a run whose worker is gone."""
    from sqlalchemy import select

    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState

    with create_session() as session:
        dr = session.scalars(select(DagRun).where(DagRun.run_id == run_id)).one()
        dr.state = DagRunState.FAILED


def test_killed_run_resumes_without_moving_finished_partitions(airflow_db, sim_cluster, monkeypatch, capfd):
    # 100 MB at 10 MB/s = 10 simulated s per move, 2 s of wall time at x5.
    cluster = sim_cluster(six_broker_snapshot(size=100_000_000), time_scale=5.0)
    for k, v in airflow_env.kafka_conn_env(cluster.bootstrap_servers).items():
        monkeypatch.setenv(k, v)
    set_foreign_throttle(cluster)
    before = airflow_env.throttle_configs(cluster)
    targets = {f"{e['topic']}-{e['partition']}": e["replicas"] for e in PLAN["partitions"]}
    running_before = set(_running_runs())

    proc = subprocess.Popen([sys.executable, "-c", RUNNER.format(tests=str(Path(__file__).parents[1])),
                             json.dumps(CONF)], env=dict(os.environ), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        finished: set[str] = set()
        while time.monotonic() < deadline:
            now = placement(cluster, PLAN)
            finished = {k for k in targets if now[k] == targets[k]}
            if finished and in_flight(cluster):
                break
            assert proc.poll() is None, "the run ended before it could be killed"
            time.sleep(0.02)
        else:
            pytest.fail("the first run never got to a second batch")
        os.killpg(proc.pid, signal.SIGKILL)  # the worker dies: no teardown, no cleanup
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    killed = sorted(set(_running_runs()) - running_before)
    assert len(killed) == 1
    assert airflow_env.throttle_configs(cluster) != before  # its throttle is still set
    time.sleep(0.5)
    capfd.readouterr()

    # While the killed run still counts as running, a new run is refused before any write.
    writes = cluster.write_count
    dr = airflow_env.run_dag(CONF)
    out = capfd.readouterr().out
    assert dr.state == "failed"
    assert airflow_env.task_states(dr)["prepare"] == "failed"
    assert "is being reassigned by run" in out and killed[0] in out
    assert cluster.write_count == writes

    # The operator marks the dead run failed; the same plan is triggered again.
    _mark_failed(killed[0])
    with airflow_env.IsrSampler(cluster, {"orders": 2}) as sampler:
        dr = airflow_env.run_dag(CONF)
    states = airflow_env.task_states(dr)
    assert dr.state == "success", states
    assert placement(cluster, PLAN) == targets
    assert in_flight(cluster) == []
    # Partitions the killed run had finished were not moved again.
    assert not (sampler.moving_seen & finished), (finished, sampler.moving_seen)
    assert sampler.violations == []
    # The new run adopted the killed run's throttle record: every config is as before both runs.
    assert airflow_env.throttle_configs(cluster) == before
    old = airflow_env.read_record(killed[0])
    assert old is not None and old.restored
    assert airflow_env.read_record(dr.run_id).restored
