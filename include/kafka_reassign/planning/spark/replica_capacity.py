"""The replica-capacity goal (Cruise Control's ReplicaCapacityGoal): no broker is pushed above
``max_replicas_per_broker`` replicas (off unless that option is set).

A rule, kept listed or not: a cluster with more replicas than the placeable brokers may hold is
refused before any search; a receiver the disk search's moves leave above the cap (and above
what it held before) gets its smallest incoming moves cancelled until it is under, so the least
data stays unmoved; a broker above the cap after the disk search and the network-in pass sheds
its smallest replicas (or redirects the search's moves onto it) to the receivers with the
fewest replicas that have room (:func:`shed_over_cap`); the network-in and spread passes never
move a replica onto a broker at the cap (:meth:`.network.NetState.count_ok`; their swaps keep
counts); the reconcile step checks every broker once more. A broker no receiver can relieve may
stay above (no higher); the summary warns with its id.
"""
from __future__ import annotations

import math
from typing import Any

from kafka_reassign.errors import GoalError, Problem
from kafka_reassign.planning.spark.loads import Loads
from kafka_reassign.planning.spark.network import (NetState, candidates, columns, keep_counts, mid_counts, mid_loads,
                                                   net_state, with_pass)
from kafka_reassign.planning.spark.targets import BrokerInfo, Targets


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


def cancel_over_cap(moves: Any, before: Loads, cap: int | None, drained: set[int],
                    hard_cap: dict[int, float]) -> Any:
    """The moves without those that leave a receiver above the cap (and above what it held
    before): its smallest incoming moves go first; moves off a drained broker stay, and so does
    a move whose source would go back above the disk's hard cap (a rule too: the receiver sheds
    later, :func:`shed_over_cap`)."""
    if cap is None or not len(moves):
        return moves
    count = mid_counts(before, moves)
    over = {b: n - max(cap, before.count.get(b, 0)) for b, n in count.items()
            if n > max(cap, before.count.get(b, 0))}
    if not over:
        return moves
    src, dst, size = columns(moves, ("src", "dst", "size_bytes"))
    byt = dict(before.bytes)  # bytes after the moves
    for a, b, z in zip(src, dst, size):
        byt[int(a)] -= z
        byt[int(b)] += z
    drop = []
    for i in sorted(range(len(dst)), key=lambda i: (size[i], i)):
        a = int(src[i])
        if over.get(int(dst[i]), 0) > 0 and a not in drained and byt[a] + size[i] <= hard_cap.get(a, math.inf):
            over[int(dst[i])] -= 1
            byt[a] += size[i]
            drop.append(i)
    return moves.drop(moves.index[drop]).reset_index(drop=True)


def shed_over_cap(engine: Any, brokers: dict[int, BrokerInfo], t: Targets, before: Loads, moves: Any,
                  hard_cap: dict[int, float], opts: Any) -> Any:
    """The moves plus those that bring brokers above the cap under it: their smallest replicas
    first (a search move onto one is redirected: no extra copy), each to the receiver with the
    fewest replicas that takes it within the rules, the disk's hard cap and network in's limits.

    :param engine: SparkData or LocalData (the over-cap brokers' replicas)
    """
    cap = opts.max_replicas_per_broker
    count = mid_counts(before, moves) if cap is not None else {}
    over = {b: count[b] - cap for b in t.placeable if cap is not None and count.get(b, 0) > cap}
    if not over:
        return moves
    s = _count_state(brokers, t, before, moves, hard_cap, opts)
    side = {b: ("cold", before.count.get(b, 0)) for b in over}
    rows = candidates(engine.net_candidates(side, set(opts.exclude_topics)), moves, side)
    extra: list[tuple] = []
    for b in sorted(over, key=lambda b: (-over[b], b)):
        for x in sorted(rows[b], key=lambda x: (x.via < 0, x.size, x.key)):
            if s.count[b] <= cap:
                break
            dst = min((r for r in s.receivers if _takes(s, x, r)), key=lambda r: (s.count[r], r), default=None)
            if dst is not None:
                extra += s.apply(x, dst)
    return with_pass(moves, s, extra)


def _count_state(brokers: dict[int, BrokerInfo], t: Targets, before: Loads, moves: Any,
                 hard_cap: dict[int, float], opts: Any) -> NetState:
    """The limits a count move keeps: the disk's hard cap only (a hard goal ranks above the disk
    goal), network in's tolerance when listed and every link cap."""
    byt, net = mid_loads(before, moves)
    net_tol = opts.network_in_tolerance if opts.balance_network_in else math.inf
    s = net_state(brokers, t, byt, net, hard_cap, net_tol, math.inf)
    if s is None:  # no produce rate
        s = NetState(dict(byt), {b: net.get(b, 0.0) for b in brokers}, math.inf,
                     {b: hard_cap[b] for b in t.placeable}, set(t.receivers),
                     {b: x.rack for b, x in brokers.items()}, 0.0)
    return keep_counts(s, before, moves, opts.max_replicas_per_broker)


def _takes(s: NetState, x: Any, r: int) -> bool:
    return s.count_ok(r) and x.size <= s.room(r) and s.net[r] + x.rate <= s.lim(r) and s.may_take(x, r)


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
