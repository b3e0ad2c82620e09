"""Failures injected at each task of kafka_reassign (real Airflow + simulator over TCP).

Whatever fails, the run must fail with a message saying what happened, every config must be
back to exactly what it was before the run (including an operator's own throttle), and with
cancel_on_failure nothing of ours may be left in flight.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import airflow_env  # noqa: E402

airflow_env.configure_env()
os.environ.setdefault("AIRFLOW__KAFKA_REASSIGN__ADMIN_RETRY_ATTEMPTS", "2")
os.environ.setdefault("AIRFLOW__KAFKA_REASSIGN__ADMIN_RETRY_MAX_SECONDS", "3")
os.environ.setdefault("AIRFLOW__KAFKA_REASSIGN__ADMIN_BOOTSTRAP_TIMEOUT_MS", "2000")

from test_dag_reassign import (FAST, HAPPY_PLAN, airflow_db, in_flight, kafka_conn,  # noqa: E402,F401
                               placement, plan_of, set_foreign_throttle, six_broker_snapshot)

pytestmark = [pytest.mark.airflow]
DAG_ID = "kafka_reassign"


def all_brokers(cluster: Any) -> list[int]:
    return [b["id"] for b in cluster.snapshot()["brokers"]]


def test_kafka_unreachable_while_setting_throttle(airflow_db, sim_cluster, kafka_conn, capfd):
    cluster = sim_cluster(six_broker_snapshot(), time_scale=10.0)
    kafka_conn(cluster)
    set_foreign_throttle(cluster)
    before = airflow_env.throttle_configs(cluster)
    writes_before = cluster.write_count

    def stop_all() -> None:
        for b in all_brokers(cluster):
            cluster.stop_broker(b)

    def start_all() -> None:
        for b in all_brokers(cluster):
            cluster.start_broker(b)

    steps = [(lambda: airflow_env.ti_state(DAG_ID, "prepare") == "success", stop_all),
             (lambda: airflow_env.ti_state(DAG_ID, "throttle_set") in ("failed", "up_for_retry"), start_all)]
    with airflow_env.Watcher(steps) as w:
        dr = airflow_env.run_dag({"plan": HAPPY_PLAN, "throttle_bytes_per_sec": 10_000_000, **FAST})
    assert w.error is None and w.done == [0, 1]
    states = airflow_env.task_states(dr)
    out = capfd.readouterr().out
    assert dr.state == "failed", states
    assert states["throttle_set"] == "failed"
    assert states["throttle_remove"] == "success"
    assert states.get("execute") in (None, "upstream_failed")
    assert "failed" in out and ("NoBrokersAvailable" in out or "KafkaConnectionError" in out
                                or "still failing" in out or "Unable to bootstrap" in out)
    assert airflow_env.throttle_configs(cluster) == before
    assert cluster.writes.get("AlterPartitionReassignments", 0) == 0
    assert in_flight(cluster) == []
    # Kafka was unreachable for the whole task: nothing reached the cluster.
    assert cluster.write_count == writes_before


def test_broker_stopped_mid_move_waits_then_fails_cancels_and_restores(airflow_db, sim_cluster, kafka_conn, capfd):
    # 200 MB at 10 MB/s = 20 simulated s per move, 4 s of wall time at x5.
    cluster = sim_cluster(six_broker_snapshot(size=200_000_000), time_scale=5.0)
    kafka_conn(cluster)
    set_foreign_throttle(cluster)
    before = airflow_env.throttle_configs(cluster)
    original = placement(cluster, HAPPY_PLAN)
    stopped: list[int] = []
    hit: list[str] = []

    def moving_to() -> dict[str, list[int]]:
        return {name: cluster.partition_state(name.rsplit("-", 1)[0], int(name.rsplit("-", 1)[1]))["adding"]
                for name in in_flight(cluster)}

    def stop_one() -> None:
        name, adding = next((n, a) for n, a in moving_to().items() if a)
        stopped.append(adding[0])
        hit.extend(n for n, a in moving_to().items() if adding[0] in a)
        cluster.stop_broker(adding[0])

    # The broker stays down longer than the stall window (shorter outages are waited out), then
    # comes back once execute has failed (a crashed broker restarted) so the teardown can
    # restore its configs.
    steps = [(lambda: any(moving_to().values()), stop_one),
             (lambda: airflow_env.ti_state(DAG_ID, "execute") == "failed",
              lambda: cluster.start_broker(stopped[0]))]
    with airflow_env.Watcher(steps, timeout=90) as w:
        dr = airflow_env.run_dag({"plan": HAPPY_PLAN, "throttle_bytes_per_sec": 10_000_000,
                                  "max_partition_movements": 2, "cancel_on_failure": True,
                                  **FAST, "stall_window_minutes": 0.1})
    assert w.error is None, w.error
    states = airflow_env.task_states(dr)
    out = capfd.readouterr().out
    assert dr.state == "failed", states
    assert states["execute"] == "failed"
    assert states["cancel_on_failure"] == "success"
    assert states["throttle_remove"] == "success"
    assert f"broker {stopped[0]} has been offline" in out and "start the broker again" in out
    assert "Cancelled" in out
    assert in_flight(cluster) == []
    # The moves that needed the stopped broker went back to where they were.
    now = placement(cluster, HAPPY_PLAN)
    assert hit and all(now[k] == original[k] for k in hit), (hit, original, now)
    assert airflow_env.throttle_configs(cluster) == before


def test_move_timeout_fails_cancels_and_restores(airflow_db, sim_cluster, kafka_conn, capfd):
    # 200 MB at 1 MB/s: 200 simulated s; a 3 s (wall) timeout at x2 fires long before.
    cluster = sim_cluster(six_broker_snapshot(size=200_000_000), time_scale=2.0)
    kafka_conn(cluster)
    before = airflow_env.throttle_configs(cluster)
    plan = plan_of(("orders", 0, [4, 2, 3]))
    dr = airflow_env.run_dag({"plan": plan, "throttle_bytes_per_sec": 1_000_000, **FAST,
                              "batch_timeout_minutes": 0.05, "stall_window_minutes": 5})
    states = airflow_env.task_states(dr)
    out = capfd.readouterr().out
    assert dr.state == "failed", states
    assert states["execute"] == "failed"
    assert "timed out" in out and "batch_timeout_minutes" in out and "orders-0" in out
    assert states["cancel_on_failure"] == "success"
    assert in_flight(cluster) == []
    assert cluster.partition_state("orders", 0)["replicas"] == [1, 2, 3]
    assert airflow_env.throttle_configs(cluster) == before


def test_stall_below_produce_rate_says_what_to_change(airflow_db, sim_cluster, kafka_conn, capfd):
    # The partition grows at 400 KB/s but the throttle allows 100 KB/s: the new replica never
    # catches up (KIP-73's warning). The stall window (3 s wall) ends the run.
    cluster = sim_cluster(six_broker_snapshot(size=5_000_000, bytes_in=400_000), time_scale=5.0)
    kafka_conn(cluster)
    before = airflow_env.throttle_configs(cluster)
    plan = plan_of(("orders", 0, [4, 2, 3]))
    dr = airflow_env.run_dag({"plan": plan, "throttle_bytes_per_sec": 100_000, **FAST,
                              "stall_window_minutes": 0.05, "cancel_on_failure": False,
                              # the pre-flight would refuse it: allowed to exercise the runtime check
                              "allow_stalling_moves": True})
    states = airflow_env.task_states(dr)
    out = capfd.readouterr().out
    assert dr.state == "failed", states
    assert states["execute"] == "failed"
    assert "orders-0 stalled" in out and "on broker 4" in out and "throttle 100.0 KB/s" in out
    assert "produce rate" in out and "throttle_bytes_per_sec" in out
    # cancel_on_failure off: the move keeps going, still throttled, and the teardown said so.
    assert states["cancel_on_failure"] == "skipped"
    assert "the throttle stays until they finish" in out
    assert in_flight(cluster) == ["orders-0"]
    assert airflow_env.throttle_configs(cluster) != before, "the throttle stays with the moves"
    # Once the move is over (here an operator cancels it), the reconciler restores the throttle.
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.throttle.reconciler import reconcile
    from kafka_reassign_airflow.record_store import VariableRecordStore

    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers.split(",")) as admin:
        kept = reconcile(admin, VariableRecordStore())
        assert any(r == dr.run_id and "moves still in flight" in why for r, why in kept.left_alone), kept.summary()
        admin.alter_partition_reassignments({("orders", 0): None})
        report = reconcile(admin, VariableRecordStore())
    assert [r.run_id for r in report.restored] == [dr.run_id], report.summary()
    assert airflow_env.throttle_configs(cluster) == before
