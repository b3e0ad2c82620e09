"""The README's fault matrix, one test per row, against the simulator and its fault commands.

Each row runs a scenario of :mod:`benchmarks.faults` (the same ones ``make bench`` scores) on
a fresh simulated cluster where someone else already set throttles, then checks what the run
did, what it left, and that after the reconciler nothing of ours is left and nothing of
theirs was changed. (Rows where Airflow's own behaviour matters - teardown, trigger rules,
a killed worker process - also have DAG-level tests: test_dag_failures, test_dag_resume,
test_reconciler_dag, test_dag_safety.)
"""
from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.faults import Outcome, run_scenario
from kafka_reassign.throttle.specs import FOLLOWER_RATE, LEADER_RATE

pytestmark = [pytest.mark.slow]


def clean(out: Outcome) -> Outcome:
    """Nothing of ours left after the reconciler, nothing of theirs changed."""
    assert out.leftovers == [], out.leftovers
    assert out.foreign == [], out.foreign
    return out


def test_broker_dead_at_teardown(tmp_path: Path) -> None:
    d = clean(run_scenario("broker dead at teardown", tmp_path)).details
    res = d["restore"]
    assert set(res.pending) == {"broker 1"}, res.pending
    # The live brokers and the topic were restored; only broker 1's own values are left.
    assert set(d["left_while_down"]) == {("broker", "1", LEADER_RATE), ("broker", "1", FOLLOWER_RATE)}
    msg = d["message"]
    assert "broker 1" in msg and "kafka-reassign restore --run-id dead-b1" in msg
    assert "kafka_throttle_reconciler" in msg
    # The reconciler while broker 1 is down: retries, keeps it pending, never calls ours foreign.
    down = d["reconcile_while_down"]
    assert down.restored[0].pending and not any(s.value == "50000000" for s in down.foreign)
    assert not d["record_after_first_reconcile"].restored
    up = d["reconcile_after_restart"]
    assert [r.run_id for r in up.restored] == ["dead-b1"] and not up.restored[0].pending


def test_broker_restart_mid_move(tmp_path: Path) -> None:
    d = clean(run_scenario("broker restart mid-move", tmp_path)).details
    assert d["result"].error is None and d["result"].steps_done == len(d["result"].prepared.steps)
    assert d["restarted_at"]
    # The same admin client reads the restarted broker's log dirs at once (no cached broker list).
    assert d["log_dirs_rows_after_restart"] > 0


def test_throttle_deleted_or_changed_mid_run(tmp_path: Path) -> None:
    out = clean(run_scenario("throttle deleted or changed mid-run", tmp_path))
    d = out.details
    assert d["result"].throttle_reapplied == 2
    assert any("re-applied 2 time(s)" in e for e in d["events"]), d["events"]
    # Each re-apply was recorded with the value found (theirs) as its prior.
    again = [c for c in d["record"].changes if c.prior in (None, "900000000") and c.value == "5000000"
             and c.name in ("1", "4") and c.key in (LEADER_RATE, FOLLOWER_RATE)]
    assert {(c.name, c.key, c.prior) for c in again} >= {("4", FOLLOWER_RATE, None), ("1", LEADER_RATE, "900000000")}
    # After the run the raised value is theirs again, the deleted one stays deleted.
    assert d["end"][("broker", "1", LEADER_RATE)] == "900000000"
    assert ("broker", "4", FOLLOWER_RATE) not in d["end"]


def test_others_throttle_changes_mid_run(tmp_path: Path) -> None:
    d = clean(run_scenario("others' throttle changes mid-run", tmp_path)).details
    assert d["result"].error is None and d["result"].restore.done
    assert d["end"][("broker", "4", LEADER_RATE)] == "1000000", "a rate they lowered is theirs"
    assert d["end"][("broker", "5", FOLLOWER_RATE)] == "3000000"
    assert any("kept" in w for w in d["result"].restore.warnings)


def test_others_in_flight_reassignment_is_refused_and_untouched(tmp_path: Path) -> None:
    d = clean(run_scenario("others' in-flight reassignment", tmp_path)).details
    msg = str(d["error"])
    assert "orders-2 is already being reassigned to [6,4,5] by someone else" in msg
    assert d["writes_by_us"] == 0
    assert tuple(d["their_move"][("orders", 2)].target) == (6, 4, 5), "never cancelled"
    assert d["their_result"] == [6, 4, 5]


def test_kafka_unreachable_at_teardown_short(tmp_path: Path) -> None:
    d = clean(run_scenario("Kafka unreachable at teardown (short)", tmp_path)).details
    assert d["restore"].done and d["restore"].changes


def test_kafka_unreachable_at_teardown_long(tmp_path: Path) -> None:
    d = clean(run_scenario("Kafka unreachable at teardown (long)", tmp_path)).details
    assert {"broker 1", "broker 2", "broker 3", "broker 4"} <= set(d["restore"].pending)
    # The moves finished before the outage: their replica-list entries were taken out while
    # Kafka answered, so the record no longer names the topic and nothing of it is pending.
    assert "topic orders" not in d["restore"].pending
    assert not any(c.resource_type == "topic" for c in d["record"].changes)
    assert "NOT fully restored" in d["message"] and "kafka_throttle_reconciler" in d["message"]
    assert d["record"].pending and not d["record"].restored
    assert [r.run_id for r in d["reconcile"].restored] == ["outage"] and not d["reconcile"].restored[0].pending


def test_worker_killed_mid_run(tmp_path: Path) -> None:
    d = clean(run_scenario("worker killed mid-run", tmp_path)).details
    assert d["throttle_after_kill"], "the killed run's throttle is still set"
    kept = d["reconcile_in_flight"]
    assert any(r == "killed" and "moves still in flight" in why for r, why in kept.left_alone)
    assert {s.owner for s in kept.in_use} == {"killed"}, "its own leftovers are not foreign"
    resumed = d["resumed"]
    assert resumed.error is None and resumed.restore.done


def test_two_concurrent_runs(tmp_path: Path) -> None:
    d = clean(run_scenario("two concurrent runs", tmp_path)).details
    assert "orders-0 is being reassigned" in str(d["error"]) and d["writes_by_second"] == 0
    assert d["first"].error is None and d["first"].restore.done


def test_noop_plan_and_rerun_of_finished_plan(tmp_path: Path) -> None:
    d = clean(run_scenario("no-op plan", tmp_path)).details
    assert d["noop_writes"] == 0 and d["rerun_writes"] == 0
    assert d["noop"].error is None and not d["noop"].prepared.steps
    assert any("nothing to move" in e for e in d["events"])


def test_stale_plan(tmp_path: Path) -> None:
    d = clean(run_scenario("stale plan", tmp_path)).details
    assert "stale plan" in str(d["error"]) and "orders-1 [2,3,4] -> now [2,3,6]" in str(d["error"])
    assert d["writes_by_us"] == 0


def test_cancel_on_failure_on(tmp_path: Path) -> None:
    d = clean(run_scenario("cancel_on_failure on", tmp_path)).details
    assert "timed out" in str(d["error"]) and "after its submission" in str(d["error"])
    assert d["in_flight_after"] == {} and d["throttle_after"] == {}
    assert d["replicas_after"] == d["replicas_before"], "the original order is back"
    assert d["record"].restored


def test_cancel_on_failure_off_keeps_the_throttle_while_moves_go_on(tmp_path: Path) -> None:
    d = clean(run_scenario("cancel_on_failure off", tmp_path)).details
    assert list(d["in_flight_after"]) == [("orders", 0)]
    assert ("broker", "4", FOLLOWER_RATE) in d["throttle_after"], "throttled while the move goes on"
    assert not d["record"].restored and "moves in flight" in d["record"].pending
    assert any("moves still in flight" in why for _, why in d["reconcile_in_flight"].left_alone)
