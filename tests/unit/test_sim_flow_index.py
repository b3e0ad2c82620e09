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
    def __init__(self, partition: str, rids: tuple[int, ...]) -> None:
        self.partition, self.rids, self.n = partition, rids, -1


def _plan(rng: random.Random, count: int = 300) -> list[_Flow]:
    return [_Flow(f"p{rng.randrange(60)}", tuple(rng.sample(range(40), rng.randint(1, 4)))) for _ in range(count)]


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
