"""The network-in goal (planning/spark/network.py) on the local engine: hot topics' produce
traffic is spread after the disk balance, without undoing it or breaking a rule."""
from __future__ import annotations

import pytest

from kafka_reassign.errors import GoalError
from kafka_reassign.planning.spark import make_options, plan
from kafka_reassign.planning.spark.lower_bound import GoalBounds, least_bytes_for_rate
from test_planner_goals import (TOL, _rate_balance, apply_plan, balance, check_common, gen, loads, partitions,
                                with_new_brokers)

NET_TOL = 0.10
#: the data goals and leader count, without the goals the tests beside it turn on one at a time
#: (topic-spread, leader-bytes-in, network-out): the plan a goal under test is compared with
BASE_GOALS = ("rack-aware", "capacity", "disk", "network-in", "leader-count")


def hot_snapshot(seed: int = 7, racks: int = 3) -> dict:
    """12 brokers; two of 16 topics take 30x the produce rate of the rest."""
    snap = gen(brokers=12, racks=racks, topics=16, partitions=24, skew=1.0, seed=seed)
    for i, t in enumerate(snap["topics"]):
        for p in t["partitions"]:
            p["bytes_in_per_sec"] = (30.0 if i < 2 else 1.0) * 1000 * (1 + p["partition"] % 3)
    return snap


@pytest.mark.parametrize("seed", [5, 7])
def test_network_in_ends_within_tolerance_and_disk_stays_balanced(seed: int) -> None:
    snap = hot_snapshot(seed)
    res = plan(snap, "rebalance", engine="local")
    after = check_common(snap, res, goal="rebalance")  # rack rules, one replica per broker, capacity
    net_before, _ = _rate_balance(snap)
    net_after, _ = _rate_balance(after)
    assert net_before > 2.0
    assert net_after <= 1 + NET_TOL + 1e-9
    assert res.summary["balance"]["network_in"]["after"] == pytest.approx(net_after, abs=1e-3)
    assert balance(after) <= 1 + TOL
    assert res.summary["data_to_move_bytes"] >= res.summary["lower_bound_bytes"] > 0
    # without the goal the same plan leaves the hot brokers far above the tolerance
    off = plan(snap, "rebalance", engine="local", balance_network_in=False)
    assert _rate_balance(apply_plan(snap, off.plan.to_json()))[0] > 1 + NET_TOL


def test_excluded_brokers_keep_their_replicas_under_the_network_goal() -> None:
    snap = hot_snapshot(7)
    before = loads(snap)
    coldest = min(before, key=lambda b: (before[b]["bytes"], b))
    res = plan(snap, "rebalance", engine="local", exclude_brokers=[coldest])
    after = check_common(snap, res, goal="rebalance", exclude_brokers=[coldest])
    held = {(t["name"], p["partition"]) for t in snap["topics"] for p in t["partitions"] if coldest in p["replicas"]}
    held_after = {(t["name"], p["partition"]) for t in after["topics"] for p in t["partitions"]
                  if coldest in p["replicas"]}
    assert held_after == held
    assert _rate_balance(after)[0] < _rate_balance(snap)[0]


def test_without_produce_rates_the_plan_is_the_disk_goals_alone() -> None:
    snap = hot_snapshot(7)
    for t in snap["topics"]:
        for p in t["partitions"]:
            p["bytes_in_per_sec"] = 0.0
    on = plan(snap, "rebalance", engine="local")
    off = plan(snap, "rebalance", engine="local", balance_network_in=False)
    assert on.plan.to_json() == off.plan.to_json()
    assert on.summary["data_to_move_bytes"] == off.summary["data_to_move_bytes"] > 0
    assert on.summary["balance"]["network_in"] == {"before": 1.0, "after": 1.0}


@pytest.mark.parametrize("option, value", [("network_in_tolerance", -0.1), ("balance_network_in", "yes")])
def test_network_options_are_checked(option: str, value: object) -> None:
    with pytest.raises(GoalError, match=option):
        make_options("rebalance", **{option: value})


def test_add_brokers_with_hot_topics_still_fills_only_the_new_brokers() -> None:
    snap = with_new_brokers(hot_snapshot(7), [13, 14, 15])
    res = plan(snap, "add-brokers", engine="local", brokers=[13, 14, 15])
    after = check_common(snap, res, goal="add-brokers", brokers=(13, 14, 15))
    before_p = partitions(snap)
    for key, p in partitions(after).items():
        assert set(p["replicas"]) - set(before_p[key]["replicas"]) <= {13, 14, 15}, key
    assert _rate_balance(after)[0] < _rate_balance(snap)[0]


def test_remove_brokers_with_hot_topics_drains_and_spreads_the_produce() -> None:
    snap = hot_snapshot(5, racks=4)  # 4 racks for RF 3: replicas may change rack
    res = plan(snap, "remove-brokers", engine="local", brokers=[2, 7])
    after = check_common(snap, res, goal="remove-brokers", brokers=(2, 7))
    assert all(not {2, 7} & set(p["replicas"]) for p in partitions(after).values())
    off = plan(snap, "remove-brokers", engine="local", brokers=[2, 7], balance_network_in=False)
    assert res.summary["balance"]["network_in"]["after"] < off.summary["balance"]["network_in"]["after"]
    assert res.summary["balance"]["network_in"]["after"] <= 1 + NET_TOL
    assert res.summary["data_to_move_bytes"] >= res.summary["lower_bound_bytes"] > 0


def test_least_bytes_for_a_rate_is_the_fractional_knapsack() -> None:
    # (size, rate): an empty hot replica costs nothing, then by rate per byte, the last in part
    items = [(100.0, 50.0), (10.0, 20.0), (0.0, 5.0), (50.0, 1.0), (30.0, 0.0)]
    assert least_bytes_for_rate(items, 30.0) == pytest.approx(10.0 + 5.0 / 50.0 * 100.0)
    assert least_bytes_for_rate(items, 5.0) == 0.0
    assert least_bytes_for_rate(items, 0.0) == 0.0
    assert least_bytes_for_rate(items, 1000.0) == 160.0  # short: every replica with a rate
    # a broker's terms are not added across goals: the joint bound takes the larger per broker
    terms = GoalBounds({"disk": {1: 5.0, 2: 0.0}, "network-in": {1: 3.0, 2: 4.0}})
    assert terms.joint(["disk", "network-in"]) == 9.0 and terms.joint(["disk"]) == 5.0


@pytest.mark.parametrize("seed", [5, 7])
def test_network_in_forces_copies_the_disk_bound_does_not_count(seed: int) -> None:
    snap = hot_snapshot(seed)
    disk_only = plan(snap, "rebalance", engine="local", balance_network_in=False)
    balanced = apply_plan(snap, disk_only.plan.to_json())  # disk within tolerance, network in not
    res = plan(balanced, "rebalance", engine="local", balance_goals=BASE_GOALS)
    s = res.summary
    assert s["balance_before"] <= 1 + TOL and s["balance"]["network_in"]["before"] > 1 + NET_TOL
    assert s["lower_bound_by_goal"]["disk"] == 0
    assert s["lower_bound_goals"] == ["disk", "network-in"]  # the plan reaches network in's tolerance
    assert s["lower_bound_bytes"] == s["lower_bound_by_goal"]["network-in"] > 0
    moved = sum(p["size_bytes"] * len(set(e["replicas"]) - set(p["replicas"]))
                for e in res.plan.to_json()["partitions"]
                for p in [partitions(balanced)[(e["topic"], e["partition"])]])
    assert moved == s["data_to_move_bytes"] >= s["lower_bound_bytes"]
    assert s["moved_over_lower_bound"] == pytest.approx(moved / s["lower_bound_bytes"], abs=1e-4)
    # listed without network-in the same snapshot needs no copy at all
    assert plan(balanced, "rebalance", engine="local", balance_network_in=False).summary["lower_bound_bytes"] == 0


def test_candidates_are_the_engine_rows_not_moved_then_the_moves_onto_each_broker() -> None:
    import random

    import pandas as pd

    from kafka_reassign.planning.spark.data import NET_COLUMNS
    from kafka_reassign.planning.spark.network import candidates
    from kafka_reassign.planning.spark.search import MOVE_COLUMNS

    rnd = random.Random(5)
    parts = {(f"t{i % 7}", i): rnd.sample(range(12), 3) for i in range(300)}
    moved = [(t, p, pos, reps[pos], rnd.choice([b for b in range(12) if b not in reps]), float(rnd.randint(1, 9)),
              rnd.random(), reps) for (t, p), reps in parts.items() for pos in range(3) if rnd.random() < 0.2]
    moves = pd.DataFrame(moved, columns=list(MOVE_COLUMNS))
    side = {b: None for b in (1, 3, 4, 8, 11)}
    frame = pd.DataFrame([(t, p, pos, reps[pos], float(p % 5 + 1), 0.5, reps, 0) for (t, p), reps in parts.items()
                          for pos in range(3) if reps[pos] in side], columns=list(NET_COLUMNS))
    got = {b: [(x.topic, x.partition, x.pos, x.broker, x.size, x.rate, x.replicas, x.orig, x.via) for x in rs]
           for b, rs in candidates(frame, moves, side).items()}
    done: dict[tuple[str, int], dict[int, int]] = {}
    for t, p, pos, _, dst, *_ in moved:
        done.setdefault((t, p), {})[pos] = dst
    after = {k: tuple(d.get(i, x) for i, x in enumerate(parts[k])) for k, d in done.items()}
    want: dict[int, list[tuple]] = {b: [] for b in side}
    for t, p, pos, b, size, rate, reps, _ in frame.itertuples(index=False):
        if pos not in done.get((t, p), {}):
            want[b].append((t, p, pos, b, size, rate, after.get((t, p), tuple(reps)), tuple(reps), -1))
    for i, (t, p, pos, _, dst, size, rate, reps) in enumerate(moved):
        if dst in want:
            want[dst].append((t, p, pos, dst, size, rate, after[(t, p)], tuple(reps), i))
    assert got == want and all(want.values())
