"""The replica-capacity goal (planning/spark/replica_capacity.py): no broker is pushed above
max_replicas_per_broker replicas, on the local engine."""
from __future__ import annotations

import pytest

from kafka_reassign.errors import GoalError
from kafka_reassign.planning.spark import make_options, plan
from kafka_reassign.planning.spark.loads import Loads
from kafka_reassign.planning.spark.replica_capacity import cancel_over_cap, replica_problems
from test_planner_goals import apply_plan, check_common, gen


def counts(snap: dict) -> dict[int, int]:
    out = {int(b["id"]): 0 for b in snap["brokers"]}
    for t in snap["topics"]:
        for p in t["partitions"]:
            for r in p["replicas"]:
                out[r] += 1
    return out


def skewed() -> dict:
    """12 brokers, 1,152 replicas (96 a broker on average), four brokers with 148-231."""
    return gen(brokers=12, racks=3, topics=16, partitions=24, skew=1.0, seed=7)


@pytest.mark.parametrize("cap", [98, 100])
def test_no_broker_is_pushed_above_the_cap(cap: int) -> None:
    snap = skewed()
    before = counts(snap)
    free = counts(apply_plan(snap, plan(snap, "rebalance", engine="local").plan.to_json()))
    assert max(n for b, n in free.items() if n > before[b]) > cap  # without the cap a receiver ends above it
    res = plan(snap, "rebalance", engine="local", max_replicas_per_broker=cap)
    after = counts(check_common(snap, res, goal="rebalance"))
    assert max(after.values()) <= cap  # the brokers above it before shed down to it too
    fig = res.summary["replica_capacity"]
    assert fig == {"max_replicas_per_broker": cap, "fullest_before": 231, "fullest_after": max(after.values())}
    assert not any("max_replicas_per_broker" in w for w in res.summary["warnings"])
    assert res.summary["balance"]["disk"]["after"] <= 1.04


def test_more_replicas_than_the_brokers_may_hold_is_refused() -> None:
    with pytest.raises(GoalError, match="max_replicas_per_broker") as err:
        plan(skewed(), "rebalance", engine="local", max_replicas_per_broker=95)
    assert "1152 replicas" in str(err.value)


@pytest.mark.parametrize("value", [0, 2.5, True])
def test_the_cap_is_checked(value: object) -> None:
    with pytest.raises(GoalError, match="max_replicas_per_broker"):
        make_options("rebalance", max_replicas_per_broker=value)


def test_smallest_moves_into_a_full_receiver_are_cancelled_and_drains_stay() -> None:
    import pandas as pd

    before = Loads({1: 100.0, 2: 0.0, 3: 50.0}, {1: 5, 2: 3, 3: 4}, {}, {})
    moves = pd.DataFrame({"src": [1, 1, 3, 1], "dst": [2, 2, 2, 2], "size_bytes": [30.0, 10.0, 5.0, 20.0]})
    kept = cancel_over_cap(moves, before, 5, drained={3}, hard_cap={})
    # broker 2 would hold 7: two moves go, the smallest not from the drained broker 3
    assert kept["size_bytes"].tolist() == [30.0, 5.0]
    # broker 1 holds 40 bytes after its moves: back to 50 is its hard cap, 10 fits, 20 more does not
    kept = cancel_over_cap(moves, before, 5, drained={3}, hard_cap={1: 50.0})
    assert kept["size_bytes"].tolist() == [30.0, 5.0, 20.0]
    after = before.copy()
    after.count.update({1: 3, 2: 7})
    assert [p.entry for p in replica_problems(5, before, after)] == ["broker 2"]
    assert replica_problems(None, before, after) == []


def test_the_network_passes_swap_at_the_cap_so_both_limits_hold() -> None:
    from test_planner_network import hot_snapshot
    from test_planner_network_capacity import CEILING, mean_in, net_loads

    snap = hot_snapshot(7)
    before = counts(snap)
    cap = int(sum(before.values()) / len(before) * 1.02)
    link = mean_in(snap) * 1.1 / CEILING
    res = plan(snap, "rebalance", engine="local", max_replicas_per_broker=cap,
               broker_network_capacity_bytes_per_sec=link)
    after = check_common(snap, res, goal="rebalance")
    assert all(n <= max(cap, before[b]) for b, n in counts(after).items())
    for load in net_loads(after):
        assert max(load.values()) <= CEILING * link + 1
