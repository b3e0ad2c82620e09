"""The move search with the topic-spread goal listed (planning/spark/search.py): among replicas
of about the same size it sheds those of topics crowded on the source, and sends them to
receivers below the topic's even share, so its own copies also spread topics."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from kafka_reassign.planning.spark import plan
from kafka_reassign.planning.spark.search import GroupQuotas, SearchInputs, SpreadHint, search_group
from kafka_reassign.planning.spark.spread import EvenShares, moved_counts, topic_spread
from test_planner_spread import WITH_SPREAD, crowded_snapshot


def _group() -> Any:
    """Broker 1 holds 4 replicas of topic "hot" (105 bytes each) and 4 of "cold" (100 each)."""
    rows = [("g", t, p, 0, 1, size, [1], p, 0.0) for t, size in (("hot", 105.0), ("cold", 100.0)) for p in range(4)]
    return pd.DataFrame(rows, columns=["grp", "topic", "partition", "pos", "broker", "size_bytes", "replicas",
                                       "crc", "bytes_in_per_sec"])


def _inputs(hint: SpreadHint | None) -> SearchInputs:
    # broker 1 sheds 200 bytes in 2 replicas; receiver 2 has most quota, 3 less
    q = GroupQuotas({1: 200.0}, local={2: 300.0, 3: 250.0}, slack={1: 10.0}, count_excess={1: 2.0})
    return SearchInputs({"g": q}, {1: "a", 2: "a", 3: "a"}, {1: "g", 2: "g", 3: "g"}, spread=hint)


def test_without_the_goal_the_search_picks_by_bytes_alone() -> None:
    moves = search_group(_group(), _inputs(None))
    assert list(moves["topic"]) == ["cold", "cold"]  # exactly 100 each: the nearest size
    assert list(moves["dst"]) == [2, 3]


def test_with_the_goal_it_sheds_the_crowded_topic_to_a_receiver_below_its_even_share() -> None:
    # "hot": even 1, broker 1 holds 4 (2 above even + slack 1); receiver 2 already holds its share
    hint = SpreadHint(EvenShares.given({"hot": 1, "cold": 1}), {("hot", 2): 1}, {1: {"hot": 2}})
    moves = search_group(_group(), _inputs(hint))
    assert list(moves["topic"]) == ["hot", "hot"]
    assert list(moves["dst"]) == [3, 2]  # 3 first (below even), then 2 by quota: no receiver is below
    assert 200.0 - 10.0 <= moves["size_bytes"].sum() <= 200.0 + 10.0  # the bytes shed stay within slack
    assert hint.count == {("hot", 2): 1}  # the task counts on its own copy


def test_each_placement_counts_towards_the_receivers_share() -> None:
    # three "hot" replicas leave broker 1; receiver 2 has the most quota by far, but once it
    # holds one (even share 1) the next go to 3 and 4, still below even: the task counts as it places
    rows = [("g", "hot", p, 0, 1, 100.0, [1], p, 0.0) for p in range(3)]
    pdf = pd.DataFrame(rows, columns=["grp", "topic", "partition", "pos", "broker", "size_bytes", "replicas",
                                      "crc", "bytes_in_per_sec"])
    q = GroupQuotas({1: 300.0}, local={2: 1000.0, 3: 450.0, 4: 400.0}, slack={1: 10.0}, count_excess={1: 3.0})
    inp = SearchInputs({"g": q}, {b: "a" for b in (1, 2, 3, 4)}, {b: "g" for b in (1, 2, 3, 4)},
                       spread=SpreadHint(EvenShares.given({"hot": 1}), {}, {1: {"hot": 2}}))
    assert list(search_group(pdf, inp)["dst"]) == [2, 3, 4]
    bytes_only = SearchInputs(inp.quotas, inp.rack, inp.group)
    assert list(search_group(pdf, bytes_only)["dst"]) == [2, 2, 2]  # most quota each time


def test_a_topic_no_longer_crowded_is_not_preferred() -> None:
    hint = SpreadHint(EvenShares.given({"hot": 1, "cold": 1}), {}, {1: {"hot": 1}})  # one above even + slack
    moves = search_group(_group(), _inputs(hint))
    assert sorted(moves["topic"]) == ["cold", "hot"]


def _search_spread(snap: dict, tmp: Path, listed: bool) -> tuple[int, int]:
    """(topic spread before, after the search's own moves) on the local engine."""
    from kafka_reassign.planning.spark import make_options
    from kafka_reassign.planning.spark.data import LocalData
    from kafka_reassign.planning.spark.flow import plan_targets, read_loads, search_moves, start
    from kafka_reassign.planning.spark.snapshot_file import write_snapshot_lines

    path = str(write_snapshot_lines(snap, tmp / f"snap-{listed}.jsonl"))
    run = start(path, make_options("rebalance", engine="local", balance_goals=WITH_SPREAD,
                                   balance_topic_spread=listed))
    engine = LocalData(path, run.header)
    before, totals = read_loads(engine, run)
    targets, quotas, flows = plan_targets(run, before, totals)
    moves = search_moves(engine, run, targets, quotas, flows, before)
    placeable = set(targets.placeable)
    return (topic_spread(before.topic_count, placeable, 1),
            topic_spread(moved_counts(before.topic_count, moves), placeable, 1))


def test_on_a_crowded_cluster_the_search_itself_spreads_the_topics(tmp_path: Path) -> None:
    snap = crowded_snapshot(7)
    start, bytes_only = _search_spread(snap, tmp_path, listed=False)
    _, preferring = _search_spread(snap, tmp_path, listed=True)
    assert start > 10
    assert preferring < bytes_only  # less left to the spread pass's extra copies
    listed = plan(snap, "rebalance", engine="local", balance_goals=WITH_SPREAD).summary
    assert listed["topic_spread"]["after"] == 0
    assert listed["balance_after"] <= 1 + 0.04 + 1e-6  # the disk result kept (balance_tolerance)


def test_a_source_sheds_its_crowded_excess_first_smallest_first() -> None:
    # broker 1 holds "hot" replicas of 10, 20, 30 and 40 bytes (2 above even + slack) and "cold" ones
    # of 100: the two smallest "hot" leave first (the topic-spread bound's set), far from the byte
    # search's 100-byte pick; the byte search sheds the rest
    rows = [("g", "hot", p, 0, 1, 10.0 * (p + 1), [1], p, 0.0) for p in range(4)]
    rows += [("g", "cold", p, 0, 1, 100.0, [1], p, 0.0) for p in range(4)]
    pdf = pd.DataFrame(rows, columns=["grp", "topic", "partition", "pos", "broker", "size_bytes", "replicas",
                                      "crc", "bytes_in_per_sec"])
    q = GroupQuotas({1: 200.0}, local={2: 300.0, 3: 300.0}, slack={1: 10.0}, count_excess={1: 2.0})
    hint = SpreadHint(EvenShares.given({"hot": 1, "cold": 1}), {}, {1: {"hot": 2}})
    moves = search_group(pdf, SearchInputs({"g": q}, {1: "a", 2: "a", 3: "a"}, {1: "g", 2: "g", 3: "g"},
                                           spread=hint))
    assert list(zip(moves["topic"], moves["partition"]))[:2] == [("hot", 0), ("hot", 1)]
    assert 200.0 - 10.0 <= moves["size_bytes"].sum() <= 200.0 + 10.0
    hint.first = False  # the search's second try (network in not reached): by size match only
    later = search_group(pdf, SearchInputs({"g": q}, {1: "a", 2: "a", 3: "a"}, {1: "g", 2: "g", 3: "g"},
                                           spread=hint))
    assert ("hot", 0) not in set(zip(later["topic"], later["partition"]))


def test_the_search_runs_again_when_shedding_crowded_replicas_first_leaves_network_in_above_its_limit() -> None:
    # seed 5: the crowded topics' replicas shed first are hot and the network-in pass cannot then
    # bring every broker under its limit; seed 7: it can, and the first try is kept
    retried = plan(crowded_snapshot(5), "rebalance", engine="local", balance_goals=WITH_SPREAD).summary
    assert "search_again_s" in retried["timings"]
    assert retried["balance"]["network_in"]["after"] <= 1 + 0.1 + 1e-3  # network_in_tolerance
    assert retried["topic_spread"]["after"] == 0
    kept = plan(crowded_snapshot(7), "rebalance", engine="local", balance_goals=WITH_SPREAD).summary
    assert "search_again_s" not in kept["timings"]
    assert kept["balance"]["network_in"]["after"] <= 1 + 0.1 + 1e-3
