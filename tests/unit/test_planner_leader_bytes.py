"""The leader-bytes-in goal (planning/spark/leaders.py) on the local engine: the produce rate each
broker leads is evened by choosing preferred leaders among a partition's replicas (no data moved),
without pushing leader counts out of their tolerance when leader-count ranks higher."""
from __future__ import annotations

from collections import Counter

import pytest

from kafka_reassign.planning.spark import plan
from test_planner_goals import _rate_balance, apply_plan, check_common
from test_planner_network import BASE_GOALS, hot_snapshot

TOL = 0.10
WITH_BYTES = BASE_GOALS + ("leader-bytes-in",)
BYTES_FIRST = ("rack-aware", "capacity", "disk", "network-in", "leader-bytes-in", "leader-count")


def _leader_count_balance(snap: dict) -> float:
    led = Counter(p["replicas"][0] for t in snap["topics"] for p in t["partitions"])
    brokers = [b["id"] for b in snap["brokers"]]
    return max(led[b] for b in brokers) / (sum(led.values()) / len(brokers))


def _replica_sets(snap: dict) -> dict[tuple[str, int], frozenset[int]]:
    return {(t["name"], p["partition"]): frozenset(p["replicas"]) for t in snap["topics"] for p in t["partitions"]}


@pytest.mark.parametrize("seed", [5, 7])
@pytest.mark.parametrize("goals", [WITH_BYTES, BYTES_FIRST])
def test_hot_topics_leader_bytes_in_end_within_tolerance_by_reorders_only(seed: int, goals: tuple) -> None:
    snap = hot_snapshot(seed)
    res = plan(snap, "rebalance", engine="local", balance_goals=goals)
    after = check_common(snap, res, goal="rebalance")  # rack rules, one replica per broker, capacity
    led_before, led_after = _rate_balance(snap)[1], _rate_balance(after)[1]
    assert led_before > 2.0
    assert led_after <= 1 + TOL + 1e-9
    assert res.summary["balance"]["leader_bytes_in"] == {"before": pytest.approx(led_before, abs=1e-3),
                                                         "after": pytest.approx(led_after, abs=1e-3)}
    assert _leader_count_balance(after) <= 1 + TOL + 1e-9
    # the goal moves no replica: the same plan without it holds the same replicas everywhere
    off = plan(snap, "rebalance", engine="local", balance_goals=BASE_GOALS)
    assert _replica_sets(apply_plan(snap, off.plan.to_json())) == _replica_sets(after)
    assert res.summary["data_to_move_bytes"] == off.summary["data_to_move_bytes"]
    assert _rate_balance(apply_plan(snap, off.plan.to_json()))[1] > 1 + TOL  # without it, it stays uneven


def test_alone_it_evens_leader_bytes_in_and_leaves_leader_counts_to_fall_where_they_may() -> None:
    snap = hot_snapshot(7)
    res = plan(snap, "rebalance", engine="local", balance_goals=["disk", "leader-bytes-in"])
    after = check_common(snap, res, goal="rebalance")
    assert _rate_balance(after)[1] <= 1 + TOL + 1e-9
    assert res.summary["balance_goals"] == ["disk", "leader-bytes-in"]


def test_add_brokers_hands_leadership_to_the_new_brokers_only() -> None:
    from test_planner_goals import with_new_brokers

    snap = with_new_brokers(hot_snapshot(5), [13, 14, 15])
    res = plan(snap, "add-brokers", engine="local", brokers=[13, 14, 15], balance_goals=WITH_BYTES)
    check_common(snap, res, goal="add-brokers", brokers=[13, 14, 15])
    before = {(t["name"], p["partition"]): p["replicas"][0] for t in snap["topics"] for p in t["partitions"]}
    for e in res.plan.to_json()["partitions"]:
        new_lead = e["replicas"][0]
        assert new_lead == before[(e["topic"], e["partition"])] or new_lead in (13, 14, 15)


def test_driver_goals_report_leader_bytes_in_before_and_after() -> None:
    snap = hot_snapshot(5)
    res = plan(snap, "replication-factor", engine="local", replication_factor=2,
               topics=[snap["topics"][0]["name"]])
    after = apply_plan(snap, res.plan.to_json())
    assert res.summary["leader_bytes_in_balance_before"] == pytest.approx(_rate_balance(snap)[1], abs=1e-3)
    assert res.summary["leader_bytes_in_balance_after"] == pytest.approx(_rate_balance(after)[1], abs=1e-3)
