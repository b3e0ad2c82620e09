"""The two lower bounds on a run's moving time under a KIP-73 throttle (the one definition of each).

* The *fixed-leader bound* (:func:`throttle_bound`): each new replica copies from the leader the
  partition had when the run was prepared; the busiest broker's bytes in (as a new replica,
  or moved between its own log dirs) or out (as that leader), divided by its throttle.
* The *source-free bound* (:func:`source_free_bound`): a follower fetches from whichever
  replica leads the partition, and leadership can move, even in the middle of a copy (the
  follower goes on fetching from the new leader at the offset it reached). So any in-sync
  replica of a step's current replica set may serve the step's bytes, and one copy's bytes may
  be split between several of them: the fractional problem is the physical one. Bytes in are
  fixed per broker; bytes out are a transportation problem (copies -> candidate sources, a
  broker sending at most ``T x`` its throttle), and the least feasible ``T`` is
  ``max over broker sets U of (bytes that can only come from U) / (sum of U's throttles)``
  (Hall's condition for supply and demand). It is computed exactly by Newton's method on that
  ratio: a max-flow at ``T`` either carries every byte (``T`` is the bound) or its minimum cut
  names a set ``U`` whose ratio is larger, the next ``T``. Copies with the same candidate
  set are merged first, so plans of 100k steps stay quick.

No schedule beats either bound; the source-free one is never above the fixed-leader one (the
prepare-time leader is one of a step's candidates), and where they differ a run could go faster
by moving leadership off the busiest sender.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Protocol, Sequence

from kafka_reassign.planning.maxflow import FlowNetwork

INF = math.inf
#: A max-flow at ``T`` that carries this share of the bytes counts as feasible.
FEASIBLE = 1.0 - 1e-9
#: Newton steps that raise ``T`` by less than this (relative) are float noise: the bound is reached.
STEP_TOLERANCE = 1e-12
#: Newton steps allowed (each raises ``T`` to a larger set ratio; a handful is usual).
MAX_NEWTON_STEPS = 200


class CopyLoad(Protocol):
    """What the bounds read of one step (:class:`~kafka_reassign.planning.estimate.StepLoad` has it)."""

    @property
    def leader(self) -> int: ...

    @property
    def adding(self) -> tuple[int, ...]: ...

    @property
    def size_bytes(self) -> int: ...

    @property
    def dir_brokers(self) -> tuple[int, ...]: ...

    @property
    def sources(self) -> tuple[int, ...]: ...


class BrokerLimits(Protocol):
    """Per-broker rates (:class:`~kafka_reassign.planning.estimate.Limits` has them)."""

    def throttle(self, broker: int) -> float: ...

    def capacity(self, broker: int) -> float: ...


@dataclass(frozen=True)
class Bound:
    """A lower bound on the moving time and what sets it.

    :param seconds: the bound (0: nothing to copy; ``inf``: a copy has no broker that may send it)
    :param broker: the broker that sets it (for a set of senders: the one with the highest rate)
    :param side: ``in`` (its bytes received) or ``out`` (bytes sent); empty when nothing is copied
    :param brokers: for the source-free bound's ``out`` side, every broker of the set whose
        shared sending sets it
    """

    seconds: float
    broker: int | None = None
    side: str = ""
    brokers: tuple[int, ...] = ()

    def describe(self) -> str:
        """``(broker 4 in)`` or ``(brokers 1, 2, 3 out)``; empty when nothing sets it."""
        if len(self.brokers) > 1:
            shown = ", ".join(str(b) for b in self.brokers[:6]) + (", ..." if len(self.brokers) > 6 else "")
            return f"(brokers {shown} {self.side})"
        return f"(broker {self.broker} {self.side})" if self.broker is not None else ""


@dataclass(frozen=True)
class Copy:
    """One step's copies as plain data, for callers without a ClusterState (benchmarks, the demo).

    :param leader: the broker the fixed-leader bound sends from
    :param adding: brokers receiving a new replica
    :param size_bytes: bytes each new replica copies
    :param sources: replicas that may send them (in sync); empty: the leader only
    :param dir_brokers: brokers moving the replica between their own log dirs
    """

    leader: int
    adding: tuple[int, ...]
    size_bytes: int
    sources: tuple[int, ...] = ()
    dir_brokers: tuple[int, ...] = ()


@dataclass(frozen=True)
class UniformLimits:
    """One throttle on every broker and no network cap (the benchmarks' and the demo's bounds).

    :param rate: bytes/s
    """

    rate: float

    def throttle(self, broker: int) -> float:
        return self.rate

    def capacity(self, broker: int) -> float:
        return INF


def partition_copy(current: Sequence[int], target: Sequence[int], size_bytes: int, leader: int,
                   isr: Iterable[int] | None = None) -> Copy:
    """The copies of one partition move from ``current`` to ``target``.

    :param leader: the leader now (the fixed-leader bound's sender)
    :param isr: the in-sync replicas (None: unknown, every current replica may send)
    """
    in_sync = None if isr is None else set(isr)
    return Copy(leader=leader, adding=tuple(b for b in target if b not in current), size_bytes=int(size_bytes),
                sources=tuple(b for b in current if in_sync is None or b in in_sync))


def _rate(limits: BrokerLimits, broker: int) -> float:
    return min(limits.throttle(broker), limits.capacity(broker))


def _busiest(sides: Sequence[tuple[str, dict[int, float]]], limits: BrokerLimits) -> Bound:
    best = Bound(0.0)
    for side, moved in sides:
        for b, n in moved.items():
            rate = _rate(limits, b)
            secs = n / rate if rate > 0 else INF
            if secs > best.seconds:
                best = Bound(secs, b, side)
    return best


def _inbound(loads: Iterable[CopyLoad]) -> dict[int, float]:
    moved_in: dict[int, float] = {}
    for ld in loads:
        for b in (*ld.adding, *ld.dir_brokers):
            moved_in[b] = moved_in.get(b, 0.0) + ld.size_bytes
    return moved_in


def throttle_bound(loads: Iterable[CopyLoad], limits: BrokerLimits) -> Bound:
    """The fixed-leader bound: busiest broker's bytes in or out (as the step's leader) / its throttle.

    :param loads: the run's steps
    :param limits: per-broker throttles and network capacities
    """
    loads = list(loads)
    moved_out: dict[int, float] = {}
    for ld in loads:
        if ld.adding:
            moved_out[ld.leader] = moved_out.get(ld.leader, 0.0) + ld.size_bytes * len(ld.adding)
    return _busiest([("in", _inbound(loads)), ("out", moved_out)], limits)


def source_free_bound(loads: Iterable[CopyLoad], limits: BrokerLimits) -> Bound:
    """The source-free bound: any in-sync replica of a step's current set may send its bytes, split
    between them at will (leadership can move mid-copy). Exact; see the module docstring.

    :param loads: the run's steps (``sources``: the in-sync current replicas; the leader always counts)
    :param limits: per-broker throttles and network capacities
    """
    loads = list(loads)
    inbound = _busiest([("in", _inbound(loads))], limits)
    groups: dict[tuple[int, ...], float] = {}
    for ld in loads:
        if ld.adding and ld.size_bytes > 0:
            key = tuple(sorted({ld.leader, *ld.sources}))
            groups[key] = groups.get(key, 0.0) + ld.size_bytes * len(ld.adding)
    # Each broker's rate once, in the order the groups first name them (a hundred thousand groups
    # name the same few hundred brokers).
    rates = {b: _rate(limits, b) for b in dict.fromkeys(b for key in groups for b in key)}
    # A copy an unthrottled broker may send costs no time; one nobody may send never finishes.
    if any(math.isinf(r) for r in rates.values()):
        groups = {k: d for k, d in groups.items() if not any(math.isinf(rates[b]) for b in k)}
    if any(r <= 0 for r in rates.values()):
        for key in groups:
            if all(rates[b] <= 0 for b in key):
                return Bound(INF, key[0], "out", key)
    outbound = _least_outbound(groups, rates, inbound.seconds)
    return inbound if outbound is None else outbound


def _set_ratio(groups: dict[tuple[int, ...], float], rates: dict[int, float], brokers: set[int]) -> float:
    """Bytes that only ``brokers`` may send / their summed rate (Hall's ratio of the set)."""
    demand = sum(d for k, d in groups.items() if all(b in brokers for b in k))
    rate = sum(rates[b] for b in brokers)
    return demand / rate if rate > 0 else INF


def _least_outbound(groups: dict[tuple[int, ...], float], rates: dict[int, float], floor: float) -> Bound | None:
    """The least ``T >= floor`` at which every group's bytes fit its senders at ``T x`` their rates.

    :returns: the outbound bound, or None when ``floor`` (the inbound bound) already fits
    """
    if not groups:
        return None
    net = _SendingNetwork(groups, rates)
    senders: set[int] | None = None
    t = floor
    everyone = set(rates)
    if _set_ratio(groups, rates, everyone) > floor:
        t, senders = _set_ratio(groups, rates, everyone), everyone
    for _ in range(MAX_NEWTON_STEPS):
        cut = net.short_set(t)
        if cut is None:
            break
        better = _set_ratio(groups, rates, cut)
        if better <= t * (1 + STEP_TOLERANCE):
            break
        t, senders = better, cut
    if senders is None:
        return None
    who = tuple(sorted(senders))
    return Bound(t, max(who, key=lambda b: (rates[b], -b)), "out", who)


class _SendingNetwork:
    """source -> copy group (its bytes) -> candidate senders -> sink (``T x`` the sender's rate).

    Capacities are divided by the total bytes, so a feasible ``T`` carries a flow of 1.
    """

    def __init__(self, groups: dict[tuple[int, ...], float], rates: dict[int, float]) -> None:
        self.total = sum(groups.values())
        self.brokers = sorted(rates)
        node = {b: 2 + len(groups) + i for i, b in enumerate(self.brokers)}
        self.net = FlowNetwork(2 + len(groups) + len(self.brokers))
        # Fewest candidates first: the greedy start fills the copies with least choice first.
        self.groups = sorted(groups.items(), key=lambda kv: len(kv[0]))
        self.edges: list[tuple[int, list[tuple[int, int]]]] = []
        for g, (key, demand) in enumerate(self.groups):
            share = demand / self.total
            self.edges.append((self.net.add_edge(0, 2 + g, share),
                               [(b, self.net.add_edge(2 + g, node[b], share)) for b in key]))
        self.sink = {b: self.net.add_edge(node[b], 1, 0.0) for b in self.brokers}
        self.node_broker = {n: b for b, n in node.items()}
        self.base = list(self.net.cap)
        self.rates = rates

    def short_set(self, t: float) -> set[int] | None:
        """None when every byte fits at ``T = t``; else the senders on the source side of a minimum cut."""
        caps = list(self.base)
        for b, e in self.sink.items():
            caps[e] = t * self.rates[b] / self.total
        self.net.reset(caps)
        flow = self._greedy() + self.net.max_flow(0, 1)
        if flow >= FEASIBLE:
            return None
        reach = self.net.reachable(0)
        return {b for n, b in self.node_broker.items() if n in reach}

    def _greedy(self) -> float:
        """Fill each group's senders, roomiest first: max-flow then only repairs the rest."""
        cap, pushed = self.net.cap, 0.0
        for (_key, demand), (e_in, outs) in zip(self.groups, self.edges):
            left = demand / self.total
            for b, e in sorted(outs, key=lambda be: -cap[self.sink[be[0]]]):
                amount = min(left, cap[self.sink[b]])
                if amount <= 0:
                    break
                for edge in (e_in, e, self.sink[b]):
                    self.net.push(edge, amount)
                left -= amount
                pushed += amount
                if left <= 0:
                    break
        return pushed
