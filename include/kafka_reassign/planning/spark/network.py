"""The network-in goal (Cruise Control's NetworkInboundUsageDistributionGoal): after the disk
search, replicas of hot partitions leave the brokers that receive the most produce traffic.

Network in of a broker = the produce rate of every replica it holds, as leader or follower. A
broker above ``mean x (1 + network_in_tolerance)`` (the *upper limit*, mean over live brokers)
sheds its replicas with the most produce rate per byte first, each to the receiver with the
least network in that stays under the limit:

* a plain move when the receiver has disk room, else
* a swap: the receiver sends back a replica of about the same size and a lower rate, so both
  brokers' bytes stay put.

A replica the disk search is already moving onto a hot broker is redirected instead (the move
gets another receiver: no extra copy), so the two goals share one set of copies where they can.
A move that copies data must pay for it: the produce rate it shifts is at least twice the
cluster's mean rate per byte times the bytes it copies (moving replicas of about average rate
per byte only trades disk for network in, e.g. on unequal disks).

It never undoes the disk goal: no broker ends above the fullest utilisation the disk search left
or half the balance tolerance above the mean, whichever is higher (never above ``1 +
balance_tolerance`` times the mean, nor its hard cap), so disk stays within its tolerance. Every rule of the search holds: a broker never gets a second replica of
a partition, a partition never spans fewer racks, only the goal's receivers gain replicas
(placeable brokers; add-brokers: the new ones), excluded topics stay, and a replica the disk
search moved is only redirected, and each replica moves at most once. It runs on the driver over the moves and a few candidate
replicas per broker (:meth:`~.data.SparkData.net_candidates`) and the search's own moves, so both
engines give one plan;
a snapshot without produce rates skips it (the plan is the disk goal's alone).

Candidates (``CANDIDATE_ORDER``): on a hot broker, highest rate / size first (most traffic per
byte copied), then smallest; on a cold broker, lowest rate / size first (partners of every size,
the coldest per byte), then smallest.
"""
from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

from kafka_reassign.planning.goal_order import ranks_above
from kafka_reassign.planning.spark.loads import Loads
from kafka_reassign.planning.spark.network_capacity import known_links, limits
from kafka_reassign.planning.spark.search import MOVE_COLUMNS
from kafka_reassign.planning.spark.targets import BrokerInfo, Targets

CANDIDATE_ORDER = ("hot: -rate/max(size, 1), size, topic, partition; cold: rate/max(size, 1), size, topic, partition; "
                   "large: -size, size, topic, partition")
#: candidate replicas fetched per cold broker (partners for swaps), and at least per hot broker
PER_BROKER = 400
SWEEPS = 8
#: a copy must shift this many times the cluster's mean produce rate per byte it copies
WORTH = 2.0
#: swap partners looked at on each side of the replica's size, per receiver (every receiver
#: under the limit is tried, least network in first: a cap there left hot brokers stuck)
SWAP_SCAN = 16
#: a hot broker gives up for the sweep after this many candidates in a row fit nowhere (the
#: next ones carry less rate per byte; e.g. unequal disks whose network in cannot even out)
MAX_MISSES = 16


@dataclass(eq=False)
class Replica:
    """A replica the pass may move; ``via`` >= 0: the search already moves it (row of its moves)."""

    topic: str
    partition: int
    pos: int
    broker: int
    size: float
    rate: float
    replicas: tuple[int, ...]  # after the search's moves of the partition
    orig: tuple[int, ...]      # in the snapshot
    via: int = -1

    @property
    def key(self) -> tuple[str, int, int]:
        return self.topic, self.partition, self.pos

    def copied(self) -> float:
        """Bytes a move of it adds to the plan (a redirected search move adds none)."""
        return 0.0 if self.via >= 0 else self.size


@dataclass
class NetState:
    """Per-broker bytes and network in while the pass runs, and each broker's byte ceiling.

    :param upper: network in no broker may be pushed above (and hot brokers shed down to)
    :param ceil: bytes a broker may hold at most after the pass
    :param receivers: brokers that may gain a replica
    :param density: the cluster's produce rate per byte (what a copied byte must shift at least)
    :param caps: broker -> its network-in limit where not ``upper`` (by link speed, and the
        network-capacity goal's cap where lower)
    :param links: broker -> its network-capacity cap alone (the rule)
    :param by_link: the network-in limits are shares by link speed (every live broker's is known)
    :param count: replicas per broker, kept when ``max_count`` is set (the replica-capacity goal)
    :param hard: bytes a broker may hold at most whatever the disk balance (the capacity goal's):
        the room of a move off a broker above its link cap (a rule ranks above the disk goal)
    """

    bytes: dict[int, float]
    net: dict[int, float]
    upper: float
    ceil: dict[int, float]
    receivers: set[int]
    rack: dict[int, str]
    density: float
    caps: dict[int, float] = field(default_factory=dict)
    count: dict[int, int] = field(default_factory=dict)
    max_count: float = math.inf
    hard: dict[int, float] = field(default_factory=dict)
    links: dict[int, float] = field(default_factory=dict)
    by_link: bool = False
    touched: set[tuple[str, int, int]] = field(default_factory=set)
    now: dict[tuple[str, int], tuple[int, ...]] = field(default_factory=dict)
    redirect: dict[int, int] = field(default_factory=dict)

    def may_take(self, r: Replica, b: int) -> bool:
        """Broker ``b`` may receive ``r``: a receiver that holds the partition at no point (the
        snapshot, the search's moves, this pass's), into ``r``'s rack or a rack the partition
        never uses: the leader stage applies a partition's moves one by one in position order,
        and no order then loses a rack or repeats a broker."""
        now = self.now.get((r.topic, r.partition), r.replicas)
        if b not in self.receivers or b in now or b in r.orig or r.key in self.touched:
            return False
        rack = self.rack[b]
        return rack == self.rack[r.broker] or rack not in {self.rack[x] for x in now + r.orig}

    def count_ok(self, b: int) -> bool:
        """Broker ``b`` may gain a replica (the replica-capacity goal; swaps keep counts)."""
        return self.count.get(b, 0) < self.max_count

    def lim(self, b: int) -> float:
        """Network in broker ``b`` may not be pushed above (and sheds down to)."""
        return self.caps.get(b, self.upper)

    def worth(self, gain: float, copied: float, a: int | None = None) -> bool:
        """Shifting ``gain`` is worth copying ``copied`` bytes; any gain is, off a broker ``a`` above
        a limit of its own (its link cap, a rule; or its share by link speed, where brokers of
        faster links should carry more rate per byte than the mean)."""
        if a is not None and a in self.caps and self.net[a] > self.caps[a]:
            return gain > 0
        return gain > 0 and gain >= WORTH * copied * self.density

    def room(self, b: int, rule: bool = False) -> float:
        """Bytes ``b`` may still take: within the disk limits, or for a rule only the hard cap."""
        return (self.hard.get(b, self.ceil[b]) if rule else self.ceil[b]) - self.bytes[b]

    def over_cap(self, a: int) -> bool:
        """Broker ``a`` is above its network-capacity cap."""
        return a in self.links and self.net[a] > self.links[a]

    def net_lim(self, b: int, rule: bool) -> float:
        """Network in ``b`` may reach: its limit, or moving for a rule its link cap alone (a rule
        ranks above the network-in goal)."""
        return self.links.get(b, math.inf) if rule else self.lim(b)

    def apply(self, r: Replica, dst: int) -> list[tuple]:
        """Move ``r`` to ``dst`` in the counters; the new move row (none for a redirect)."""
        self.bytes[r.broker] -= r.size
        self.net[r.broker] -= r.rate
        self.bytes[dst] += r.size
        self.net[dst] += r.rate
        if self.count:
            self.count[r.broker] -= 1
            self.count[dst] = self.count.get(dst, 0) + 1
        self.touched.add(r.key)
        now = self.now.get((r.topic, r.partition), r.replicas)
        self.now[(r.topic, r.partition)] = now[:r.pos] + (dst,) + now[r.pos + 1:]
        if r.via >= 0:
            self.redirect[r.via] = dst
            return []
        return [(r.topic, r.partition, r.pos, r.broker, dst, r.size, r.rate, list(r.orig))]


def mid_loads(before: Loads, moves: Any) -> tuple[dict[int, float], dict[int, float]]:
    """Bytes and network in per broker after the disk search's moves.

    :param moves: the search's moves (search.MOVE_COLUMNS)
    """
    byt, net = dict(before.bytes), dict(before.net_in)
    for src, dst, size, rate in zip(*columns(moves, ("src", "dst", "size_bytes", "bytes_in_per_sec"))):
        byt[int(src)] -= float(size)
        byt[int(dst)] += float(size)
        net[int(src)] = net.get(int(src), 0.0) - float(rate)
        net[int(dst)] = net.get(int(dst), 0.0) + float(rate)
    return byt, net


def mid_counts(before: Loads, moves: Any) -> dict[int, int]:
    """Replicas per broker after the moves (search.MOVE_COLUMNS)."""
    count = dict(before.count)
    for src, dst in zip(*columns(moves, ("src", "dst"))):
        count[int(src)] = count.get(int(src), 0) - 1
        count[int(dst)] = count.get(int(dst), 0) + 1
    return count


def keep_counts(s: NetState, before: Loads, moves: Any, cap: int | None) -> NetState:
    """``s`` keeping the replica-capacity goal's cap (none: unchanged)."""
    if cap is not None:
        s.count, s.max_count = mid_counts(before, moves), cap
    return s


def disk_ceilings(brokers: dict[int, BrokerInfo], t: Targets, byt: dict[int, float], hard_cap: dict[int, float],
                  disk_tolerance: float) -> dict[int, float] | None:
    """Bytes each placeable broker may hold after a driver pass (None when no live broker or no data):
    the fullest utilisation the disk search left, or half the tolerance if that is higher (the
    search's own "balanced" band: room for swaps of unequal sizes, disk still within tolerance),
    never above ``1 + disk_tolerance`` times the mean nor the hard cap; a broker already above
    keeps what it holds. The later passes (:mod:`.spread`) use the same limits.

    :param byt: bytes per broker after the moves so far
    :param disk_tolerance: balance_tolerance, or inf when the pass ranks above the disk goal
    """
    live = [b for b, x in brokers.items() if x.alive and b not in t.drained]
    cap = sum(brokers[b].capacity for b in live)
    total_bytes = sum(byt[b] for b in live)
    if cap <= 0 or total_bytes <= 0:
        return None
    mean_util = total_bytes / cap
    top_util = min(max(max(byt[b] / brokers[b].capacity for b in live), mean_util * (1 + disk_tolerance / 2)),
                   mean_util * (1 + disk_tolerance))
    return {b: min(hard_cap[b], max(byt[b], top_util * brokers[b].capacity)) for b in t.placeable}


def net_state(brokers: dict[int, BrokerInfo], t: Targets, byt: dict[int, float], net: dict[int, float],
              hard_cap: dict[int, float], tolerance: float, disk_tolerance: float) -> NetState | None:
    """The pass's state, or None when there is no produce rate or no live broker."""
    live = [b for b, x in brokers.items() if x.alive and b not in t.drained]
    total_net = sum(net.get(b, 0.0) for b in live)
    ceil = disk_ceilings(brokers, t, byt, hard_cap, disk_tolerance)
    if total_net <= 0 or ceil is None:
        return None
    total_bytes = sum(byt[b] for b in live)
    upper, per = in_limits(brokers, live, total_net, tolerance)
    by_link = bool(per)
    for b, x in brokers.items():  # the network-capacity goal's caps, where lower
        if x.link_limit is not None and x.link_limit < per.get(b, upper):
            per[b] = x.link_limit
    return NetState(dict(byt), {b: net.get(b, 0.0) for b in brokers}, upper, ceil, set(t.receivers),
                    {b: x.rack for b, x in brokers.items()}, total_net / total_bytes, per,
                    hard={b: hard_cap[b] for b in ceil},
                    links=limits(brokers), by_link=by_link)


def in_limits(brokers: dict[int, BrokerInfo], live: list[int], total: float,
              tolerance: float) -> tuple[float, dict[int, float]]:
    """The network-in goal's limit: (mean x (1 + tolerance), {}), or with every live broker's link
    speed known, each one's share of ``total`` by link speed x (1 + tolerance) (Cruise Control's
    usage goals even utilisation of a capacity): (that, broker -> its limit)."""
    upper = total / len(live) * (1 + tolerance)
    links = known_links(brokers, live)
    if not links:
        return upper, {}
    util = total / sum(links.values()) * (1 + tolerance)
    return upper, {b: util * x.link for b, x in brokers.items() if x.link}


def hot_candidates(count: int, net: float, upper: float) -> int:
    """Candidates to fetch for a hot broker: twice the share of its replicas that carries the
    produce it must shed (its densest come first, so fewer usually do), at least PER_BROKER."""
    return max(PER_BROKER, min(count, math.ceil(2 * count * (net - upper) / net)))


def search_moves(moves: Any) -> dict[tuple[str, int], dict[int, int]]:
    """(topic, partition) -> {position: new broker} of the search's moves."""
    out: dict[tuple[str, int], dict[int, int]] = {}
    for t, p, pos, dst in zip(*columns(moves, ("topic", "partition", "pos", "dst"))):
        out.setdefault((str(t), int(p)), {})[int(pos)] = int(dst)
    return out


def _after(orig: tuple[int, ...], done: dict[int, int]) -> tuple[int, ...]:
    if not done:
        return orig
    out = list(orig)
    for i, b in done.items():
        if 0 <= i < len(out):
            out[i] = b
    return tuple(out)


def candidates(frame: Any, moves: Any, side: dict[int, Any], moved: dict[tuple[str, int], dict[int, int]] | None = None,
               onto: dict[int, list[Replica]] | None = None) -> dict[int, list[Replica]]:
    """Per broker of ``side``: the engine's candidates (a replica the search moves itself left
    out) and the search's moves onto it (``via``).

    :param frame: the engine's candidates (data.NET_COLUMNS)
    :param moved: :func:`search_moves` of ``moves`` when the caller has it (made once per pass)
    :param onto: receiver -> :func:`move_replicas` onto it, when the caller has them
    """
    moved = search_moves(moves) if moved is None else moved
    out: dict[int, list[Replica]] = {b: [] for b in side}
    # plain lists, not pandas' per-element iteration: the moves run to 800,000 rows at 3M replicas
    for t, p, pos, b, size, rate, reps in zip(*columns(frame, ("topic", "partition", "pos", "broker",
                                                                 "size_bytes", "rate", "replicas"))):
        orig = tuple(map(int, reps))
        done = moved.get((str(t), int(p)), {})
        if int(pos) not in done:
            out[int(b)].append(Replica(str(t), int(p), int(pos), int(b), float(size), float(rate),
                                       _after(orig, done), orig))
    if onto is None:
        for r in move_replicas(moves, moved, _rows_into(moves, side)):
            out[r.broker].append(r)
    else:
        for b in side:
            out[b] += onto.get(b, [])
    return out


def move_replicas(moves: Any, moved: dict[tuple[str, int], dict[int, int]],
                  rows: list[int] | None = None) -> list[Replica]:
    """The moves' replicas on their receivers (``via``: the row), of ``rows`` (by position) or all.

    :param moved: :func:`search_moves` of ``moves``
    """
    rows = list(range(len(moves))) if rows is None else rows
    cols = columns(moves, ("topic", "partition", "pos", "dst", "size_bytes", "bytes_in_per_sec", "replicas"), rows)
    out = []
    for i, t, p, pos, dst, size, rate, reps in zip(rows, *cols):
        orig = tuple(map(int, reps))
        out.append(Replica(str(t), int(p), int(pos), int(dst), float(size), float(rate),
                           _after(orig, moved[(str(t), int(p))]), orig, i))
    return out


def _rows_into(moves: Any, side: dict[int, Any]) -> list[int]:
    """Positions of the move rows whose receiver is in ``side``, in order."""
    import numpy as np

    dst = np.asarray(moves["dst"], dtype=np.int64)
    return np.flatnonzero(np.isin(dst, np.array(list(side), dtype=np.int64))).tolist()


def columns(frame: Any, names: tuple[str, ...], rows: list[int] | None = None) -> list[list]:
    """``frame``'s columns (a DataFrame's or a dict's of lists) as lists: only ``rows``, by
    position, when given. Per element, iterating a pandas column (Arrow-backed strings, lists)
    costs a call; a whole column to a list costs one (the driver reads moves-sized frames)."""
    out = []
    for c in names:
        col = frame[c]
        if hasattr(col, "to_numpy"):
            out.append((col.to_numpy() if rows is None else col.to_numpy()[rows]).tolist())
        else:
            out.append(list(col) if rows is None else [col[i] for i in rows])
    return out


def _plain(s: NetState, x: Replica, order: list[int]) -> int | None:
    """The receiver with the least network in that takes ``x`` as it is (disk room, under the limit)."""
    if not s.worth(x.rate, x.copied(), x.broker):
        return None
    rule = s.over_cap(x.broker)
    for b in order:
        if s.net[b] + x.rate <= s.net_lim(b, rule) and x.size <= s.room(b, rule) and s.may_take(x, b) \
                and s.count_ok(b):
            return b
    return None


@dataclass
class Pool:
    """A cold broker's candidates sorted by size (entries stay; moved ones fail ``may_take``)."""

    items: list[Replica]
    sizes: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.items.sort(key=lambda y: (y.size, y.via < 0, y.rate, y.topic, y.partition, y.pos))
        self.sizes = [y.size for y in self.items]

    def near(self, size: float) -> list[Replica]:
        """Up to 2 x SWAP_SCAN entries around ``size``, closest first."""
        mid = bisect_left(self.sizes, size)
        window = self.items[max(0, mid - SWAP_SCAN):mid + SWAP_SCAN]
        return sorted(window, key=lambda y: (abs(y.size - size), y.size))


def _swap(s: NetState, x: Replica, order: list[int], pools: dict[int, Pool]) -> tuple[int, Replica | None] | None:
    """(receiver, replica it sends back): the partner of a lower rate closest in size to ``x``
    that keeps both brokers under their byte ceilings and the receiver under the network limit
    (closest, so both keep their disk room for the next swaps)."""
    a = x.broker
    for b in order:
        if b not in pools or not s.may_take(x, b):
            continue
        rule = s.over_cap(a)
        lo, hi = x.size - s.room(b, rule), x.size + s.room(a, rule)
        for y in pools[b].near(x.size):
            if lo <= y.size <= hi and s.net[b] + x.rate - y.rate <= s.net_lim(b, rule) \
                    and s.worth(x.rate - y.rate, x.copied() + y.copied(), a) and s.may_take(y, a):
                return b, y
    return None


def _shed(s: NetState, a: int, xs: list[Replica], pools: dict[int, Pool]) -> list[tuple]:
    """One sweep of hot broker ``a``'s candidates: moves and swaps until it is under the limit."""
    out: list[tuple] = []
    misses = 0
    for x in xs:
        if s.net[a] <= s.lim(a) or misses >= MAX_MISSES:
            break
        if x.key in s.touched or not s.worth(x.rate, 0.0):
            continue
        rule = s.over_cap(a)
        order = sorted((b for b in pools if s.net[b] < s.net_lim(b, rule)), key=lambda b: (s.net[b], b))
        dst = _plain(s, x, order)
        hit = (dst, None) if dst is not None else _swap(s, x, order, pools)
        if hit is None:
            misses += 1
            continue
        misses = 0
        out += s.apply(x, hit[0]) + (s.apply(hit[1], a) if hit[1] is not None else [])
    return out


def balance_network(s: NetState, hot: dict[int, list[Replica]], cold: dict[int, list[Replica]]) -> list[tuple]:
    """The pass's new move rows (search.MOVE_COLUMNS; redirects go to ``s.redirect``): sweeps
    over the hot brokers, hottest first, until a sweep changes nothing (a candidate that fitted
    nowhere may fit once other swaps freed disk room).

    :param hot: hot broker -> its candidates (redirects first, then by rate per byte)
    :param cold: cold broker -> its candidates
    """
    pools = {b: Pool(list(rs)) for b, rs in cold.items()}
    order = {b: sorted(xs, key=lambda x: (x.via < 0, -x.rate / max(x.size, 1.0), x.size, x.topic, x.partition, x.pos))
             for b, xs in hot.items()}
    out: list[tuple] = []
    for _ in range(SWEEPS):
        done = len(out), len(s.redirect)
        for a in sorted(order, key=lambda b: (-s.net[b], b)):
            out += _shed(s, a, order[a], pools)
        if (len(out), len(s.redirect)) == done:
            break
    return out


def network_moves(engine: Any, brokers: dict[int, BrokerInfo], t: Targets, before: Loads, moves: Any,
                  hard_cap: dict[int, float], opts: Any) -> Any:
    """The search's moves, some redirected, plus the network-in pass's (unchanged when the pass
    is off, there is no produce rate, or no broker is above the limit).

    :param engine: SparkData or LocalData (for the candidate replicas)
    :param opts: PlanOptions (balance_network_in, network_in_tolerance, balance_tolerance, exclude_topics)
    """
    # the network-capacity goal is a rule: its limits hold with network-in off too
    if not opts.balance_network_in and not limits(brokers):
        return moves
    byt, net = mid_loads(before, moves)
    # listed above disk, network in is bound by the capacity ceiling only (goal_order)
    disk_tol = opts.balance_tolerance if ranks_above(opts.balance_goals, "disk", "network-in") else math.inf
    tolerance = opts.network_in_tolerance if opts.balance_network_in else math.inf
    s = net_state(brokers, t, byt, net, hard_cap, tolerance, disk_tol)
    if s is None:
        return moves
    keep_counts(s, before, moves, opts.max_replicas_per_broker)
    hot = [b for b in t.placeable if s.net[b] > s.lim(b)]
    if not hot:
        return moves
    side = {b: ("cold", PER_BROKER) for b in s.receivers if s.net[b] < s.lim(b)}
    side.update({b: ("hot", hot_candidates(before.count.get(b, 0), s.net[b], s.lim(b))) for b in hot})
    rows = candidates(engine.net_candidates(side, set(opts.exclude_topics)), moves, side)
    extra = balance_network(s, {b: rows[b] for b in hot}, {b: rs for b, rs in rows.items() if side[b][0] == "cold"})
    undo_over_limit(s, {b: rows[b] for b in hot}, before.net_in)
    return with_pass(moves, s, extra)


def undo_over_limit(s: NetState, hot: dict[int, list[Replica]], was: dict[int, float]) -> None:
    """Brokers the search's moves left above a limit of their own get back under it by cancelling
    those moves, hottest first (the replica stays on its source): above the network-capacity cap
    (a rule: down to it or to what it carried before, its source within the disk's hard cap), or
    with limits by link speed above its share (its source within the disk goal's limits; with one
    limit for all the pass's moves and swaps do it, and the disk search's plan stands)."""
    for b, xs in hot.items():
        rule = s.over_cap(b)
        if not rule and not s.by_link:
            continue
        limit = max(s.links[b], was.get(b, 0.0)) if rule else s.lim(b)
        for x in sorted((x for x in xs if x.via >= 0 and x.key not in s.touched), key=lambda x: (-x.rate, x.key)):
            if s.net[b] <= limit:
                break
            src = x.orig[x.pos]
            if src in s.ceil and x.size <= s.room(src, rule):  # never back onto a drained broker
                s.apply(x, src)


def with_pass(moves: Any, s: NetState, extra: list[tuple]) -> Any:
    """The moves with a driver pass's redirects (``s.redirect``; one back to its source cancels
    the move) and new rows (search.MOVE_COLUMNS)."""
    import pandas as pd

    if not extra and not s.redirect:
        return moves
    moves = moves.copy()
    for i, dst in s.redirect.items():
        moves.iat[i, moves.columns.get_loc("dst")] = dst
    moves = moves[moves["src"] != moves["dst"]]
    return pd.concat([moves, pd.DataFrame(extra, columns=list(MOVE_COLUMNS))], ignore_index=True)
