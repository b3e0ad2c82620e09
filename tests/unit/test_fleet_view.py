"""The fleet page's judgement of a cluster from its stored state: the status word and the row."""
from __future__ import annotations

from typing import Any

from kafka_reassign_airflow.fleet_view import (BALANCED, MOVING, THROTTLE_LEFT, UNBALANCED, UNKNOWN, ClusterFacts,
                                               current_balance, fleet_row, record_facts, runs_by_conn, status_word)


def facts(**kw: object) -> ClusterFacts:
    return ClusterFacts(conn_id="kafka_a", rebalance_dag_id="kafka_rebalance__kafka_a", **kw)  # type: ignore[arg-type]


def test_nothing_stored_is_unknown_not_balanced() -> None:
    assert status_word(facts()) == UNKNOWN
    assert fleet_row(facts())["balance"] is None


def test_balance_against_the_clusters_threshold() -> None:
    over = facts(summary={"balance_before": 1.3, "balance_after": 1.02}, balance_threshold=1.2,
                 summary_run={"run_id": "r1", "state": "failed"})
    assert current_balance(over) == 1.3 and status_word(over) == UNBALANCED
    # The rebalance that planned it succeeded: it moved, the cluster is now at the plan's "after".
    moved = facts(summary={"balance_before": 1.3, "balance_after": 1.02}, balance_threshold=1.2,
                  summary_run={"run_id": "r1", "state": "success"})
    assert current_balance(moved) == 1.02 and status_word(moved) == BALANCED
    # Under the threshold the run stops before moving: its "after" never happened.
    within = facts(summary={"balance_before": 1.15, "balance_after": 1.01}, balance_threshold=1.2,
                   summary_run={"run_id": "r2", "state": "success"})
    assert current_balance(within) == 1.15 and status_word(within) == BALANCED


def test_a_run_in_flight_wins_and_shows_percent_eta_and_its_page() -> None:
    f = facts(summary={"balance_before": 1.5}, in_flight={"dag_id": "kafka_reassign", "run_id": "manual__x+00:00",
                                                          "state": "running"},
              progress={"bytes_total": 400, "bytes_moved": 100, "eta_seconds": 30.0, "outcome": "in_progress"},
              throttles=[record_facts({"run_id": "manual__x+00:00", "changes": [{}, {}]}, "kafka_reassign", True)])
    row = fleet_row(f)
    assert row["status"] == MOVING
    assert row["in_flight"]["percent"] == 25.0 and row["in_flight"]["eta_seconds"] == 30.0
    assert row["in_flight"]["link"] == "./?dag_id=kafka_reassign&run_id=manual__x%2B00%3A00"
    assert row["throttles"][0]["settings"] == 2 and row["throttles"][0]["run_active"] is True


def test_throttle_left_by_an_ended_run_or_found_by_the_reconciler() -> None:
    ended = facts(summary={"balance_before": 1.0},
                  throttles=[record_facts({"run_id": "dead", "changes": [{}]}, "kafka_reassign", False)])
    assert status_word(ended) == THROTTLE_LEFT
    foreign = facts(reconciler={"run_id": "sweep", "restored": [], "foreign": [{"key": "k"}]})
    assert status_word(foreign) == THROTTLE_LEFT
    assert fleet_row(foreign)["reconciler"]["text"] == "nothing to restore; 1 foreign throttle setting(s) left"
    unreachable = facts(reconciler={"run_id": "sweep", "state": "failed", "missing": True})
    assert status_word(unreachable) == UNKNOWN
    assert fleet_row(unreachable)["reconciler"]["reconciled"] is False


def test_runs_are_tied_to_their_connection() -> None:
    runs: list[dict[str, Any]] = [{"dag_id": "kafka_reassign", "run_id": "a", "conn_id": "kafka_b"},
                                  {"dag_id": "kafka_rebalance__kafka_c", "run_id": "b", "conn_id": None},
                                  {"dag_id": "kafka_reassign", "run_id": "c", "conn_id": None}]
    grouped = runs_by_conn(runs, "kafka_default")
    assert {k: [r["run_id"] for r in v] for k, v in grouped.items()} == {
        "kafka_b": ["a"], "kafka_c": ["b"], "kafka_default": ["c"]}
