"""Fault-matrix rows where Airflow's own behaviour matters: the teardown and report tasks.

* A broker dies mid-run and is still down at the teardown: the teardown restores everything
  else and fails naming the broker and how to finish; the report does not crash on it; the
  reconciler DAG finishes the job once the broker is back.
* A no-op plan (everything already in place): the run succeeds saying "nothing to move", and
  writes nothing to Kafka.
* Someone else appends to our replica list and lowers one of our rates mid-run: the run
  succeeds (the report counts only our part), and their entry and rate are still there after.
* Someone deletes our rate mid-run: the trigger notices (read-only), the execute task puts it
  back (recorded) with a warning, and the run goes on throttled.
"""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Callable

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import airflow_env  # noqa: E402

airflow_env.configure_env()

from test_dag_reassign import FAST, airflow_db, in_flight, kafka_conn, plan_of, six_broker_snapshot  # noqa: E402,F401

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def run_with_fault(fault: Callable[[], None], capfd: pytest.CaptureFixture[str],
                   throttle: int = 10_000_000) -> tuple[object, str]:
    """Run the one-move plan orders-0 [1,2,3] -> [4,2,3] while ``fault`` runs in a thread; (run, log)."""
    injector = threading.Thread(target=fault, daemon=True)
    injector.start()
    dr = airflow_env.run_dag({"plan": plan_of(("orders", 0, [4, 2, 3])), "throttle_bytes_per_sec": throttle,
                              **FAST})
    injector.join(10)
    return dr, capfd.readouterr().out


def wait_moving(cluster: object, timeout: float = 120.0) -> None:
    """Block until the run's move is in flight (the moment the fault is injected)."""
    deadline = time.monotonic() + timeout
    while not in_flight(cluster) and time.monotonic() < deadline:
        time.sleep(0.05)


def test_broker_dead_at_teardown_is_left_pending_and_finished_by_the_reconciler(
        airflow_db, sim_cluster, kafka_conn, capfd):
    cluster = sim_cluster(six_broker_snapshot(size=20_000_000), time_scale=1.0)
    kafka_conn(cluster)
    before = airflow_env.throttle_configs(cluster)

    def stop_broker_1_mid_move() -> None:
        wait_moving(cluster)
        cluster.stop_broker(1)  # a throttled broker the move no longer needs (it leaves orders-0)

    dr, out = run_with_fault(stop_broker_1_mid_move, capfd)
    states = airflow_env.task_states(dr)
    assert cluster.partition_state("orders", 0)["replicas"] == [4, 2, 3], "the move itself completed"
    assert dr.state == "failed", states
    assert states["throttle_remove"] == "failed" and states["report"] == "failed", states
    assert "Left: broker 1: unreachable" in out and "kafka_throttle_reconciler" in out
    assert "UNKNOWN (unreachable)" in out, "the report names the unreachable broker instead of crashing"
    # Everything but broker 1 is back as before.
    now = airflow_env.throttle_configs(cluster)
    assert {k: v for k, v in now.items() if k != "broker 1"} == {k: v for k, v in before.items() if k != "broker 1"}

    cluster.start_broker(1)
    rec = airflow_env.run_dag({}, dag_id="kafka_throttle_reconciler")
    assert rec.state == "success", airflow_env.task_states(rec)
    assert airflow_env.throttle_configs(cluster) == before
    assert airflow_env.read_record(dr.run_id).restored


def test_noop_plan_succeeds_without_writing(airflow_db, sim_cluster, kafka_conn, capfd):
    cluster = sim_cluster(six_broker_snapshot(), time_scale=1.0)
    kafka_conn(cluster)
    writes = cluster.write_count
    dr = airflow_env.run_dag({"plan": plan_of(("orders", 0, [1, 2, 3]), ("orders", 1, [2, 3, 4])),
                              "throttle_bytes_per_sec": 10_000_000, **FAST})
    out = capfd.readouterr().out
    assert dr.state == "success", (airflow_env.task_states(dr), [l for l in out.splitlines() if "ERROR" in l][:5])
    assert "nothing to move" in out
    assert cluster.write_count == writes, "a no-op plan writes nothing to Kafka"


def test_others_changes_mid_run_are_kept_and_do_not_fail_the_report(airflow_db, sim_cluster, kafka_conn, capfd):
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.throttle.specs import FOLLOWER_REPLICAS, LEADER_RATE, ConfigChange

    cluster = sim_cluster(six_broker_snapshot(size=20_000_000), time_scale=1.0)
    kafka_conn(cluster)
    before = airflow_env.throttle_configs(cluster)

    def others_edit_mid_move() -> None:
        wait_moving(cluster)
        ours = cluster.topic_configs("orders").get(FOLLOWER_REPLICAS, "")
        with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.alter_configs([ConfigChange("topic", "orders", FOLLOWER_REPLICAS, ours, ours + ",5:6"),
                                 ConfigChange("broker", "3", LEADER_RATE, None, "1000000")])

    dr, out = run_with_fault(others_edit_mid_move, capfd)
    assert dr.state == "success", airflow_env.task_states(dr)
    assert "kept" in out, "the teardown says it kept their values"
    after = airflow_env.throttle_configs(cluster)
    assert after["topic orders"].get(FOLLOWER_REPLICAS) == "5:6", "only our entries were removed"
    assert after["broker 3"].get(LEADER_RATE) == "1000000", "the rate they set during the run is theirs"
    assert {k: v for k, v in after.items() if k not in ("topic orders", "broker 3")} == \
        {k: v for k, v in before.items() if k not in ("topic orders", "broker 3")}


def test_throttle_deleted_mid_run_is_put_back_by_the_execute_task(airflow_db, sim_cluster, kafka_conn, capfd):
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.throttle.specs import LEADER_RATE, ConfigChange

    # 160 MB at 2 MB/s: due in over a minute, so the execute task defers and its trigger watches
    # (a move due within 30 s keeps the task in its worker, whose own guard would see it first).
    # The simulated clock runs 4x the wall clock: the move still lasts 20 s of wall time, room for
    # the 5 s wait, the delete and the trigger's next poll on a loaded machine.
    cluster = sim_cluster(six_broker_snapshot(size=160_000_000), time_scale=4.0)
    kafka_conn(cluster)
    before = airflow_env.throttle_configs(cluster)
    seen: dict[str, object] = {}

    def delete_mid_move() -> None:
        wait_moving(cluster)
        # Once the task has deferred (it does right after its first tick and its own guard), so
        # that the trigger is the one to see the change.
        time.sleep(5)
        with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.alter_configs([ConfigChange("broker", "1", LEADER_RATE, "2000000", None)])
        deadline = time.monotonic() + 60
        while LEADER_RATE not in cluster.broker_configs(1) and time.monotonic() < deadline:
            time.sleep(0.05)
        seen["back"] = cluster.broker_configs(1).get(LEADER_RATE)
        seen["moving"] = bool(in_flight(cluster))

    dr, out = run_with_fault(delete_mid_move, capfd, throttle=2_000_000)
    assert dr.state == "success", airflow_env.task_states(dr)
    assert "throttle changed by someone else: broker 1" in out, "the trigger saw it"
    assert "was changed by someone else" in out and "writing '2000000' again" in out
    assert seen == {"back": "2000000", "moving": True}, "put back while the move was still going"
    record = airflow_env.read_record(dr.run_id)
    assert any(c.name == "1" and c.key == LEADER_RATE and c.prior is None and c.value == "2000000"
               for c in record.changes[1:]), "the re-apply was recorded"
    assert airflow_env.throttle_configs(cluster) == before
