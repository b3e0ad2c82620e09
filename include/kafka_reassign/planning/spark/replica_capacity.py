"""The replica-capacity goal (Cruise Control's ReplicaCapacityGoal): no broker is pushed above
``max_replicas_per_broker`` replicas (off unless that option is set).

A rule, kept listed or not: a cluster with more replicas than the placeable brokers may hold is
refused before any search; a receiver the disk search's moves leave above the cap (and above
what it held before) gets its smallest incoming moves cancelled until it is under, so the least
data stays unmoved; the network-in and spread passes never move a replica onto a broker at the
cap (:meth:`.network.NetState.count_ok`; their swaps keep counts); the reconcile step checks every broker once more. A
broker already above the cap may stay there (no higher); the summary warns with its id.
"""
from __future__ import annotations

from typing import Any

from kafka_reassign.errors import GoalError, Problem
from kafka_reassign.planning.spark.loads import Loads
from kafka_reassign.planning.spark.network import columns, mid_counts
from kafka_reassign.planning.spark.targets import Targets


def check_replica_room(cap: int | None, t: Targets, before: Loads) -> None:
    """Refuse a cluster whose movable replicas cannot fit under the cap on the placeable brokers.

    :raises GoalError: naming max_replicas_per_broker
    """
    if cap is None:
        return
    need = sum(before.count.get(b, 0) for b in (*t.placeable, *t.drained))
    if need > cap * len(t.placeable):
        raise GoalError([Problem("max_replicas_per_broker", f"the brokers that may take replicas hold {need} "
                                 f"replicas, more than {len(t.placeable)} brokers x max_replicas_per_broker={cap}: "
                                 "add brokers or raise the cap", "replica_capacity")])


def cancel_over_cap(moves: Any, before: Loads, cap: int | None, drained: set[int]) -> Any:
    """The moves without those that leave a receiver above the cap (and above what it held
    before): its smallest incoming moves go first; moves off a drained broker stay."""
    if cap is None or not len(moves):
        return moves
    count = mid_counts(before, moves)
    over = {b: n - max(cap, before.count.get(b, 0)) for b, n in count.items()
            if n > max(cap, before.count.get(b, 0))}
    if not over:
        return moves
    src, dst, size = columns(moves, ("src", "dst", "size_bytes"))
    drop = []
    for i in sorted(range(len(dst)), key=lambda i: (size[i], i)):
        if over.get(int(dst[i]), 0) > 0 and int(src[i]) not in drained:
            over[int(dst[i])] -= 1
            drop.append(i)
    return moves.drop(moves.index[drop]).reset_index(drop=True)


def replica_problems(cap: int | None, before: Loads, after: Loads) -> list[Problem]:
    """Brokers the plan pushes above the cap."""
    if cap is None:
        return []
    return [Problem(f"broker {b}", f"would hold {n} replicas, above max_replicas_per_broker={cap}",
                    "replica_capacity")
            for b, n in sorted(after.count.items()) if n > cap and n > before.count.get(b, 0)]


def replica_summary(cap: int | None, before: Loads, after: Loads) -> tuple[dict[str, Any], list[str]]:
    """The summary's ``replica_capacity`` (the fullest broker's replicas before and after) and a
    warning naming the brokers left above the cap."""
    fig = {"max_replicas_per_broker": cap, "fullest_before": max(before.count.values(), default=0),
           "fullest_after": max(after.count.values(), default=0)}
    over = sorted(b for b, n in after.count.items() if cap is not None and n > cap)
    warn = [f"brokers {over[:10]} stay above max_replicas_per_broker={cap} (they held more before; no "
            "placement within the other goals brings them under)"] if over else []
    return fig, warn
