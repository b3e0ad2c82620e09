"""The driver's reconcile step: check the changed partitions against every rule, pick log dirs
for new replicas on JBOD brokers, and order the plan for the pipelined executor.

All of it runs over the changed partitions (moves-sized), never over the whole cluster.
"""
from __future__ import annotations

from typing import Any

from kafka_reassign.errors import Problem
from kafka_reassign.planning.plan import ANY_LOG_DIR, PartitionMove, ReassignmentPlan
from kafka_reassign.planning.spark.leaders import _ints
from kafka_reassign.planning.spark.loads import Loads
from kafka_reassign.planning.spark.network import columns
from kafka_reassign.planning.spark.targets import Targets

MAX_PROBLEMS = 20


def rule_problems(changes: Any, t: Targets, after: Loads, hard_cap: dict[int, float]) -> list[Problem]:
    """Every broken rule: the per-partition ones the leader tasks found, capacity, drains."""
    bad = changes[changes["problem"].notna()].head(MAX_PROBLEMS)
    out = [Problem(f"partition {tp}-{p}", str(x), "rule")
           for tp, p, x in zip(bad["topic"], bad["partition"], bad["problem"])]
    for b in t.placeable:
        if after.bytes[b] > hard_cap[b] + 1 and after.bytes[b] > t.target[b] + 1:
            out.append(Problem(f"broker {b}", f"would hold {after.bytes[b]:.0f} bytes, above "
                                              f"capacity x capacity_ceiling = {hard_cap[b]:.0f}",
                               "capacity"))
    for b in sorted(t.drained):
        if after.count[b] > 0:
            out.append(Problem(f"broker {b}", f"{after.count[b]} replicas could not be moved off "
                                              "(no receiver passes the rack and capacity rules)",
                               "not_drained"))
    return out[:MAX_PROBLEMS]


def _dirs_for(orig: list[int], final: list[int], size: float, dirs: dict[int, list[tuple[str, float]]],
              dir_bytes: dict[tuple[int, str], float]) -> tuple[str, ...] | None:
    """A log dir for each new replica on a multi-dir broker (most free room); None if none named."""
    out: list[str] = []
    for b in final:
        if b in orig or len(dirs[b]) < 2:
            out.append(ANY_LOG_DIR)
            continue
        path = max(dirs[b], key=lambda d: d[1] - dir_bytes.get((b, d[0]), 0.0))[0]
        dir_bytes[(b, path)] = dir_bytes.get((b, path), 0.0) + size
        out.append(path)
    return tuple(out) if any(d != ANY_LOG_DIR for d in out) else None


def ordered_plan(changes: Any, dirs: dict[int, list[tuple[str, float]]], before: Loads) -> ReassignmentPlan:
    """The plan in executor order: data moves first, largest first for each receiving broker and
    the receivers interleaved (so a sliding window starts a copy on every receiver at once and
    the big copies, which set the end time, start early); leader-only reorders last."""
    rows = []
    for topic, part, orig, final, size in zip(*columns(changes, ("topic", "partition", "orig", "final", "size_bytes"))):
        orig, final = _ints(orig), _ints(final)
        added = [b for b in final if b not in orig]
        rows.append((str(topic), int(part), orig, final, float(size), added))
    leaders_only = sorted((r for r in rows if not r[5]), key=lambda r: (r[0], r[1]))
    dir_bytes = dict(before.dir_bytes)
    jbod = any(len(d) > 1 for d in dirs.values())  # else every new replica goes to "any": no dir to pick
    # original_replicas: a run refuses the plan if the placement changed since (stale plan).
    moves = [PartitionMove(r[0], r[1], tuple(r[3]), _dirs_for(r[2], r[3], r[4], dirs, dir_bytes) if jbod else None,
                           original_replicas=tuple(r[2]))
             for r in [rows[i] for i in _data_order(rows)] + leaders_only]
    return ReassignmentPlan(moves)


def _data_order(rows: list[tuple[str, int, list[int], list[int], float, list[int]]]) -> list[int]:
    """Positions of the rows that copy data, in executor order: each receiver's k-th copy (by the
    receiver of its first new replica, largest copies first) before any receiver's (k+1)-th, then
    largest first, then by topic and partition. numpy's stable sorts: a million moves at 3M replicas."""
    import numpy as np

    data = [i for i, r in enumerate(rows) if r[5]]
    if not data:
        return []
    moved = np.array([-rows[i][4] * len(rows[i][5]) for i in data], dtype=np.float64)
    topic = np.unique(np.array([rows[i][0] for i in data]), return_inverse=True)[1]  # codes in str order
    part = np.array([rows[i][1] for i in data], dtype=np.int64)
    by_size = np.lexsort((part, topic, moved))  # last key first: moved, then topic, then partition
    rank: dict[int, int] = {}
    k = []
    for i in by_size.tolist():
        first = rows[data[i]][5][0]
        k.append(rank.get(first, 0))
        rank[first] = k[-1] + 1
    order = by_size[np.lexsort((part[by_size], topic[by_size], moved[by_size], np.array(k, dtype=np.int64)))]
    return [data[i] for i in order.tolist()]
