"""The network-out goal (planning/spark/leaders.py) and its resource on the local engine: what a
broker sends as leader (produce x (followers + consumer_fanout)) is evened by choosing preferred
leaders (no data moved), within the limits of the leader goals ranked above it."""
from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from kafka_reassign import defaults
from kafka_reassign.errors import GoalError, ParamError
from kafka_reassign.planning.goal_order import DEFAULT_BALANCE_GOALS
from kafka_reassign.planning.spark import command as planner_cli
from kafka_reassign.planning.spark import make_options, plan
from kafka_reassign.planning.validate import validate_params
from test_planner_goals import apply_plan, check_common
from test_planner_network import hot_snapshot

TOL = 0.10
OUT_LAST = DEFAULT_BALANCE_GOALS + ("network-out",)
OUT_FIRST = ("rack-aware", "capacity", "disk", "network-in", "network-out", "leader-count")


def hot_leader_snapshot() -> dict:
    """hot_snapshot(7) with its last eight topics at replication factor 2 (so network out is not
    leader bytes in scaled) and broker 1 leading every hot partition it holds."""
    snap = hot_snapshot(7)
    for i, t in enumerate(snap["topics"]):
        for p in t["partitions"]:
            if i >= 8:
                p["replicas"], p["log_dirs"] = p["replicas"][:2], p["log_dirs"][:2]
            elif 1 in p["replicas"]:
                j = p["replicas"].index(1)
                for key in ("replicas", "log_dirs"):
                    p[key][0], p[key][j] = p[key][j], p[key][0]
            p["leader"] = p["replicas"][0]
    return snap


def out_balance(snap: dict, fanout: float = 1.0) -> float:
    """Network out max / mean over the brokers, recomputed from the snapshot."""
    sent: dict[int, float] = defaultdict(float)
    for t in snap["topics"]:
        for p in t["partitions"]:
            sent[p["replicas"][0]] += float(p["bytes_in_per_sec"]) * (len(p["replicas"]) - 1 + fanout)
    ids = [b["id"] for b in snap["brokers"]]
    return max(sent[b] for b in ids) / (sum(sent.values()) / len(ids))


def _leader_count_balance(snap: dict) -> float:
    led = Counter(p["replicas"][0] for t in snap["topics"] for p in t["partitions"])
    ids = [b["id"] for b in snap["brokers"]]
    return max(led[b] for b in ids) / (sum(led.values()) / len(ids))


def _replica_sets(snap: dict) -> dict[tuple[str, int], frozenset[int]]:
    return {(t["name"], p["partition"]): frozenset(p["replicas"]) for t in snap["topics"] for p in t["partitions"]}


@pytest.mark.parametrize("goals", [OUT_LAST, OUT_FIRST])
def test_network_out_ends_within_tolerance_by_reorders_only(goals: tuple) -> None:
    snap = hot_leader_snapshot()
    res = plan(snap, "rebalance", engine="local", balance_goals=goals)
    after = check_common(snap, res, goal="rebalance")  # rack rules, one replica per broker, capacity
    assert out_balance(snap) > 2.0
    assert out_balance(after) <= 1 + TOL + 1e-9
    assert res.summary["balance"]["network_out"] == {"before": pytest.approx(out_balance(snap), abs=1e-3),
                                                     "after": pytest.approx(out_balance(after), abs=1e-3)}
    assert res.summary["balance"]["network_out"] != res.summary["balance"]["leader_bytes_in"]
    # no data moves for it: the plan without it holds the same replicas and copies the same bytes
    off = plan(snap, "rebalance", engine="local")
    off_after = apply_plan(snap, off.plan.to_json())
    assert _replica_sets(off_after) == _replica_sets(after)
    assert res.summary["data_to_move_bytes"] == off.summary["data_to_move_bytes"] > 0
    assert out_balance(off_after) > 1 + TOL  # the default plans leave it uneven
    if goals == OUT_LAST:  # leader-count ranks above: never pushed past its limit
        assert _leader_count_balance(after) <= 1 + TOL + 1e-9


def test_below_leader_count_and_leader_bytes_in_it_keeps_both_within_their_tolerances() -> None:
    snap = hot_leader_snapshot()
    goals = DEFAULT_BALANCE_GOALS + ("leader-bytes-in", "network-out")
    res = plan(snap, "rebalance", engine="local", balance_goals=goals, consumer_fanout=0.0)
    after = check_common(snap, res, goal="rebalance")
    balance = res.summary["balance"]
    assert balance["leader_bytes_in"]["after"] <= 1 + TOL + 1e-9
    assert _leader_count_balance(after) <= 1 + TOL + 1e-9
    assert balance["network_out"]["after"] == pytest.approx(out_balance(after, 0.0), abs=1e-3)
    assert out_balance(after, 0.0) <= 1 + TOL + 1e-9
    # it did something: the two leader goals alone leave network out above its tolerance
    without = plan(snap, "rebalance", engine="local", balance_goals=goals[:-1], consumer_fanout=0.0)
    assert without.summary["balance"]["network_out"]["after"] > 1 + TOL


@pytest.mark.parametrize("fanout", [0.0, 3.0])
def test_consumer_fanout_weighs_the_consumers_in_the_figure(fanout: float) -> None:
    snap = hot_leader_snapshot()
    res = plan(snap, "rebalance", engine="local", consumer_fanout=fanout, balance_goals=OUT_LAST)
    after = apply_plan(snap, res.plan.to_json())
    assert res.summary["balance"]["network_out"] == {"before": pytest.approx(out_balance(snap, fanout), abs=1e-3),
                                                     "after": pytest.approx(out_balance(after, fanout), abs=1e-3)}
    assert out_balance(after, fanout) <= 1 + TOL + 1e-9


@pytest.mark.parametrize("bad", [-0.5, float("nan"), "two"])
def test_a_bad_consumer_fanout_is_refused_naming_it(bad: object) -> None:
    with pytest.raises(GoalError, match="consumer_fanout: must be a number >= 0"):
        make_options("rebalance", consumer_fanout=bad)
    with pytest.raises(ParamError, match="consumer_fanout: must be a number >= 0"):
        validate_params({"consumer_fanout": bad})


def test_consumer_fanout_is_one_row_reaching_the_cli_and_the_planner() -> None:
    from kafka_reassign_airflow.params import reassign_params

    assert validate_params({}).consumer_fanout == 1.0 == make_options("rebalance").consumer_fanout
    assert reassign_params()["consumer_fanout"].value == 1.0
    flags = defaults.planner_flags({"consumer_fanout": 2.5})
    assert flags == ["--consumer-fanout", "2.5"]
    parser = planner_cli.argparse.ArgumentParser()
    planner_cli.add_arguments(parser)
    args = parser.parse_args(["--snapshot", "s", "--goal", "rebalance", "--out", "o", *flags])
    assert planner_cli.options_from_args(args)["consumer_fanout"] == 2.5
