"""The network-out goal (planning/spark/leaders.py) and its resource on the local engine: what a
broker sends as leader (produce x (followers + consumer_fanout)) is evened by choosing preferred
leaders (no data moved), within the limits of the leader goals ranked above it."""
from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import replace
from itertools import permutations

import pytest

from kafka_reassign import defaults
from kafka_reassign.errors import GoalError, ParamError
from kafka_reassign.planning.goal_order import DEFAULT_BALANCE_GOALS
from kafka_reassign.planning.spark import command as planner_cli
from kafka_reassign.planning.spark import leaders, make_options, plan
from kafka_reassign.planning.validate import validate_params
from test_planner_goals import apply_plan, check_common
from test_planner_leader_bytes import _leader_count_balance, _replica_sets
from test_planner_network import BASE_GOALS, hot_snapshot

TOL = 0.10
OUT_LAST = BASE_GOALS + ("network-out",)
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
    """Network out max / mean over the brokers, recomputed from the snapshot: the consumer bytes
    measured where a partition has them, else produce x ``fanout``."""
    sent: dict[int, float] = defaultdict(float)
    for t in snap["topics"]:
        for p in t["partitions"]:
            rate = float(p["bytes_in_per_sec"])
            read = p.get("consumer_bytes_per_sec")
            sent[p["replicas"][0]] += rate * (len(p["replicas"]) - 1) + (rate * fanout if read is None else read)
    ids = [b["id"] for b in snap["brokers"]]
    return max(sent[b] for b in ids) / (sum(sent.values()) / len(ids))


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
    off = plan(snap, "rebalance", engine="local", balance_goals=BASE_GOALS)
    off_after = apply_plan(snap, off.plan.to_json())
    assert _replica_sets(off_after) == _replica_sets(after)
    assert res.summary["data_to_move_bytes"] == off.summary["data_to_move_bytes"] > 0
    assert out_balance(off_after) > 1 + TOL  # the plan without it leaves it uneven
    if goals == OUT_LAST:  # leader-count ranks above: never pushed past its limit
        assert _leader_count_balance(after) <= 1 + TOL + 1e-9


def test_below_leader_count_and_leader_bytes_in_it_keeps_both_within_their_tolerances() -> None:
    snap = hot_leader_snapshot()
    goals = BASE_GOALS + ("leader-bytes-in", "network-out")
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
    # on by default (last); the switch by name drops the goal or adds it last, like its neighbours'
    assert DEFAULT_BALANCE_GOALS[-1] == "network-out" and make_options("rebalance").balance_network_out is True
    assert "network-out" not in make_options("rebalance", balance_network_out=False).balance_goals
    assert make_options("rebalance", balance_goals="disk", balance_network_out=True).balance_goals[-1] == "network-out"
    assert reassign_params()["consumer_fanout"].value == 1.0
    flags = defaults.planner_flags({"consumer_fanout": 2.5})
    assert flags == ["--consumer-fanout", "2.5"]
    parser = planner_cli.argparse.ArgumentParser()
    planner_cli.add_arguments(parser)
    args = parser.parse_args(["--snapshot", "s", "--goal", "rebalance", "--out", "o", *flags])
    assert planner_cli.options_from_args(args)["consumer_fanout"] == 2.5


def _group(seed: int) -> tuple[list[tuple], list[float]]:
    """One leader group: 8 brokers, 160 partitions of RF 2 or 3, a few hot, broker 1 leading most."""
    rng = random.Random(seed)
    rows, rates = [], []
    for p in range(160):
        reps = rng.sample(range(1, 9), rng.choice((2, 3)))
        if 1 in reps and rng.random() < 0.8:
            reps.remove(1)
            reps.insert(0, 1)
        rows.append(("t", p, list(reps), list(reps), 1.0))
        rates.append(rng.choice((1.0, 2.0, 40.0 if p % 10 == 0 else 3.0)))
    return rows, rates


def _within(rows: list[tuple], rates: list[float], goal: str, inp: leaders.LeaderInputs) -> set[int]:
    """The brokers within ``goal``'s limit for this placement."""
    weight = {"leader-count": [1.0] * len(rows), "leader-bytes-in": rates,
              "network-out": [r * (len(row[3]) - 1 + inp.fanout) for row, r in zip(rows, rates)]}[goal]
    tol = {"leader-count": inp.count_tolerance, "leader-bytes-in": inp.bytes_tolerance,
           "network-out": inp.out_tolerance}[goal]
    load = dict.fromkeys(inp.eligible, 0.0)
    for row, w in zip(rows, weight):
        load[row[3][0]] += w
    cap = sum(weight) / len(inp.eligible) * (1 + tol)
    if goal == "leader-count":
        cap = float(int(cap))  # the count limit is a whole number of leaders
    return {b for b in load if load[b] <= cap + 1e-9}


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("order", list(permutations(leaders.LEADER_GOALS)))
def test_a_lower_leader_goal_never_pushes_a_broker_past_a_higher_ones_limit(seed: int, order: tuple) -> None:
    rows, rates = _group(seed)
    for k, goal in enumerate(order[:-1]):
        inp = leaders.LeaderInputs(eligible=set(range(1, 9)), fixed=set(), order=order[:k + 1], fanout=0.5)
        first = [(t, p, o, list(f), s) for t, p, o, f, s in rows]
        leaders._balance(first, rates, inp)
        whole = [(t, p, o, list(f), s) for t, p, o, f, s in rows]
        leaders._balance(whole, rates, replace(inp, order=order))
        assert {sorted(f) == sorted(o) for _, _, o, f, _ in whole} == {True}  # reorders only
        kept = _within(first, rates, goal, inp)
        assert kept and kept <= _within(whole, rates, goal, inp), (goal, order)


def measured_snapshot() -> dict:
    """hot_leader_snapshot with consumers measured on its two hot topics: the first read 3x what is
    produced (three groups), the second not at all; the other topics carry no measurement."""
    snap = hot_leader_snapshot()
    for t, times in zip(snap["topics"][:2], (3.0, 0.0)):
        for p in t["partitions"]:
            p["consumer_bytes_per_sec"] = times * p["bytes_in_per_sec"]
    return snap


def unmeasured(snap: dict) -> dict:
    """``snap`` without its consumer measurements (the fanout stands in everywhere)."""
    return {**snap, "topics": [{**t, "partitions": [{k: v for k, v in p.items() if k != "consumer_bytes_per_sec"}
                                                    for p in t["partitions"]]} for t in snap["topics"]]}


def test_measured_consumer_bytes_replace_the_fanout_where_the_snapshot_has_them() -> None:
    snap = measured_snapshot()
    res = plan(snap, "rebalance", engine="local", balance_goals=OUT_FIRST, consumer_fanout=1.0)
    after = check_common(snap, res, goal="rebalance")
    assert res.summary["balance"]["network_out"] == {"before": pytest.approx(out_balance(snap), abs=1e-3),
                                                     "after": pytest.approx(out_balance(after), abs=1e-3)}
    assert out_balance(snap) > 2.0 and out_balance(after) <= 1 + TOL + 1e-9
    # the same placement weighed by the fanout alone is another figure: the measured one decided
    assert out_balance(unmeasured(after)) != pytest.approx(out_balance(after), abs=1e-3)
    # planned on the fanout alone, the brokers end uneven by what consumers really read
    blind = plan(unmeasured(snap), "rebalance", engine="local", balance_goals=OUT_FIRST, consumer_fanout=1.0)
    assert out_balance(apply_plan(snap, blind.plan.to_json())) > 1 + TOL
