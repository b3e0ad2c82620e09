"""The search cut into pieces (more tasks than racks): quotas split without giving a byte twice,
one piece per partition, and plans as good as one task per rack (engine="local")."""
from __future__ import annotations

import pytest

from kafka_reassign.planning.spark import plan
from kafka_reassign.planning.spark.pieces import piece_count, split_group, split_quotas
from kafka_reassign.planning.spark.search import GroupQuotas, SearchInputs
from kafka_sim.generate import GenerateOptions, generate_snapshot

GROUP = {1: "a", 2: "a", 3: "a", 4: "a", 5: "a", 6: "a", 7: "a", 10: "b", 11: "b", 12: "b"}


def rack_a(drained: frozenset[int] = frozenset({4})) -> GroupQuotas:
    """Rack a: four sources, three in-rack receivers, three receivers in rack b to export to."""
    return GroupQuotas(sources={1: 50.0, 2: 40.0, 3: 30.0, 4: 20.0}, drained=set(drained),
                       local={5: 45.0, 6: 30.0, 7: 15.0}, exports={10: 25.0, 11: 15.0, 12: 10.0},
                       slack={b: 2.0 for b in GROUP}, give={b: 4.0 for b in GROUP},
                       hard_limit={b: 1000.0 for b in (5, 6, 7, 10, 11, 12)},
                       count_excess={1: 5.0, 2: 4.0, 3: 3.0, 4: 2.0})


def test_pieces_split_sources_and_cut_every_quota_in_their_proportions():
    q = rack_a()
    pieces = split_group("a", q, GROUP, 3)
    assert sorted(pieces) == ["a#0", "a#1", "a#2"]
    # every source in exactly one piece, drained brokers with it
    owners = [n for b in q.sources for n, p in pieces.items() if b in p.sources]
    assert len(owners) == len(q.sources)
    assert set().union(*(p.drained for p in pieces.values())) == {4}
    shed = sum(q.sources.values())
    for pool in ("local", "exports"):
        whole = getattr(q, pool)
        for b, v in whole.items():  # no quota byte given twice, none lost
            assert sum(getattr(p, pool).get(b, 0.0) for p in pieces.values()) == pytest.approx(v)
        for p in pieces.values():  # each piece's quota matches its sources' share
            share = sum(p.sources.values()) / shed
            assert sum(getattr(p, pool).values()) == pytest.approx(share * sum(whole.values()))
    # a receiver cut between pieces may go above its quota by its part of the allowance only
    for b in q.local:
        assert sum(p.give[b] for p in pieces.values() if b in p.local) == pytest.approx(q.give[b])
    for b in q.exports:
        assert sum(p.slack[b] for p in pieces.values() if b in p.exports) == pytest.approx(q.slack[b])
    assert split_group("a", q, GROUP, 1) == {"a": q}
    q.local[8] = 0.0  # a receiver without quota stays in one piece (forced moves may use it)
    assert sum(8 in p.local for p in split_group("a", q, GROUP, 3).values()) == 1


def test_piece_count_follows_the_candidates_but_never_leaves_a_piece_without_a_source_or_receiver():
    q = rack_a(drained=frozenset())
    counts = {1: 300, 2: 300, 3: 200, 4: 200}
    assert piece_count(rack_a(), counts, 100) == 1  # a rack with a broker to drain stays whole
    assert piece_count(q, counts, 500) == 2
    assert piece_count(q, counts, 100) == 4  # ten wanted, four sources
    assert piece_count(q, counts, 10_000) == 1
    few = GroupQuotas(sources=q.sources, local={5: 45.0}, exports={})
    assert piece_count(few, counts, 100) == 1
    assert list(split_quotas({"a": q}, counts, GROUP, 500)) == ["a#0", "a#1"]


def test_only_one_piece_moves_a_partition_with_replicas_in_two_pieces():
    inp = SearchInputs(quotas={}, rack={b: g for b, g in GROUP.items()}, group=GROUP,
                       piece={1: "a#0", 2: "a#1", 3: "a#1", 10: "b"})
    # replicas on sources 2 (a#1) then 1 (a#0): a#1 holds the partition for the whole rack
    assert inp.holds([2, 1, 10], 2) and inp.holds([2, 1, 10], 3)
    assert not inp.holds([2, 1, 10], 1)
    # the other rack's piece is not concerned, nor a partition with one replica in the rack
    assert inp.holds([2, 1, 10], 10) and inp.holds([1, 10, 11], 1)


@pytest.mark.parametrize("goal,options", [("rebalance", {}), ("remove-brokers", {"brokers": [4, 9]})])
def test_a_plan_in_pieces_is_as_good_as_one_task_per_rack(goal, options):
    snap = generate_snapshot(GenerateOptions(brokers=18, racks=3, topics=20, partitions=30, skew=1.0, seed=9))
    whole = plan(snap, goal, engine="local", **options)
    cut = plan(snap, goal, engine="local", search_piece_replicas=150, **options)
    s, c = whole.summary, cut.summary
    assert s["search_pieces"] == 3 < c["search_pieces"]  # one task per rack, then more
    assert c["lower_bound_bytes"] == s["lower_bound_bytes"] > 0
    # (draining two of six brokers of a rack caps it: neither plan reaches the tolerance there)
    assert c["reaches_accepted_balance"] == s["reaches_accepted_balance"] == (goal == "rebalance")
    assert c["balance_after"] <= s["balance_after"] + 0.01
    assert s["lower_bound_bytes"] <= c["data_to_move_bytes"] <= 1.01 * s["data_to_move_bytes"]
    assert all(not set(options.get("brokers", [])) & set(m.replicas) for m in cut.plan.moves)
