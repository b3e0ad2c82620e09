"""A patched plan's bookkeeping answers what a walk over the plan's flows would, in the same order.

The re-plan quantum patches a plan at every event (a copy caught up, a quota changed mode);
the flow index and the quota heap make that cost what changed. The physics sums and breaks
ties in the order it meets flows, so the index must hand them out in plan order, and the heap
must find exactly the quotas whose event is due.
"""
from __future__ import annotations

import heapq
import random

from kafka_sim.flow_index import FlowIndex
from kafka_sim.replication_flows import _due_keys


class _Flow:
    def __init__(self, partition: str, rids: tuple[int, ...], rate: float) -> None:
        self.partition, self.rids, self.n, self.rate = partition, rids, -1, rate


def _plan(rng: random.Random, count: int = 300) -> list[_Flow]:
    return [_Flow(f"p{rng.randrange(60)}", tuple(rng.sample(range(40), rng.randint(1, 4))), rng.uniform(0, 5e6))
            for _ in range(count)]


def test_the_index_hands_out_flows_as_a_walk_over_the_plan_would():
    rng = random.Random(5)
    flows = _plan(rng)
    index = FlowIndex(flows)
    live = list(flows)
    for _round in range(15):
        planned = sorted({f.partition for f in live})
        gone = set(rng.sample(planned, min(3, len(planned))))
        dropped = index.drop(gone)
        assert dropped == [f for f in live if f.partition in gone]  # plan order
        live = [f for f in live if f.partition not in gone]
        assert index.flows() == live
        rids = set(rng.sample(range(40), 3))
        assert index.crossing(rids) == [f for f in live if not rids.isdisjoint(f.rids)]
        for rid in rids:
            assert list(index.by_rid.get(rid, {}).values()) == [f for f in live if rid in f.rids]
    assert index.drop({"never-planned"}) == []


def test_due_quotas_are_read_from_the_heap_as_a_scan_would_find_them():
    rng = random.Random(9)
    keys = [(kind, b) for kind in ("l", "f") for b in range(50)]
    quota_at = {key: rng.uniform(0, 100) for key in keys}
    heap = [(at, key) for key, at in quota_at.items()]
    heapq.heapify(heap)
    for _round in range(200):
        key = rng.choice(keys)  # found again: its old entry stays in the heap, stale
        quota_at[key] = rng.choice([rng.uniform(0, 100), float("inf")])
        heapq.heappush(heap, (quota_at[key], key))
        now = rng.uniform(0, 100)
        due = _due_keys(heap, quota_at, now)
        assert set(due) == {k for k, at in quota_at.items() if at <= now}


def test_the_load_on_each_resource_is_the_sum_of_its_live_flows_rates():
    """A re-share reads what the other flows use of a resource from the index: it must equal a sum
    over the live flows after drops and re-rates, a flow zeroed before its drop (finished at once)
    included."""
    rng = random.Random(11)
    flows = _plan(rng)
    index = FlowIndex(flows)
    live = list(flows)
    for _round in range(20):
        for rid in rng.sample(range(40), 20):
            if rid in index.by_rid:
                index.used(rid)  # some sums kept through the re-rates below, some summed afresh
        for f in rng.sample(live, 10):
            rate = rng.choice([0.0, rng.uniform(0, 5e6)])
            index.rerate(f, rate)
            f.rate = rate
        gone = set(rng.sample(sorted({f.partition for f in live}), 2))
        for f in live:
            if f.partition in gone:
                f.rate = 0.0  # zeroed first: the index still takes off what it counted
        index.drop(gone)
        live = [f for f in live if f.partition not in gone]
        for rid in range(40):
            if index.by_rid.get(rid):
                expected = sum(f.rate for f in live if rid in f.rids)
                assert abs(index.used(rid) - expected) <= 1e-6 * max(1.0, expected)
