"""The plan summary's lower bound under the listed data goals together (disk, network-in,
topic-spread): per broker, the least bytes it must give up for each goal's accepted balance.

Proof. The balancing goals keep each partition's replica count and size, so a plan copies
exactly the bytes it removes: ``copied = sum over brokers b of bytes(R_b)``, ``R_b`` the replicas
``b`` holds in the snapshot and not after the plan (:func:`.targets.accepted_lower_bound`). For a
plan that reaches a goal's accepted balance, each ``R_b`` meets that goal's condition:

* disk: ``bytes(R_b) >= D_b = max(0, load_b - edge_b)`` (:func:`.targets.disk_excess`): what
  ``b`` gains only raises its load;
* network-in, limit ``L = mean x (1 + network_in_tolerance)``, mean over live brokers of the
  produce they receive once drained brokers are empty: ``b`` ends at ``net_b - rate(R_b) +
  rate(gained) <= L``, so ``rate(R_b) >= net_b - L``. ``R_b`` is a set of ``b``'s movable replicas
  (excluded topics never move); the least bytes of such a set is at least the fractional
  knapsack ``N_b`` (its linear relaxation: replicas by rate per byte, highest first, the last one
  in part; :func:`least_bytes_for_rate`);
* topic-spread: a crowded pair (topic ``t`` on ``b``, ``n`` replicas above ``even_t + slack``)
  ends within it, so ``R_b`` holds at least ``k = n - even_t - slack`` replicas of ``t`` (a
  replica gained only raises the count; ``even_t`` does not change, replica counts are kept), at
  least the bytes of its ``k`` smallest there; topics are disjoint, so ``bytes(R_b) >= S_b`` =
  that sum over ``b``'s crowded topics.

Hence ``bytes(R_b) >= max(D_b, N_b, S_b)`` over the goals reached and ``copied >= sum over b of
that max``. ``N_b`` is computed only where it may exceed ``D_b`` (:func:`goal_bounds`), so
``lower_bound_by_goal``'s network-in figure sums the brokers where it does (0 elsewhere). The terms are not added: one replica may serve every goal (a hot replica of a
crowded topic lowers the disk, network in and the topic's count at once), so only the max is
proven. Each term is 0 for a broker already within that goal's balance, and a goal not listed
has no term.

The summary counts the disk term always (as before; its ratio is null when the disk balance is
not reached) and the network-in and topic-spread terms only when the plan brings every broker
the term counts within that goal's limit (:meth:`GoalBounds.counted`): then the proof holds for
this plan and no plan doing as much copies less. A goal the plan cannot reach (network in on
unequal disks) keeps its own figure in ``lower_bound_by_goal`` but is left out of the joint one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

from kafka_reassign.planning.spark.loads import Loads
from kafka_reassign.planning.spark.network import columns, hot_candidates, in_limits
from kafka_reassign.planning.spark.spread import EvenShares, placeable_capacity
from kafka_reassign.planning.spark.targets import BrokerInfo, Targets, disk_excess

#: the network-in limit the term is against is this much above ``L`` (the summary's loads are
#: float sums in another order than the pass's): the same limit decides whether the term counts
LIMIT_EPS = 1e-9


@dataclass
class GoalBounds:
    """Each listed data goal's per-broker term (bytes a broker must give up), and the limits
    that decide whether a plan reaches the goal (see the module docstring).

    :param terms: goal name -> broker -> bytes
    :param net_limit: broker -> network in it may not end above when it has a network-in term
    :param allowed: crowded (topic, broker) -> the replicas it may keep (even + slack)
    """

    terms: dict[str, dict[int, float]]
    net_limit: dict[int, float] = field(default_factory=dict)
    allowed: dict[tuple[str, int], int] = field(default_factory=dict)

    def counted(self, after: Loads) -> list[str]:
        """The goals whose terms hold for the plan that ends at ``after`` (disk first, always)."""
        out = ["disk"]
        if "network-in" in self.terms and all(after.net_in.get(b, 0.0) <= self.net_limit[b]
                                              for b, x in self.terms["network-in"].items() if x > 0):
            out.append("network-in")
        if "topic-spread" in self.terms and all(after.topic_count.get(key, 0) <= n
                                                for key, n in self.allowed.items()):
            out.append("topic-spread")
        return out

    def joint(self, goals: Iterable[str]) -> float:
        """Sum over brokers of the largest term of ``goals``."""
        per: dict[int, float] = {}
        for g in goals:
            for b, x in self.terms[g].items():
                per[b] = max(per.get(b, 0.0), x)
        return sum(per.values())

    def by_goal(self) -> dict[str, int]:
        """Each goal's own bound (its terms summed), rounded to bytes."""
        return {g: round(sum(x.values())) for g, x in self.terms.items()}


def least_bytes_for_rate(items: Iterable[tuple[float, float]], need: float) -> float:
    """The fractional knapsack: the least bytes of (size, rate) items, the last one taken in
    part, whose rates add up to ``need`` (all their bytes when they fall short).

    :param items: (size bytes, produce rate) per replica
    """
    if need <= 0:
        return 0.0
    order = sorted((x for x in items if x[1] > 0), key=lambda x: (x[0] > 0, -x[1] / x[0] if x[0] > 0 else 0.0))
    total = 0.0
    for size, rate in order:
        if rate >= need:
            return total + size * need / rate
        total += size
        need -= rate
    return total


def network_limit(brokers: dict[int, BrokerInfo], t: Targets, net_in: dict[int, float],
                  tolerance: float) -> dict[int, float] | None:
    """Each broker's network-in limit the goal accepts (:func:`.network.in_limits`), with
    LIMIT_EPS (None: no produce rate known).

    :param tolerance: network_in_tolerance
    """
    live = [b for b, x in brokers.items() if x.alive and b not in t.drained]
    total = sum(net_in.get(b, 0.0) for b in set(live) | t.drained)  # drained brokers end empty
    if total <= 0 or not live:
        return None
    upper, per = in_limits(brokers, live, total, tolerance)
    return {b: per.get(b, upper) * (1 + LIMIT_EPS) for b in brokers}


def network_terms(engine: Any, before: Loads, hot: dict[int, float], exclude_topics: set[str]) -> dict[int, float]:
    """Hot broker -> ``N_b`` from its movable replicas in the engine's hot order (rate per
    byte, sizes under 1 byte counted as 1). A first fetch per broker as the network-in pass's;
    a broker whose fetch falls short of its need gets every replica. Replicas not fetched have
    no more rate per byte than the last fetched, except those under 1 byte, which could each
    save at most 1 byte: one byte per replica not fetched comes off.

    :param hot: broker -> produce rate it must shed
    """
    most = {b: hot_candidates(before.count.get(b, 0), before.net_in[b], before.net_in[b] - need)
            for b, need in hot.items()}  # the pass's first fetch: usually enough
    out: dict[int, float] = {}
    while most:
        rows = engine.net_candidates({b: ("hot", n) for b, n in most.items()}, exclude_topics)
        items: dict[int, list[tuple[float, float]]] = {b: [] for b in most}
        for b, size, rate in zip(rows["broker"], rows["size_bytes"], rows["rate"]):
            items[int(b)].append((float(size), float(rate)))
        again = {}
        for b, xs in items.items():
            more = len(xs) >= most[b] and most[b] < before.count.get(b, 0)
            if more and sum(r for _, r in xs) < hot[b]:
                again[b] = before.count[b]
                continue
            unseen = before.count.get(b, 0) - len(xs)
            out[b] = max(0.0, least_bytes_for_rate(xs, hot[b]) - unseen)
        most = again
    return out


def spread_terms(engine: Any, counts: dict[tuple[str, int], int], eligible: dict[int, float],
                 slack: int) -> tuple[dict[int, float], dict[tuple[str, int], int]]:
    """(broker -> ``S_b``, crowded pair -> replicas it may keep) from the crowded pairs' replicas.

    :param counts: (topic, broker) -> replicas in the snapshot (movable topics)
    :param eligible: the placeable brokers and their capacities
    """
    even = EvenShares(counts, eligible)
    allowed = {(tp, b): even.of(tp, b) + slack for (tp, b), n in counts.items()
               if b in eligible and n > even.of(tp, b) + slack}
    if not allowed:
        return {}, {}
    sizes: dict[tuple[str, int], list[float]] = {}
    rows = engine.topic_candidates(set(allowed))
    for tp, b, size in zip(*columns(rows, ("topic", "broker", "size_bytes"))):
        sizes.setdefault((str(tp), int(b)), []).append(float(size))
    out: dict[int, float] = {}
    for (tp, b), xs in sizes.items():
        k = counts[(tp, b)] - allowed[(tp, b)]
        out[b] = out.get(b, 0.0) + sum(sorted(xs)[:k])
    return out, allowed


def goal_bounds(engine: Any, brokers: dict[int, BrokerInfo], t: Targets, before: Loads, opts: Any) -> GoalBounds:
    """Each listed data goal's terms on the snapshot's loads (before any move).

    :param engine: SparkData or LocalData (replicas of the hot brokers and the crowded pairs)
    :param opts: PlanOptions (tolerances, slack, balance_network_in, balance_topic_spread)
    """
    out = GoalBounds({"disk": disk_excess(brokers, t, before.bytes, opts.balance_tolerance)})
    if opts.balance_network_in:
        limit = network_limit(brokers, t, before.net_in, opts.network_in_tolerance)
        out.net_limit = {b: math.inf for b in t.placeable} if limit is None else limit
        hot = {b: before.net_in.get(b, 0.0) - out.net_limit[b] for b in t.placeable
               if before.net_in.get(b, 0.0) > out.net_limit[b]}
        disk = out.terms["disk"]
        # the same share of every replica sheds ``need`` with need / net_b of b's bytes, so
        # N_b <= that; where D_b is at least as much the joint term is D_b without a fetch
        # (not with excluded topics: the share would be of the movable replicas only)
        hot = {b: need for b, need in hot.items()
               if opts.exclude_topics or disk.get(b, 0.0) < need * before.bytes[b] / before.net_in[b]}
        out.terms["network-in"] = network_terms(engine, before, hot, set(opts.exclude_topics)) if hot else {}
    if opts.balance_topic_spread:
        out.terms["topic-spread"], out.allowed = spread_terms(engine, before.topic_count,
                                                              placeable_capacity(brokers, t), opts.topic_spread_slack)
    return out
