"""The network-capacity goal (planning/spark/network_capacity.py): a hard limit on each broker's
network in and out, as a fraction of its link, on the local engine."""
from __future__ import annotations

import copy

import pytest

from kafka_reassign import defaults
from kafka_reassign.errors import GoalError
from kafka_reassign.planning.spark import command as planner_cli
from kafka_reassign.planning.spark import make_options, plan
from kafka_reassign.planning.spark.loads import Loads, broker_infos, network_out
from kafka_reassign.planning.spark.network_capacity import network_problems, set_link_limits
from kafka_reassign.planning.spark.targets import BrokerInfo
from test_planner_goals import apply_plan, check_common
from test_planner_network import hot_snapshot

#: the disk goal and leader count alone: network in is not evened, only capped
NO_NETWORK_GOALS = "rack-aware,capacity,disk,leader-count"
CEILING = 0.8
#: network out evened by reorders alone, no leader count above it
OUT_ONLY = "rack-aware,capacity,disk,network-out"


def net_loads(snap: dict) -> tuple[dict[int, float], dict[int, float]]:
    """Network in (produce received by every replica) and out (led produce x RF, fan-out 1)."""
    net_in = {int(b["id"]): 0.0 for b in snap["brokers"]}
    out = dict(net_in)
    for t in snap["topics"]:
        for p in t["partitions"]:
            for r in p["replicas"]:
                net_in[r] += p["bytes_in_per_sec"]
            out[p["replicas"][0]] += p["bytes_in_per_sec"] * len(p["replicas"])
    return net_in, out


def mean_in(snap: dict) -> float:
    net_in, _ = net_loads(snap)
    return sum(net_in.values()) / len(net_in)


@pytest.mark.parametrize("seed, headroom, goals", [(5, 1.05, NO_NETWORK_GOALS), (7, 1.05, NO_NETWORK_GOALS),
                                                   (7, 1.05, None), (5, 1.1, None)])
def test_no_broker_ends_above_its_link_limit_in_or_out(seed: int, headroom: float, goals: str | None) -> None:
    snap = hot_snapshot(seed)
    link = mean_in(snap) * headroom / CEILING  # the limit: headroom x the mean network in
    kw = {"balance_goals": goals} if goals else {}
    res = plan(snap, "rebalance", engine="local", broker_network_capacity_bytes_per_sec=link, **kw)
    after = check_common(snap, res, goal="rebalance")
    for load_before, load_after in zip(net_loads(snap), net_loads(after)):
        assert max(load_before.values()) > CEILING * link  # the snapshot breaks it, each way
        assert max(load_after.values()) <= CEILING * link + 1
    fig = res.summary["network_capacity"]
    assert fig["brokers_with_link"] == 12 and fig["in"]["after"] <= CEILING and fig["out"]["after"] <= CEILING
    assert fig["in"]["before"] > CEILING and fig["out"]["before"] > CEILING
    if goals == NO_NETWORK_GOALS:  # without the links these goals leave a broker above that limit
        free = apply_plan(snap, plan(snap, "rebalance", engine="local", **kw).plan.to_json())
        assert max(max(x.values()) for x in net_loads(free)) > CEILING * link


def test_a_link_that_never_binds_changes_nothing() -> None:
    snap = hot_snapshot(7)
    wide = plan(snap, "rebalance", engine="local", broker_network_capacity_bytes_per_sec=mean_in(snap) * 100)
    none = plan(snap, "rebalance", engine="local")
    assert wide.plan.to_json() == none.plan.to_json()
    assert none.summary["network_capacity"] == {"brokers_with_link": 0, "ceiling": CEILING}


def test_a_slow_link_beats_the_disk_and_network_in_goals() -> None:
    snap = copy.deepcopy(hot_snapshot(7))
    net_in, _ = net_loads(snap)
    b = max(net_in, key=lambda x: (net_in[x], x))
    entry = next(x for x in snap["brokers"] if x["id"] == b)
    entry["network_bytes_per_sec"] = mean_in(snap) * 0.3 / CEILING  # the snapshot's own: 0.3 x the mean
    res = plan(snap, "rebalance", engine="local", broker_network_capacity_bytes_per_sec=mean_in(snap) * 100)
    after = net_loads(check_common(snap, res, goal="rebalance"))
    assert res.summary["network_capacity"]["brokers_with_link"] == 12
    # its rack's other brokers must take more than the network-in goal's mean x 1.1: a rule ranks above it
    assert after[0][b] <= mean_in(snap) * 0.3 + 1
    assert max(after[0].values()) > mean_in(snap) * 1.1


def test_a_rack_whose_links_cannot_carry_its_traffic_is_left_above_with_a_warning() -> None:
    snap = copy.deepcopy(hot_snapshot(7))
    net_in, _ = net_loads(snap)
    # a rack none of whose brokers is above the disk ceiling (they would have to shed its traffic)
    held = {x["id"]: sum(p["size_bytes"] for t in snap["topics"] for p in t["partitions"] if x["id"] in p["replicas"])
            / sum(d["capacity_bytes"] for d in x["log_dirs"]) for x in snap["brokers"]}
    racks = {x["rack"] for x in snap["brokers"]} - {x["rack"] for x in snap["brokers"] if held[x["id"]] > 0.85}
    slow = [x["id"] for x in snap["brokers"] if x["rack"] == min(racks)]
    rack = min(racks)
    b = max(slow, key=lambda x: (net_in[x], x))
    for x in snap["brokers"]:
        if x["rack"] == rack:  # a replica of each partition stays in the rack: its traffic cannot leave
            x["network_bytes_per_sec"] = mean_in(snap) * 0.3 / CEILING
    res = plan(snap, "rebalance", engine="local")
    after = net_loads(check_common(snap, res, goal="rebalance"))
    assert all(after[0][x] <= max(net_in[x], mean_in(snap) * 0.3 + 1) for x in slow)  # none pushed above
    assert after[0][b] < net_in[b]
    assert any("network in" in w and "stay above network_capacity_ceiling" in w for w in res.summary["warnings"])


def test_traffic_above_every_link_is_refused_naming_the_option() -> None:
    snap = hot_snapshot(7)
    with pytest.raises(GoalError, match="network_capacity_ceiling") as err:
        plan(snap, "rebalance", engine="local", broker_network_capacity_bytes_per_sec=mean_in(snap) * 0.95 / CEILING)
    assert "network in" in str(err.value) and "add brokers" in str(err.value)


@pytest.mark.parametrize("option, value", [("network_capacity_ceiling", 1.5), ("network_capacity_ceiling", 0),
                                           ("broker_network_capacity_bytes_per_sec", -1)])
def test_network_capacity_options_are_checked(option: str, value: object) -> None:
    with pytest.raises(GoalError, match=option):
        make_options("rebalance", **{option: value})


def test_the_check_names_brokers_pushed_above_not_those_already_there() -> None:
    brokers = {b: BrokerInfo(b, "r", 1e12, link_limit=100.0) for b in (1, 2, 3)}
    before = Loads({1: 0.0, 2: 0.0, 3: 0.0}, {}, {}, {1: 0.0, 2: 0.0, 3: 60.0},
                   net_in={1: 150.0, 2: 50.0, 3: 90.0}, rep_out={1: 0.0, 2: 0.0, 3: 0.0})
    after = before.copy()
    after.net_in.update({1: 140.0, 2: 120.0})  # 1 stays above but sheds; 2 is pushed above
    after.bytes_in.update({3: 20.0, 2: 40.0})
    assert network_out(after, 1.0)[2] == 40.0
    problems = network_problems(brokers, before, after, 1.0)
    assert [(p.entry, p.kind) for p in problems] == [("broker 2", "network_capacity")]
    assert "network in would be" in problems[0].reason


def test_the_link_params_reach_the_planner_and_a_brokers_own_entry_wins() -> None:
    flags = defaults.planner_flags({"broker_network_capacity_bytes_per_sec": 2_000_000,
                                    "broker_network_capacities": ["3=1MB/s"], "max_replicas_per_broker": 500})
    assert "--max-replicas-per-broker" in flags and "--broker-network-capacity-of" in flags
    parser = planner_cli.argparse.ArgumentParser()
    planner_cli.add_arguments(parser)
    args = parser.parse_args(["--snapshot", "s", "--goal", "rebalance", "--out", "o", *flags])
    opts = make_options("rebalance", **planner_cli.options_from_args(args))
    assert opts.broker_network_capacity_bytes_per_sec == 2_000_000 and opts.broker_network_capacities == ("3=1MB/s",)
    assert opts.max_replicas_per_broker == 500
    snap = hot_snapshot(7)
    snap["brokers"][0]["network_bytes_per_sec"] = 5_000_000  # the snapshot's own figure wins
    res = plan(snap, "rebalance", engine="local", broker_network_capacity_bytes_per_sec=2_000_000,
               broker_network_capacities=("3=1MB/s",))
    brokers, _ = broker_infos(snap)
    set_link_limits(brokers, snap, opts)
    assert {b: x.link_limit for b, x in brokers.items() if b in (1, 2, 3)} == {1: 4e6, 2: 1.6e6, 3: 0.8e6}
    assert res.summary["network_capacity"]["brokers_with_link"] == 12


def set_links(snap: dict, mean: float, odd: float, even: float) -> dict[int, float]:
    """Link speeds of ``odd`` / ``even`` x ``mean`` on odd / even brokers, into the snapshot."""
    link = {x["id"]: mean * (odd if x["id"] % 2 else even) for x in snap["brokers"]}
    for x in snap["brokers"]:
        x["network_bytes_per_sec"] = link[x["id"]]
    return link


def util_peak(load: dict[int, float], link: dict[int, float]) -> float:
    """The fullest broker's load / link speed over the mean utilisation."""
    return max(load[b] / link[b] for b in load) / (sum(load.values()) / sum(link.values()))


def test_with_link_speeds_network_in_is_evened_by_utilisation() -> None:
    snap = hot_snapshot(7)
    link = set_links(snap, mean_in(snap), 20, 10)  # odd brokers: 2x; never binding
    res = plan(snap, "rebalance", engine="local")
    net_in, _ = net_loads(check_common(snap, res, goal="rebalance"))
    top = util_peak(net_in, link)
    assert top <= 1.10 + 1e-9
    assert res.summary["balance"]["network_in"]["after"] == pytest.approx(top, abs=1e-3)
    assert sum(net_in[b] for b in net_in if b % 2) > 1.5 * sum(net_in[b] for b in net_in if not b % 2)
    assert res.summary["data_to_move_bytes"] >= res.summary["lower_bound_bytes"] > 0


def test_with_link_speeds_network_out_is_evened_by_utilisation() -> None:
    from test_planner_network_out import hot_leader_snapshot
    snap = hot_leader_snapshot()
    _, out = net_loads(snap)
    # odd brokers: 1.3x (2x would leave an even broker's share below two hot partitions); never binding
    link = set_links(snap, sum(out.values()) / len(out), 13, 10)
    res = plan(snap, "rebalance", engine="local", balance_goals=OUT_ONLY)
    _, out = net_loads(check_common(snap, res, goal="rebalance"))
    top = util_peak(out, link)
    assert top <= 1.10 + 1e-9
    assert res.summary["balance"]["network_out"]["after"] == pytest.approx(top, abs=1e-3)
    assert sum(out[b] for b in out if b % 2) > 1.15 * sum(out[b] for b in out if not b % 2)
    # the same links on all but one broker: a share of a partly unknown total is no share, so the
    # goal evens rates (and the summary reports rates)
    del snap["brokers"][0]["network_bytes_per_sec"]
    res = plan(snap, "rebalance", engine="local", balance_goals=OUT_ONLY)
    _, out = net_loads(check_common(snap, res, goal="rebalance"))
    rates = max(out.values()) / (sum(out.values()) / len(out))
    assert rates <= 1.10 + 1e-9
    assert res.summary["balance"]["network_out"]["after"] == pytest.approx(rates, abs=1e-3)
