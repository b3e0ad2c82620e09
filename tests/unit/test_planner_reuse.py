"""What the 3M planner keeps between calls instead of recomputing (issue 23) gives what computing
it afresh gives: the spread pass's receiver order across moves, the summary's estimate without
the source-free bound, the plan file written without json's indenting encoder."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from kafka_reassign.planning.plan_estimate import PlannedMove, estimate_plan
from kafka_reassign.planning.plan import PartitionMove, ReassignmentPlan
from kafka_reassign.planning.spark.network import NetState, Replica
from kafka_reassign.planning.spark.spread import Spread, topic_spread

MB = 1_000_000


def _definition(sp: Spread, s: NetState, topic: str) -> list[int]:
    """Receivers below even + reach, fewest of the topic first, then least network in, then id."""
    return sorted((b for b in s.receivers if sp.n(topic, b) < sp.even.of(topic, b) + sp.reach),
                  key=lambda b: (sp.n(topic, b), s.net.get(b, 0.0), b))


@pytest.mark.parametrize("weighed", [False, True])
def test_the_receivers_order_follows_every_move(weighed: bool) -> None:
    rnd = random.Random(7)
    brokers = list(range(40))
    s = NetState({b: 0.0 for b in brokers}, {b: float(rnd.choice([0, 3, 3, 8])) for b in brokers},
                 float("inf"), {b: 1e12 for b in brokers}, set(brokers[4:]), {b: str(b % 4) for b in brokers}, 0.0)
    counts = {(t, b): rnd.randint(0, 3) for t in "abc" for b in brokers}
    eligible = {b: 1.0 + b % 3 for b in brokers} if weighed else set(brokers)  # capacities differ: shares too
    sp = Spread(s, counts, eligible, 1, {})
    crowded = sp.even.crowded(counts, eligible, 1)
    for i in range(30):
        topic = "abc"[i % 3]
        order = sp.receivers(topic)
        assert order == _definition(sp, s, topic)
        src = max(brokers[:4], key=lambda b: sp.n(topic, b))
        x = Replica(topic, i, 0, src, 1.0, float(rnd.choice([1, 4, 9])), (src,), (src,))
        sp.move(x, order[-1])  # network in and the topic's counts change: the next order must see it
        for t in "abc":  # every topic's, the moved one's counts kept, the others' unchanged
            assert sp.receivers(t) == _definition(sp, s, t)
        # the spread left, from the pairs crowded before and those the moves changed, is the measure
        assert sp.left(crowded, eligible) == topic_spread(counts, eligible, 1)


def test_the_partners_read_for_every_receiver_are_those_read_for_the_few_needed(tmp_path: Path) -> None:
    from kafka_reassign.planning.spark.data import LocalData
    from kafka_reassign.planning.spark.network import PER_BROKER
    from kafka_reassign.planning.spark.snapshot_file import read_header, write_snapshot_lines
    from kafka_reassign.planning.spark.spread_reads import Reads
    from test_planner_spread import crowded_snapshot

    path = str(write_snapshot_lines(crowded_snapshot(7), tmp_path / "snap.jsonl"))
    engine = LocalData(path, read_header(path))
    receivers, exclude = set(engine.brokers), {"search"}
    side = {b: ("cold", PER_BROKER) for b in sorted(receivers)[::3]}
    with Reads(engine, {("fraud", min(receivers))}, receivers, exclude) as reads:
        got = reads.partners(side).reset_index(drop=True)
    assert len(got) and set(got["broker"]) == set(side) and "search" not in set(got["topic"])
    assert got.equals(engine.net_candidates(side, exclude))


def test_the_summary_estimate_without_the_source_free_bound_has_the_same_time() -> None:
    rnd = random.Random(11)
    moves = []
    for p in range(60):
        current = tuple(rnd.sample(range(8), 3))
        target = (current[0], *rnd.sample([b for b in range(8) if b not in current], rnd.randint(1, 2)))
        target = (target + current[1:])[:3]
        moves.append(PlannedMove(topic=f"t{p % 5}", partition=p, current=current, target=target,
                                 size_bytes=float(rnd.randint(1, 50) * MB), produce=float(rnd.randint(0, 3) * 100_000),
                                 leader=current[0], min_isr=2))
    full, full_stalls = estimate_plan(moves, 5 * MB)
    fast, fast_stalls = estimate_plan(moves, 5 * MB, source_free=False)
    assert full.source_free_seconds is not None and fast.source_free_seconds is None
    assert (fast.seconds, fast.broker_seconds, fast.bound_seconds) == (full.seconds, full.broker_seconds,
                                                                       full.bound_seconds)
    assert fast_stalls == full_stalls


def test_the_plan_file_is_the_text_json_indents() -> None:
    """The plan file's writer (string joins) writes what ``json.dumps(indent=2)`` would."""
    rnd = random.Random(3)
    moves = [PartitionMove(rnd.choice(["t", "ördërs", 'q"uo\\te', "a b"]), rnd.randrange(50),
                           tuple(rnd.sample(range(12), rnd.randint(0, 4))),
                           rnd.choice([None, (), ("any", "/d 1", "/dé")]),
                           rnd.choice([None, (), (1, 2, 3)]))
             for _ in range(200)]
    for plan in (ReassignmentPlan(moves), ReassignmentPlan(moves[:1]), ReassignmentPlan([])):
        text = plan.dumps(indent=2)
        assert text == json.dumps(plan.to_json(), indent=2)
        assert json.loads(text) == plan.to_json()


def test_a_lazy_order_is_made_only_as_far_as_it_is_read():
    from kafka_reassign.planning.spark.spread_order import Lazy

    made: list[int] = []

    def items():
        for b in (5, 3, 9, 1):
            made.append(b)
            yield b

    order = Lazy(items())
    assert order[:2] == [5, 3] and made == [5, 3]
    assert next(iter(order)) == 5 and made == [5, 3]  # read again from what was made
    assert list(order) == [5, 3, 9, 1] and order == [5, 3, 9, 1] and len(order) == 4 and order[-1] == 1
    assert order[1:3] == [3, 9] and made == [5, 3, 9, 1]
