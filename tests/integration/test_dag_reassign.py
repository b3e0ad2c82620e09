"""The kafka_reassign DAG end to end: real Airflow (dag.test, SQLite) against the simulator over TCP.

Each test starts a time-scaled simulated cluster, points the ``kafka_default`` connection at it
(AIRFLOW_CONN_KAFKA_DEFAULT), runs the DAG in-process and checks the cluster afterwards:
placement, every dynamic config, what is still in flight and the simulator's write counter.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import airflow_env  # noqa: E402

airflow_env.configure_env()
# Kafka unreachable should fail a task in seconds here, not after production's minute of retries.
os.environ.setdefault("AIRFLOW__KAFKA_REASSIGN__ADMIN_RETRY_ATTEMPTS", "2")
os.environ.setdefault("AIRFLOW__KAFKA_REASSIGN__ADMIN_RETRY_MAX_SECONDS", "3")
os.environ.setdefault("AIRFLOW__KAFKA_REASSIGN__ADMIN_BOOTSTRAP_TIMEOUT_MS", "2000")

from sim_snapshots import make_snapshot  # noqa: E402

pytestmark = [pytest.mark.airflow]

FAST = {"poll_interval_seconds": 0.2, "batch_timeout_minutes": 2, "stall_window_minutes": 1}


@pytest.fixture(scope="module")
def airflow_db() -> Path:
    return airflow_env.migrate_once()


@pytest.fixture
def kafka_conn(monkeypatch: pytest.MonkeyPatch):
    """Point kafka_default at a cluster: ``kafka_conn(cluster)``."""
    def point(cluster: Any) -> None:
        for k, v in airflow_env.kafka_conn_env(cluster.bootstrap_servers).items():
            monkeypatch.setenv(k, v)
    return point


def six_broker_snapshot(size: int = 20_000_000, bytes_in: float = 0) -> dict:
    return make_snapshot(brokers=6, racks=2, topics={
        "orders": {"partitions": 6, "rf": 3, "size_bytes": size, "bytes_in_per_sec": bytes_in,
                   "configs": {"min.insync.replicas": "2"}},
        "clicks": {"partitions": 2, "rf": 2, "size_bytes": size // 2, "configs": {"min.insync.replicas": "1"}},
    })


def plan_of(*entries: tuple[str, int, list[int]]) -> dict:
    return {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r} for t, p, r in entries]}


# orders-p starts on [p+1, p+2, p+3] (mod 6); these need 1-2 KIP-435 steps each.
HAPPY_PLAN = plan_of(("orders", 0, [4, 5, 6]), ("orders", 1, [5, 3, 6]), ("orders", 2, [6, 1, 4]),
                     ("orders", 3, [1, 5, 6]), ("clicks", 1, [5, 6]))


def set_foreign_throttle(cluster: Any) -> None:
    """An operator's own throttle, set before the run by another tool (kafka-python, over TCP)."""
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.throttle.specs import ConfigChange

    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.alter_configs([
            ConfigChange("broker", "1", "leader.replication.throttled.rate", None, "9000000"),
            ConfigChange("broker", "4", "follower.replication.throttled.rate", None, "7000000"),
            ConfigChange("topic", "orders", "leader.replication.throttled.replicas", None, "5:6"),
        ])


def placement(cluster: Any, plan: dict) -> dict[str, list[int]]:
    return {f"{e['topic']}-{e['partition']}": cluster.partition_state(e["topic"], e["partition"])["replicas"]
            for e in plan["partitions"]}


def in_flight(cluster: Any) -> list[str]:
    snap = cluster.snapshot()
    return [f"{t['name']}-{p['partition']}" for t in snap["topics"] for p in t["partitions"]
            if cluster.partition_state(t["name"], p["partition"])["adding"]
            or cluster.partition_state(t["name"], p["partition"])["removing"]]


def test_happy_path_window_of_moves(airflow_db, sim_cluster, kafka_conn, capfd):
    # Partitions large enough that each move lasts several of the ISR sampler's wall-clock
    # samples even on a loaded machine (a 10 MB move lasted 0.1 s and could slip between two).
    cluster = sim_cluster(six_broker_snapshot(size=60_000_000), time_scale=10.0)
    kafka_conn(cluster)
    set_foreign_throttle(cluster)
    before = airflow_env.throttle_configs(cluster)
    with airflow_env.IsrSampler(cluster, {"orders": 2, "clicks": 1}) as sampler:
        dr = airflow_env.run_dag({"plan": HAPPY_PLAN, "throttle_bytes_per_sec": 10_000_000,
                                  "max_partition_movements": 2, "max_movements_per_broker": 2, **FAST})
    states = airflow_env.task_states(dr)
    out = capfd.readouterr().out
    assert dr.state == "success", states
    # One execute task instance for the whole plan (no task per batch), deferred between polls.
    assert states["execute"] == "success" and len(states) == 8, states
    assert states["cancel_on_failure"] == "skipped"
    # Final placement equals the plan, nothing in flight.
    assert placement(cluster, HAPPY_PLAN) == {f"{e['topic']}-{e['partition']}": e["replicas"]
                                              for e in HAPPY_PLAN["partitions"]}
    assert in_flight(cluster) == []
    # Every config (ours removed, the operator's own kept) is exactly as before the run.
    assert airflow_env.throttle_configs(cluster) == before
    assert before["broker 1"]["leader.replication.throttled.rate"] == "9000000"
    # Throttles were really set during the run, then removed.
    assert cluster.writes["IncrementalAlterConfigs"] >= 2
    # KIP-435: never fewer in-sync replicas than min.insync.replicas while moving.
    assert sampler.samples > 20
    assert sampler.violations == []
    assert {"orders-0", "orders-1", "orders-2", "orders-3", "clicks-1"} <= sampler.moving_seen
    # The execute task logged the steps in flight and the summary line; the report the before/after.
    assert "Partition" in out and "in_flight" in out and "steps done" in out
    assert "Placement (before -> after)" in out and "Execution: DONE" in out
    # The report decides "nothing to move" from the prepared steps: this plan had work to do.
    assert "nothing to move" not in out
    # The progress saved after every poll says done, as the UI reads it.
    from kafka_reassign_airflow.record_store import VariableExecutionStore

    saved = VariableExecutionStore().load(dr.run_id)
    assert saved["progress"]["outcome"] == "done" and saved["progress"]["steps_queued"] == 0
    assert saved["state"]["counts"]["d"] == saved["progress"]["steps_total"] and saved["state"]["pages"] == {}
    # The durable record says restored.
    rec = airflow_env.read_record(dr.run_id)
    assert rec is not None and rec.restored and rec.changes


def test_rehearse_option_makes_the_rehearsal_the_estimate(airflow_db, sim_cluster, kafka_conn, capfd):
    cluster = sim_cluster(six_broker_snapshot(), time_scale=10.0)
    kafka_conn(cluster)
    dr = airflow_env.run_dag({"plan": HAPPY_PLAN, "dry_run": True, "rehearse": True,
                              "throttle_bytes_per_sec": 10_000_000, "produce_sample_seconds": 0.2, **FAST})
    out = capfd.readouterr().out
    assert dr.state == "success", airflow_env.task_states(dr)
    assert "predicted moving time" in out and "rehearsal on a simulated copy of the cluster" in out
    prepared = airflow_env.xcom(dr, "prepare", key="prepared")
    assert prepared["estimate"]["source"] == "rehearsal" and prepared["rehearsal"]["outcome"] == "done"
    assert cluster.write_count == 0


def test_dry_run_writes_nothing(airflow_db, sim_cluster, kafka_conn, capfd):
    cluster = sim_cluster(six_broker_snapshot(), time_scale=10.0)
    kafka_conn(cluster)
    dr = airflow_env.run_dag({"plan": HAPPY_PLAN, "dry_run": True, "throttle_bytes_per_sec": 10_000_000,
                              "max_partition_movements": 2, **FAST})
    out = capfd.readouterr().out
    states = airflow_env.task_states(dr)
    assert dr.state == "success", states
    assert cluster.write_count == 0
    assert states["prepare"] == "success" and states["throttle_set"] == "skipped"
    # The report names the steps and the exact config changes with their prior values.
    assert "DRY RUN" in out and "KIP-435 step(s)" in out and "orders-0: [1,2,3] -> " in out
    assert "Config changes" in out
    assert "leader.replication.throttled.rate = '10000000' (was (not set))" in out
    assert airflow_env.read_record(dr.run_id) is None


def test_bad_plan_fails_before_any_write(airflow_db, sim_cluster, kafka_conn, capfd):
    cluster = sim_cluster(six_broker_snapshot(), time_scale=10.0)
    kafka_conn(cluster)
    bad = plan_of(("orders", 0, [4, 4, 6]), ("nope", 0, [1, 2, 3]), ("orders", 1, [1, 2, 99]))
    dr = airflow_env.run_dag({"plan": bad, **FAST})
    out = capfd.readouterr().out
    states = airflow_env.task_states(dr)
    assert dr.state == "failed"
    assert states["prepare"] == "failed"
    assert cluster.write_count == 0
    # Every problem is named with its entry.
    assert "plan rejected, nothing was written" in out
    assert "orders-0" in out and "nope" in out and "99" in out


@pytest.mark.spark
@pytest.mark.slow
def test_null_plan_with_goal_plans_on_spark(airflow_db, sim_cluster, kafka_conn, capfd, monkeypatch, tmp_path):
    """plan null + goal: snapshot, spark-submit of the planner (spark_default = local[2]), execute."""
    pytest.importorskip("pyspark")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__WORK_DIR", str(tmp_path / "work"))
    # Everything on brokers 1-3; brokers 4-6 empty: a rebalance has to move replicas there.
    snap = make_snapshot(brokers=6, racks=3, topics={
        "orders": {"partitions": 6, "rf": 3, "size_bytes": 5_000_000,
                   "replicas": [[1, 2, 3], [2, 3, 1], [3, 1, 2]] * 2, "configs": {"min.insync.replicas": "2"}}})
    cluster = sim_cluster(snap, time_scale=20.0)
    kafka_conn(cluster)
    before = airflow_env.throttle_configs(cluster)
    dr = airflow_env.run_dag({"plan": None, "goal": "add-brokers", "brokers": [4, 5, 6],
                              "throttle_bytes_per_sec": 20_000_000, **FAST})
    out = capfd.readouterr().out
    states = airflow_env.task_states(dr)
    assert dr.state == "success", states
    assert states["snapshot"] == "success" and states["plan"] == "success" and states["prepare"] == "success"
    # The plan came through spark-submit (the Spark provider's hook) and was written to the run's directory.
    planned = airflow_env.xcom(dr, "plan")
    assert planned["engine"] == "spark", planned
    plan_file = Path(planned["plan_file"])
    assert plan_file.is_file() and plan_file.parent.parent.parent == tmp_path / "work"
    summary = json.loads(Path(planned["summary_file"]).read_text())
    assert summary["replica_movements"] > 0
    assert "spark-submit" in out and "spark_job.py" in out, out[-3000:]
    assert '"replica_movements"' in out  # the job's summary line is in the task log
    planned_moves = {(e["topic"], e["partition"]): e["replicas"] for e in json.loads(plan_file.read_text())["partitions"]}
    after = cluster.snapshot()
    for t in after["topics"]:
        for p in t["partitions"]:
            if (t["name"], p["partition"]) in planned_moves:
                assert p["replicas"] == planned_moves[(t["name"], p["partition"])]
    on_new = sum(1 for t in after["topics"] for p in t["partitions"] for r in p["replicas"] if r in (4, 5, 6))
    assert on_new > 0
    assert in_flight(cluster) == []
    assert airflow_env.throttle_configs(cluster) == before


@pytest.mark.spark
@pytest.mark.slow
def test_missing_spark_connection_plans_with_local_master(airflow_db, sim_cluster, kafka_conn, capfd,
                                                          monkeypatch, tmp_path):
    """spark_conn_id naming no connection: the job runs in the worker on local[2] (dry run)."""
    pytest.importorskip("pyspark")
    monkeypatch.setenv("AIRFLOW__KAFKA_REASSIGN__WORK_DIR", str(tmp_path / "work"))
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_NOWHERE", raising=False)
    # brokers 4-6 empty: the rebalance has something to move
    cluster = sim_cluster(make_snapshot(brokers=6, racks=3, topics={
        "orders": {"partitions": 6, "rf": 3, "size_bytes": 5_000_000,
                   "replicas": [[1, 2, 3], [2, 3, 1], [3, 1, 2]] * 2}}), time_scale=10.0)
    kafka_conn(cluster)
    dr = airflow_env.run_dag({"plan": None, "goal": "rebalance", "spark_conn_id": "spark_nowhere",
                              "dry_run": True, **FAST})
    out = capfd.readouterr().out
    states = airflow_env.task_states(dr)
    assert dr.state == "success", f"{states}\n{out[-6000:]}"
    assert states["plan"] == "success" and states["prepare"] == "success", states
    assert "'spark_nowhere' not found: planning in this worker on local[2]" in out
    assert "--spark-master local[2]" in out, out[-3000:]
    assert Path(airflow_env.xcom(dr, "plan")["plan_file"]).is_file()
    assert cluster.write_count == 0
    assert "AIRFLOW_CONN_SPARK_NOWHERE" not in os.environ  # the fallback changes no environment


def test_plan_given_skips_planning(airflow_db, sim_cluster, kafka_conn):
    """A plan in the conf wins: snapshot and the Spark job are skipped, prepare still runs."""
    cluster = sim_cluster(six_broker_snapshot(), time_scale=10.0)
    kafka_conn(cluster)
    dr = airflow_env.run_dag({"plan": HAPPY_PLAN, "goal": "rebalance", "dry_run": True, **FAST})
    states = airflow_env.task_states(dr)
    assert dr.state == "success", states
    assert states["snapshot"] == "skipped" and states["plan"] == "skipped" and states["prepare"] == "success"
    assert cluster.write_count == 0


def test_null_plan_and_null_goal_fails_the_run(airflow_db, sim_cluster, kafka_conn, capfd):
    cluster = sim_cluster(six_broker_snapshot(), time_scale=10.0)
    kafka_conn(cluster)
    dr = airflow_env.run_dag({"plan": None, "goal": None, **FAST})
    out = capfd.readouterr().out
    states = airflow_env.task_states(dr)
    assert dr.state == "failed", states
    assert states["snapshot"] == "failed" and states["prepare"] in ("upstream_failed", "skipped"), states
    assert "plan is null and goal is null" in out
    assert cluster.write_count == 0
