"""The topic-spread goal (planning/spark/spread.py) on the local engine: topics crowding a few
brokers end within their slack, without undoing the disk and network-in goals or breaking a rule."""
from __future__ import annotations

from typing import Any

import pytest

from kafka_reassign.errors import GoalError
from kafka_reassign.planning.spark import make_options, plan
from kafka_reassign.planning.spark.spread import EvenShares, topic_spread
from test_planner_goals import TOL, _rate_balance, balance, check_common, partitions
from test_planner_network import BASE_GOALS, NET_TOL, hot_snapshot

WITH_SPREAD = "rack-aware,capacity,disk,network-in,topic-spread,leader-count"
CROWDED = 3  # topics whose every replica sits on one broker of each rack


def crowded_snapshot(seed: int = 7) -> dict:
    """hot_snapshot with topics 2..4 packed onto the first broker of each rack (24 replicas each
    where the even share is 6)."""
    snap = hot_snapshot(seed)
    racks: dict[str, list[dict]] = {}
    for b in snap["brokers"]:
        racks.setdefault(b["rack"], []).append(b)
    firsts = [min(bs, key=lambda b: b["id"]) for _, bs in sorted(racks.items())]
    for t in snap["topics"][2:2 + CROWDED]:
        for p in t["partitions"]:
            k = p["partition"] % len(firsts)
            order = firsts[k:] + firsts[:k]
            p["replicas"] = [b["id"] for b in order]
            p["leader"] = p["replicas"][0]
            p["log_dirs"] = [b["log_dirs"][0]["path"] for b in order]
    return snap


def spread_of(snap: dict, skip_topic: str = "", skip_broker: int = -1) -> int:
    """The measure (slack 1) recomputed from the snapshot itself, every broker but ``skip_broker``
    placeable, every topic but ``skip_topic`` movable."""
    counts = {k: n for k, n in _counts(snap).items() if k[0] != skip_topic}
    return topic_spread(counts, {b["id"] for b in snap["brokers"]} - {skip_broker}, 1)


def test_the_measure_is_the_largest_excess_over_even_plus_slack() -> None:
    counts = {("a", 1): 5, ("a", 2): 1, ("b", 1): 1, ("b", 2): 1, ("b", 3): 1}
    # a: 6 replicas on 3 brokers, even 2: broker 1 holds 5 = even + slack(1) + 2
    assert topic_spread(counts, {1, 2, 3}, 1) == 2
    assert topic_spread(counts, {1, 2, 3}, 3) == 0
    assert topic_spread({("a", 1): 3}, {1, 2}, 1) == 0  # even 2, within slack


def test_even_shares_follow_capacity_when_capacities_differ() -> None:
    counts = {("a", 1): 6, ("a", 2): 2, ("b", 1): 1}
    equal = EvenShares(counts, {1: 5.0, 2: 5.0})
    assert (equal.of("a", 1), equal.of("a", 2), equal.of("b", 2)) == (4, 4, 1)  # ceil(8 / 2), ceil(1 / 2)
    assert EvenShares(counts, [1, 2]).of("a", 1) == 4  # ids alone: equal capacities
    weighed = EvenShares(counts, {1: 3.0, 2: 1.0})  # broker 1 holds three quarters of the capacity
    assert (weighed.of("a", 1), weighed.of("a", 2), weighed.of("b", 2)) == (6, 2, 1)
    # a share that is whole in exact arithmetic is not rounded up by float error
    assert EvenShares({("c", 1): 10}, {1: 0.7, 2: 0.3}).of("c", 1) == 7
    # broker 1 at 6 of "a" is within its weighed share; counted by equal shares it was 2 above even + 0
    assert topic_spread(counts, {1: 3.0, 2: 1.0}, 0) == 0 and topic_spread(counts, {1: 5.0, 2: 5.0}, 0) == 2


@pytest.mark.parametrize("seed", [5, 7])
def test_crowded_topics_end_within_slack_keeping_disk_network_and_racks(seed: int) -> None:
    snap = crowded_snapshot(seed)
    res = plan(snap, "rebalance", engine="local", balance_goals=WITH_SPREAD)
    after = check_common(snap, res, goal="rebalance")  # racks, one replica per broker, capacity
    s = res.summary
    assert spread_of(snap) == s["topic_spread"]["before"] > 10
    assert spread_of(after) == s["topic_spread"]["after"] == 0
    assert balance(after) <= 1 + TOL + 1e-6
    assert _rate_balance(after)[0] <= 1 + NET_TOL + 1e-9
    assert s["data_to_move_bytes"] >= s["lower_bound_bytes"] > 0
    # the disk and network goals alone leave the topics crowded
    off = plan(snap, "rebalance", engine="local", balance_goals=BASE_GOALS)
    assert off.summary["topic_spread"]["after"] > 0


def test_left_out_of_the_list_the_plan_is_the_list_without_it() -> None:
    snap = crowded_snapshot(7)
    default = plan(snap, "rebalance", engine="local")
    assert "topic-spread" in default.summary["balance_goals"] and default.summary["topic_spread"]["after"] == 0
    without = plan(snap, "rebalance", engine="local", balance_goals=BASE_GOALS)
    switched_off = plan(snap, "rebalance", engine="local", balance_goals=WITH_SPREAD, balance_topic_spread=False)
    assert switched_off.plan.to_json() == without.plan.to_json()
    listed = plan(snap, "rebalance", engine="local", balance_goals=WITH_SPREAD)
    assert listed.plan.to_json() != without.plan.to_json()


def test_excluded_topics_and_brokers_stay_put() -> None:
    snap = crowded_snapshot(7)
    crowded = [t["name"] for t in snap["topics"][2:2 + CROWDED]]
    kept_topic = crowded[0]
    kept_broker = snap["topics"][2]["partitions"][1]["replicas"][0]
    res = plan(snap, "rebalance", engine="local", balance_goals=WITH_SPREAD,
               exclude_topics=[kept_topic], exclude_brokers=[kept_broker])
    after = check_common(snap, res, goal="rebalance", exclude_topics=[kept_topic], exclude_brokers=[kept_broker])
    before_p, after_p = partitions(snap), partitions(after)
    for key, p in after_p.items():
        if key[0] == kept_topic:
            assert p["replicas"] == before_p[key]["replicas"], key
        assert (kept_broker in p["replicas"]) == (kept_broker in before_p[key]["replicas"]), key
    assert spread_of(snap, kept_topic, kept_broker) == res.summary["topic_spread"]["before"] > 10
    assert spread_of(after, kept_topic, kept_broker) == res.summary["topic_spread"]["after"] == 0


@pytest.mark.parametrize("value", [-1, 1.5, True])
def test_the_slack_is_checked(value: object) -> None:
    with pytest.raises(GoalError, match="topic_spread_slack"):
        make_options("rebalance", topic_spread_slack=value)


def _counts(snap: dict) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for t in snap["topics"]:
        for p in t["partitions"]:
            for b in p["replicas"]:
                out[(t["name"], b)] = out.get((t["name"], b), 0) + 1
    return out


def test_a_move_leaving_the_crowded_broker_carries_its_replica_instead_at_no_extra_copy() -> None:
    import pandas as pd

    from kafka_reassign.planning.spark.network import NetState, Pool, Replica, with_pass
    from kafka_reassign.planning.spark.search import MOVE_COLUMNS
    from kafka_reassign.planning.spark.spread import Spread

    # the search moves u-0 (size 100) from broker 1 to 2; topic t crowds broker 1 (3 where even is 1)
    moves = pd.DataFrame([("u", 0, 0, 1, 2, 100.0, 0.0, [1])], columns=list(MOVE_COLUMNS))
    s = NetState({1: 400.0, 2: 100.0, 3: 0.0}, {1: 0.0, 2: 0.0, 3: 0.0}, float("inf"),
                 {1: 400.0, 2: 100.0, 3: 0.0}, {1, 2, 3}, {1: "a", 2: "b", 3: "c"}, 0.0)
    leaving = Replica("u", 0, 0, 2, 100.0, 0.0, (2,), (1,), via=0)
    counts = {("t", 1): 3, ("u", 2): 1}
    sp = Spread(s, counts, {1, 2, 3}, 0, {1: Pool([leaving])})
    y = Replica("t", 0, 0, 1, 100.0, 0.0, (1,), (1,))
    assert sp.substitute(y) == [("t", 0, 0, 1, 2, 100.0, 0.0, [1])]
    assert (sp.n("t", 1), sp.n("t", 2), sp.n("u", 1), sp.n("u", 2)) == (2, 1, 1, 0)
    assert s.bytes == {1: 400.0, 2: 100.0, 3: 0.0}  # disk unchanged, nothing more copied
    out = with_pass(moves, s, [("t", 0, 0, 1, 2, 100.0, 0.0, [1])])
    assert list(zip(out["topic"], out["src"], out["dst"])) == [("t", 1, 2)]  # u-0 stays: its move is gone
    # a second replica of t finds no move left to ride on, and none of a topic that would crowd
    assert sp.substitute(Replica("t", 1, 0, 1, 100.0, 0.0, (1,), (1,))) is None


def _one_crowded_replica(swap_first: bool) -> list[tuple]:
    """Rows the pass makes for one replica of topic "t" crowded on broker 1, when broker 2 may take it
    as it is and also holds a same-size partner of topic "u" that could come back."""
    from kafka_reassign.planning.spark.network import NetState, Pool, Replica
    from kafka_reassign.planning.spark.spread import Spread, _place

    s = NetState({1: 100.0, 2: 50.0}, {1: 0.0, 2: 0.0}, float("inf"), {1: 1000.0, 2: 1000.0}, {1, 2},
                 {1: "a", 2: "a"}, 0.0)
    sp = Spread(s, {("t", 1): 5, ("u", 2): 1, ("u", 1): 0}, {1, 2}, 0, {})
    sp.swap_first = swap_first
    x = Replica("t", 0, 0, 1, 10.0, 0.0, (1,), (1,))
    partner = Pool([Replica("u", 0, 0, 2, 10.0, 0.0, (2,), (2,))])
    return _place(sp, x, {2: partner}) or []


def test_a_plain_move_that_fits_comes_before_a_swap() -> None:
    plain = _one_crowded_replica(swap_first=False)
    assert [(r[0], r[3], r[4]) for r in plain] == [("t", 1, 2)]  # one copy: the partner stays
    swap = _one_crowded_replica(swap_first=True)  # the retry's order when plain moves left a topic crowded
    assert [(r[0], r[3], r[4]) for r in swap] == [("t", 1, 2), ("u", 2, 1)]


def test_the_receivers_order_is_the_sort_by_count_then_network_in_then_id() -> None:
    import random

    from kafka_reassign.planning.spark.network import NetState
    from kafka_reassign.planning.spark.spread import Spread

    rnd = random.Random(3)
    brokers = list(range(60))
    net = {b: float(rnd.choice([0, 5, 5, 9, 12])) for b in brokers[:50]}  # ties, and brokers with none
    s = NetState({b: 0.0 for b in brokers}, net, float("inf"), {b: 1.0 for b in brokers}, set(brokers[5:]),
                 {b: str(b % 4) for b in brokers}, 0.0)
    counts = {(t, b): rnd.randint(0, 4) for t in "abc" for b in brokers if rnd.random() < 0.8}
    sp = Spread(s, counts, set(brokers), 1, {})
    for reach in (0, 1):
        sp.reach = reach
        for t in "abc":  # the definition: receivers below even + reach, fewest first, then least network in
            want = sorted((b for b in s.receivers if sp.n(t, b) < sp.even.of(t, b) + reach),
                          key=lambda b: (sp.n(t, b), net.get(b, 0.0), b))
            assert sp.receivers(t) == want and want


def _relay_case(third_net: float) -> tuple[list[tuple] | None, list[tuple] | None, Any]:
    """Hot topic "h" crowds broker 1 (2 where even is 1, slack 0), which is at the network-in limit
    (10). Broker 2, the one receiver below even for "h", has network room for it but no disk room;
    its replica of "c" (as large) cannot come back in a swap ("c" would crowd broker 1). Broker 3
    has disk room and holds no "c", its network in ``third_net``. Rows of the pass without, then
    with, relays; and the state."""
    from kafka_reassign.planning.spark.network import NetState, Pool, Replica
    from kafka_reassign.planning.spark.spread import Spread, _place

    s = NetState({1: 100.0, 2: 100.0, 3: 0.0}, {1: 10.0, 2: 0.0, 3: third_net}, 10.0,
                 {1: 200.0, 2: 100.0, 3: 100.0}, {1, 2, 3}, {1: "a", 2: "a", 3: "a"}, 0.0)
    sp = Spread(s, {("h", 1): 2, ("h", 3): 1, ("c", 1): 1, ("c", 2): 1}, {1, 2, 3}, 0, {})
    x = Replica("h", 0, 0, 1, 10.0, 10.0, (1,), (1,))
    c = Replica("c", 0, 0, 2, 10.0, 1.0, (2,), (2,))
    pools = {2: Pool([c])}
    without = _place(sp, x, pools)
    sp.large = {2: Pool([c])}
    return without, _place(sp, x, pools), s


def test_a_relay_sends_the_receivers_large_replica_on_to_a_third_broker() -> None:
    without, rows, s = _relay_case(third_net=0.0)
    assert without is None  # no plain move (disk) nor swap (the partner's topic would crowd broker 1)
    assert [(r[0], r[3], r[4]) for r in rows or []] == [("h", 1, 2), ("c", 2, 3)]
    assert s.net == {1: 0.0, 2: 9.0, 3: 1.0} and s.bytes == {1: 90.0, 2: 100.0, 3: 10.0}  # every limit kept
    # the third broker at the network-in limit cannot take even the cold replica: no relay
    assert _relay_case(third_net=10.0)[1] is None


def test_relays_bring_the_hottest_topic_within_slack_on_a_small_hot_traffic_shape(tmp_path: Any) -> None:
    """The benchmark's hot-traffic shape, small: swaps alone left a spread of 3 here (the hot topics'
    receivers with network room full on disk); relays reach 0 within every higher goal."""
    from benchmarks.planner_shapes import generate
    from kafka_reassign.planning.spark import plan_file
    from kafka_reassign.planning.spark.snapshot_file import read_snapshot_dict

    path = tmp_path / "hot.jsonl"
    generate("hot-traffic", 80, 20, 12, path, seed=2)
    res = plan_file(str(path), "rebalance", engine="local")
    s = res.summary
    assert s["topic_spread"] == {"before": 9, "after": 0, "slack": 1}
    assert s["balance"]["network_in"]["after"] <= 1 + NET_TOL + 1e-9
    assert s["balance"]["disk"]["after"] <= 1 + TOL + 1e-6
    assert s["data_to_move_bytes"] >= s["lower_bound_bytes"] > 0
    snap = read_snapshot_dict(path)
    rack = {b["id"]: b["rack"] for b in snap["brokers"]}
    old = {(t["name"], p["partition"]): p["replicas"] for t in snap["topics"] for p in t["partitions"]}
    for p in res.plan.to_json()["partitions"]:  # one replica per broker, never fewer racks
        was = old[(p["topic"], p["partition"])]
        assert len(set(p["replicas"])) == len(was) == len(p["replicas"])
        assert len({rack[b] for b in p["replicas"]}) >= len({rack[b] for b in was})


def test_a_retry_looks_only_at_the_brokers_changed_since_it_fit_nowhere() -> None:
    """Replica x of "t", crowded on broker 1, fits on no receiver (2, 3, 4 full): its miss is kept.
    A move of another topic off broker 3 makes room there: the retry looks at broker 3 alone (the
    others are unchanged) and takes it, as a full try on the same state does."""
    from kafka_reassign.planning.spark.network import NetState, Replica
    from kafka_reassign.planning.spark.spread import Spread, _place

    def state() -> tuple[Spread, list[int]]:
        s = NetState({1: 100.0, 2: 100.0, 3: 100.0, 4: 100.0, 5: 0.0}, {b: 0.0 for b in range(1, 6)},
                     float("inf"), {b: 1000.0 if b in (1, 5) else 100.0 for b in range(1, 6)}, {2, 3, 4, 5},
                     {b: "a" for b in range(1, 6)}, 0.0)
        sp = Spread(s, {("t", 1): 5, ("t", 5): 2, ("u", 3): 1}, set(range(1, 6)), 0, {})
        looked: list[int] = []
        fits = sp.fits
        sp.fits = lambda x, b: looked.append(b) or fits(x, b)  # type: ignore[method-assign]
        return sp, looked

    x = Replica("t", 0, 0, 1, 10.0, 0.0, (1,), (1,))
    z = Replica("u", 0, 0, 3, 50.0, 0.0, (3,), (3,))
    sp, looked = state()
    assert _place(sp, x, {}) is None and sorted(looked) == [2, 3, 4]  # every receiver below even, full
    sp.move(z, 5)
    looked.clear()
    rows = _place(sp, x, {})
    assert looked == [3] and [(r[0], r[3], r[4]) for r in rows or []] == [("t", 1, 3)]
    full, _ = state()  # no miss kept: a full try
    full.move(z, 5)
    assert _place(full, x, {}) == rows


def test_a_miss_is_kept_until_its_partition_changes_or_the_step_does() -> None:
    from kafka_reassign.planning.spark.spread_misses import Misses

    m = Misses()
    key = ("t", 0, 0)
    assert m.since(key, "swaps") is None  # never missed: a full try
    m.miss(key, "swaps", frozenset({2}))
    m.moved({1, 3, 4}, ("u", 0))  # its broker 1 changed (a swap retry is then a full one), not its partition
    miss = m.since(key, "swaps")
    assert miss is not None and miss.swap_receivers == {2}
    assert [b for b in range(1, 6) if m.changed(b, miss)] == [1, 3, 4]
    assert m.since(key, "relays") is None  # another step of the pass
    m.moved({2, 5}, ("t", 0))  # another replica of its partition moved
    assert m.since(key, "swaps") is None


def test_bounded_retries_plan_what_full_tries_plan(tmp_path: Any, monkeypatch: Any) -> None:
    """On the small hot-traffic shape (relays needed), retries that look only at what changed give
    the plan of full tries, and some retries did look at less."""
    from benchmarks.planner_shapes import generate
    from kafka_reassign.planning.spark import plan_file, spread_misses

    path = tmp_path / "hot.jsonl"
    generate("hot-traffic", 80, 20, 12, path, seed=2)
    since, bounded = spread_misses.Misses.since, []

    def spy(self: Any, key: Any, mode: Any) -> Any:
        out = since(self, key, mode)
        bounded.append(out is not None)
        return out

    monkeypatch.setattr(spread_misses.Misses, "since", spy)
    res = plan_file(str(path), "rebalance", engine="local")
    assert any(bounded)
    monkeypatch.setattr(spread_misses.Misses, "miss", lambda *a: None)  # none kept: every retry a full try
    bounded.clear()
    full = plan_file(str(path), "rebalance", engine="local")
    assert bounded and not any(bounded)
    assert res.plan.to_json() == full.plan.to_json() and res.summary["topic_spread"]["after"] == 0
