"""The topic-spread goal (Cruise Control's TopicReplicaDistributionGoal): after the data passes,
no broker holds many more replicas of one topic than its even share.

A topic's even share is ``ceil(its replicas / placeable brokers)``, in proportion to the broker's
capacity when capacities differ (:class:`EvenShares`); a (topic, broker) pair above
``even + topic_spread_slack`` is *crowded*. The plan's topic spread (:func:`topic_spread`) is the
largest excess over even + slack (0: every topic within its slack), in the summary before and after.

For each crowded pair, the pass moves that many of the topic's replicas off the broker, each to a
receiver below even for the topic (fewest of the topic first, then least network in); what is
left then goes to receivers one more replica leaves within even + slack (on the benchmark's
hot-traffic shape receivers below even alone left a spread of 13):

* redirecting a move the search (or the network-in pass) already makes onto the broker: no extra copy;
* else a move already leaving the broker, of another topic and about the same size, carries it
  instead (the other replica stays): no extra copy;
* else a swap with a replica of another topic of about the same size on the receiver, going the
  other way (both brokers' bytes stay within their limits, the partner's topic not crowded by it);
* else a plain move, only where the receiver's disk stays within its limit;
* when swaps and moves leave a topic crowded, a relay: the replica goes to a receiver with network
  room but a full disk, and one of that receiver's largest replicas (of another topic) goes on to a
  third broker with disk and network room, below even for its topic (on the hot-traffic shape at 300
  brokers swaps left 13 pairs of two topics crowded, 9 of the hottest, 2.5x any other: no partner
  of a similar rate exists, and the crowded brokers already hold their share of every topic with
  replicas large enough to make the receivers' disk room).

It never undoes a higher goal: disk stays within the ceilings the network-in pass keeps
(:func:`.network.disk_ceilings`), and network in under its limit when network-in ranks higher
(a broker above it may only lose produce). Every rule of the network-in pass holds through its
:class:`~.network.NetState` (receivers only, racks, no broker twice, each replica moved once);
excluded topics are never candidates. Bounded: the engine returns the crowded pairs' replicas and
a few partners per receiver (:mod:`.spread_reads`, read in the background while the driver works;
used only when swaps are needed), and each receiver's largest replicas only when relays are; the
pass indexes them by (topic, broker). A replica that fit nowhere is retried only on the brokers a
move changed since, while its partition is unchanged (:mod:`.spread_misses`: the same moves as a
full retry).
"""
from __future__ import annotations

import math
from bisect import bisect_left
from typing import Any, Container, Iterable, Mapping, Sequence

from kafka_reassign.planning.goal_order import ranks_above
from kafka_reassign.planning.spark.loads import Loads
from kafka_reassign.planning.spark.network import (MAX_MISSES, SWEEPS, NetState, Pool, Replica, columns,
                                                   disk_ceilings, keep_counts, mid_loads, net_state, with_pass)
from kafka_reassign.planning.spark.spread_misses import Miss, Misses
from kafka_reassign.planning.spark.spread_order import ReceiverOrder
from kafka_reassign.planning.spark.spread_reads import Inputs, Reads
from kafka_reassign.planning.spark.targets import BrokerInfo, Targets

Counts = dict[tuple[str, int], int]
#: receivers (fewest of the topic first) a crowded replica looks for a swap partner on: every
#: receiver made the pass slow on large clusters for little gain
SWAP_RECEIVERS = 24
#: largest replicas read per receiver for relays (:meth:`Spread.relay`), only when swaps leave a
#: topic crowded: the few big enough to make a full receiver's disk room for a crowded replica
RELAY_PER_BROKER = 64


class EvenShares:
    """Each topic's even share on each placeable broker: ``ceil(its replicas x the broker's part
    of the placeable capacity x placeable brokers / placeable brokers)``, so a broker of twice the
    mean capacity, which the disk goal fills with twice the mean bytes, may hold twice as many
    replicas of a topic. Equal capacities (or any unknown): ``ceil(its replicas / placeable brokers)``
    on every broker.

    :param counts: (topic, broker) -> replicas (a topic's total is its replicas)
    :param capacity: placeable broker -> capacity in bytes (an iterable of ids: equal capacities)
    """

    def __init__(self, counts: Mapping[tuple[str, int], int], capacity: Mapping[int, float] | Iterable[int]) -> None:
        caps = dict(capacity) if isinstance(capacity, Mapping) else {int(b): 1.0 for b in capacity}
        self.brokers = max(len(caps), 1)
        total = sum(caps.values())
        self.equal = len(set(caps.values())) <= 1 or total <= 0 or min(caps.values()) <= 0
        self.weight = {} if self.equal else {b: c * len(caps) / total for b, c in caps.items()}
        self.totals: dict[str, int] = {}
        for (topic, _), n in counts.items():
            self.totals[topic] = self.totals.get(topic, 0) + n
        self.base = {t: math.ceil(n / self.brokers) for t, n in self.totals.items()}

    @classmethod
    def given(cls, shares: Mapping[str, int]) -> "EvenShares":
        """Equal shares set directly (topic -> share on every broker)."""
        out = cls({}, ())
        out.base = dict(shares)
        return out

    def __contains__(self, topic: object) -> bool:
        return topic in self.base

    def crowded(self, counts: Mapping[tuple[str, int], int], eligible: Container[int],
                slack: int) -> set[tuple[str, int]]:
        """The (topic, broker) pairs of ``counts`` (those the shares were made of) on an eligible
        broker above even + ``slack``."""
        if self.equal:  # one share per topic: looked up, not computed per pair (1.7M pairs at 3M)
            base = self.base
            return {(tp, b) for (tp, b), n in counts.items() if n > base[tp] + slack and b in eligible}
        return {(tp, b) for (tp, b), n in counts.items() if b in eligible and n > self.of(tp, b) + slack}

    def of(self, topic: str, b: int) -> int:
        """The topic's even share on broker ``b``."""
        if self.equal:
            return self.base[topic]
        # the tolerance keeps a share that is an integer in exact arithmetic from rounding up
        return math.ceil(self.totals[topic] * self.weight.get(b, 1.0) / self.brokers - 1e-9)


def topic_spread(counts: Mapping[tuple[str, int], int], eligible: Mapping[int, float] | Iterable[int],
                 slack: int) -> int:
    """The largest excess of a topic's replicas on an eligible broker over even + slack (0 = all within).

    :param eligible: the placeable brokers, with their capacities when known (:class:`EvenShares`)
    """
    even = EvenShares(counts, eligible)
    ids = set(eligible)
    if even.equal:  # one share per topic, looked up (1.7M pairs at 3M replicas)
        base = even.base
        worst = max((n - base[t] for (t, b), n in counts.items() if b in ids), default=0)
    else:
        worst = max((n - even.of(t, b) for (t, b), n in counts.items() if b in ids), default=0)
    return max(worst - slack, 0)


def placeable_capacity(brokers: Mapping[int, BrokerInfo], t: Targets) -> dict[int, float]:
    """Placeable broker -> its capacity: what the even shares are weighed by."""
    return {b: brokers[b].capacity for b in t.placeable}


def moved_counts(counts: Counts, moves: Any) -> Counts:
    """``counts`` with every move row applied (topic, src, dst)."""
    out = dict(counts)
    for t, src, dst in zip(*columns(moves, ("topic", "src", "dst"))):
        out[(str(t), int(src))] = out.get((str(t), int(src)), 0) - 1
        out[(str(t), int(dst))] = out.get((str(t), int(dst)), 0) + 1
    return out


class Spread:
    """The pass's counters: (topic, broker) counts, even shares, the network-in state and limits.

    :param s: the network-in pass's state (bytes, ceilings, network in, rules)
    :param counts: (topic, broker) -> replicas after the moves so far
    :param slack: topic_spread_slack
    :param leaving: source broker -> the moves so far leaving it (:func:`.spread_reads.leaving_moves`)
    """

    def __init__(self, s: NetState, counts: Counts, eligible: Mapping[int, float] | Iterable[int], slack: int,
                 leaving: dict[int, Pool], even: EvenShares | None = None) -> None:
        self.s, self.counts, self.slack, self.leaving = s, counts, slack, leaving
        self.even = even if even is not None else EvenShares(counts, eligible)
        self.reach = 0  # receivers hold fewer than even + reach of the topic: 0, then the slack
        self.swap_first = False  # plain moves before swaps (see :func:`_place`)
        self.order = ReceiverOrder(s, counts, self.even)
        self.changed: set[tuple[str, int]] = set()  # (topic, broker) pairs whose count a move changed
        self.large: dict[int, Pool] | None = None  # receiver -> its largest replicas: relays on (see _place)
        self.misses = Misses()  # what each move changed, and the replicas that fit nowhere

    def n(self, topic: str, b: int) -> int:
        return self.counts.get((topic, b), 0)

    def net_ok(self, b: int, delta: float) -> bool:
        """Broker ``b`` may take ``delta`` more network in (a broker above the limit only sheds)."""
        return delta <= 0 or self.s.net[b] + delta <= self.s.lim(b)

    def receivers(self, topic: str) -> Sequence[int]:
        """Receivers below even + ``reach`` for the topic, fewest of it first, then least network in."""
        return self.order.of(topic, self.reach)

    def left(self, crowded: Iterable[tuple[str, int]], eligible: Container[int]) -> int:
        """:func:`topic_spread` of the counts, given the pairs above even + slack before the pass
        (every other pair the pass left unchanged is within it)."""
        excess = [self.n(t, b) - self.even.of(t, b) - self.slack for t, b in self.changed.union(crowded)
                  if b in eligible]
        return max(excess + [0])

    def move(self, x: Replica, dst: int) -> list[tuple]:
        ends = {x.broker, dst}
        held = self.s.now.get((x.topic, x.partition), x.replicas)  # who may take its partition changes
        self.order.before_move(ends)  # network in changes
        self.counts[(x.topic, x.broker)] -= 1
        self.counts[(x.topic, dst)] = self.n(x.topic, dst) + 1
        self.changed.update(((x.topic, x.broker), (x.topic, dst)))
        rows = self.s.apply(x, dst)
        self.order.after_move(x.topic, ends)
        self.misses.moved(ends.union(held), (x.topic, x.partition))
        return rows

    def fits(self, x: Replica, b: int) -> bool:
        """A plain move or redirect of ``x`` to ``b`` keeps every rule and limit."""
        return x.size <= self.s.room(b) and self.net_ok(b, x.rate) and self.s.may_take(x, b) and self.s.count_ok(b)

    def substitute(self, y: Replica) -> list[tuple] | None:
        """Rows when a move already leaving ``y``'s broker, of another topic and about ``y``'s size,
        can carry ``y`` instead (that replica stays: no extra copy): neither topic crowded by the
        exchange, both brokers within their limits."""
        a, s = y.broker, self.s
        for x in self.leaving[a].near(y.size) if a in self.leaving else []:
            b = x.broker
            if x.key in s.touched or x.topic == y.topic or x.topic not in self.even \
                    or self.n(y.topic, b) >= self.even.of(y.topic, b) + self.reach \
                    or self.n(x.topic, a) + 1 > self.even.of(x.topic, a) + self.slack \
                    or y.size - x.size > s.room(b) or x.size - y.size > s.room(a) \
                    or not (self.net_ok(b, y.rate - x.rate) and self.net_ok(a, x.rate - y.rate)) \
                    or not s.may_take(y, b):
                continue
            return self.move(x, a) + self.move(y, b)  # x's move redirected to its source: cancelled
        return None

    def partner(self, x: Replica, b: int, pool: Pool) -> Replica | None:
        """A replica of another topic on ``b``, closest in size to ``x``, that may go to ``x``'s
        broker without crowding its topic there, both brokers within disk and network limits."""
        a, s = x.broker, self.s
        lo, hi = x.size - s.room(b), x.size + s.room(a)
        for y in pool.near(x.size):
            if y.topic != x.topic and lo <= y.size <= hi and y.topic in self.even \
                    and self.n(y.topic, a) + 1 <= self.even.of(y.topic, a) + self.slack \
                    and self.net_ok(b, x.rate - y.rate) and self.net_ok(a, y.rate - x.rate) \
                    and s.may_take(x, b) and s.may_take(y, a):
                return y
        return None

    def relay(self, x: Replica, b: int, pool: Pool, by_room: list[int]) -> tuple[Replica, int] | None:
        """(y, c): a replica of another topic on ``b``, closest in size to ``x``, that makes disk room
        there for ``x`` by going on to a third broker ``c`` below even + reach for its topic (``x``'s
        broker when it may): both copies as a swap's, every broker within its disk and network limits.
        Where the receivers with network room are full and ``x``'s broker already holds its share of
        every topic with replicas that large, no swap exists (the hottest topic of the hot-traffic shape).

        :param by_room: the third brokers to look at, most disk room first
        """
        s = self.s
        if not by_room or not s.may_take(x, b):
            return None
        # no replica of b between the size that makes room for x and the most room a third broker
        # has (a byte of margin against rounding): none of them can go (the near ones are among them)
        i = bisect_left(pool.sizes, x.size - s.room(b) - 1.0)
        if i == len(pool.sizes) or pool.sizes[i] > s.room(by_room[0]) + 1.0:
            return None
        for y in pool.near(x.size):
            if y.topic == x.topic or y.topic not in self.even or x.size - y.size > s.room(b) \
                    or not self.net_ok(b, x.rate - y.rate):
                continue
            for c in by_room:
                if s.room(c) < y.size:
                    break
                if c != b and self.n(y.topic, c) < self.even.of(y.topic, c) + self.reach and self.fits(y, c):
                    return y, c
        return None


def _place(sp: Spread, x: Replica, pools: dict[int, Pool] | None) -> list[tuple] | None:
    """Rows for one crowded replica, in the goal's order of preference: a redirect ([]), a
    substitute for a move leaving its broker, then a plain move before a swap (a swap copies the
    partner too) or, with ``sp.swap_first``, a swap first (it keeps the receivers' disk room for
    the next); without ``pools`` the first two only. None when it fits nowhere: remembered, so its
    next try looks only at the brokers changed since (:mod:`.spread_misses`)."""
    mode = (sp.reach, pools is None, sp.large is None)
    seen = sp.misses.since(x.key, mode)
    # the receivers' order only when needed: a redirect or substitute that finds nothing changes nothing
    order = sp.receivers(x.topic) if x.via >= 0 else None
    rows = _plain_move(sp, x, order, seen) if order is not None else sp.substitute(x)
    if rows is None and pools is not None:
        order = order if order is not None else sp.receivers(x.topic)
        rows = _moves(sp, x, order, pools, seen)
    if rows is None:
        sp.misses.miss(x.key, mode, frozenset(order[:SWAP_RECEIVERS] if order is not None else ()))
    return rows


Seen = Miss | None  # :meth:`.spread_misses.Misses.since`: None for a full try


def _moves(sp: Spread, x: Replica, order: Sequence[int], pools: dict[int, Pool], seen: Seen) -> list[tuple] | None:
    """A plain move, a swap (in ``sp.swap_first``'s order), then a relay when they are on."""
    steps = (_swap_move, _plain_move) if sp.swap_first else (_plain_move, _swap_move)
    for step in steps:
        if step is _plain_move and x.via >= 0:
            continue  # tried in _place, on the same receivers: it would find nothing again
        rows = step(sp, x, order, seen, pools)
        if rows is not None:
            return rows
    return _relay_move(sp, x, order, sp.large, seen) if sp.large is not None else None


def _plain_move(sp: Spread, x: Replica, order: Sequence[int], seen: Seen, pools: Any = None) -> list[tuple] | None:
    for b in order if seen is None else (b for b in order if sp.misses.changed(b, seen)):
        if sp.fits(x, b):
            return sp.move(x, b)
    return None


def _swap_move(sp: Spread, x: Replica, order: Sequence[int], seen: Seen, pools: Any = None) -> list[tuple] | None:
    a = x.broker
    seen = None if seen is None or sp.misses.changed(a, seen) else seen  # the partner comes back to a
    for b in order[:SWAP_RECEIVERS]:
        if seen is not None and b in seen.swap_receivers and not sp.misses.changed(b, seen):
            continue  # unchanged since it had no partner, and among these then
        y = sp.partner(x, b, pools[b]) if b in pools else None
        if y is not None:
            return sp.move(x, b) + sp.move(y, a)
    return None


def _relay_move(sp: Spread, x: Replica, order: Sequence[int], large: dict[int, Pool], seen: Seen) -> list[tuple] | None:
    # every receiver, not SWAP_RECEIVERS: relays run only for the replicas swaps left; third brokers
    # only under their network-in limit (at 1.5M hot-traffic a third of them are above it). An
    # unchanged receiver found no third broker then: only a changed one can be it now.
    s = sp.s

    def by_room(brokers: Iterable[int]) -> list[int]:
        return sorted((c for c in brokers if c in s.receivers and s.net[c] < s.lim(c)), key=lambda c: (-s.room(c), c))

    changed = by_room(c for c in s.receivers if sp.misses.changed(c, seen)) if seen is not None else []
    every: list[int] | None = None  # sorted at the first receiver that needs them all
    for b in order:
        if b not in large:
            continue
        if seen is None or sp.misses.changed(b, seen):
            every = thirds = every if every is not None else by_room(s.receivers)
        else:
            thirds = changed
        hit = sp.relay(x, b, large[b], thirds)
        if hit is not None:
            return sp.move(x, b) + sp.move(hit[0], hit[1])
    return None


def spread_round(sp: Spread, crowded: dict[tuple[str, int], list[Replica]],
                 pools: dict[int, Pool] | None) -> list[tuple]:
    """One sweep over the crowded pairs (most crowded first): new move rows (redirects go to
    ``sp.s.redirect``); without pools redirects only.

    :param crowded: (topic, broker) -> its replicas there (search moves onto it first, then
        smallest); a pair gives up for the sweep after MAX_MISSES replicas in a row fit nowhere
        (its next ones are larger)
    """
    out: list[tuple] = []
    for (topic, a), xs in sorted(crowded.items(), key=lambda kv: (-sp.n(*kv[0]), kv[0])):
        misses = 0
        for x in xs:
            if sp.n(topic, a) <= sp.even.of(topic, a) + sp.slack or misses >= MAX_MISSES:
                break
            if x.key not in sp.s.touched:
                rows = _place(sp, x, pools)
                misses = 0 if rows is not None else misses + 1
                out += rows or []
    return out


def _state(brokers: dict[int, BrokerInfo], t: Targets, before: Loads, moves: Any, hard_cap: dict[int, float],
           opts: Any) -> NetState | None:
    """The network-in pass's state with the limits this goal keeps (None: no data)."""
    byt, net = mid_loads(before, moves)
    goals = opts.balance_goals
    disk_tol = opts.balance_tolerance if ranks_above(goals, "disk", "topic-spread") else math.inf
    net_tol = opts.network_in_tolerance if ranks_above(goals, "network-in", "topic-spread") else math.inf
    s = net_state(brokers, t, byt, net, hard_cap, net_tol, disk_tol)
    if s is None:  # no produce rate: network in is no limit
        ceil = disk_ceilings(brokers, t, byt, hard_cap, disk_tol)
        if ceil is None:
            return None
        s = NetState(dict(byt), {b: net.get(b, 0.0) for b in brokers}, math.inf, ceil, set(t.receivers),
                     {b: x.rack for b, x in brokers.items()}, 0.0)
    return keep_counts(s, before, moves, opts.max_replicas_per_broker)


def spread_moves(engine: Any, brokers: dict[int, BrokerInfo], t: Targets, before: Loads, moves: Any,
                 hard_cap: dict[int, float], opts: Any) -> Any:
    """The moves so far, some redirected, plus the topic-spread pass's (unchanged when the goal
    is off or every topic is within its slack). Plain moves come before swaps (fewer bytes); when
    that leaves a topic crowded (plain moves used disk room swaps needed), the pass runs again
    with swaps first.

    :param engine: SparkData or LocalData (the crowded replicas, swap partners)
    :param before: the snapshot's loads (``topic_count`` included)
    :param opts: PlanOptions (balance_topic_spread, topic_spread_slack, balance_goals, tolerances)
    """
    if not opts.balance_topic_spread:
        return moves
    eligible, slack = placeable_capacity(brokers, t), opts.topic_spread_slack
    counts = moved_counts(before.topic_count, moves)
    even = EvenShares(counts, eligible)  # the moves keep every topic's total: one for the pass
    pairs = even.crowded(counts, eligible, slack)
    if not pairs:  # every topic within its slack
        return moves
    # both tries start from the same state, so they find the same crowded replicas and swap partners
    with Reads(engine, pairs, set(t.receivers), set(opts.exclude_topics)) as reads:
        inputs = Inputs(reads, moves, pairs)
        out = moves
        for swap_first in (False, True):
            s = _state(brokers, t, before, moves, hard_cap, opts)
            if s is None:
                return moves
            sp = Spread(s, dict(counts), eligible, slack, inputs.leaving, even)
            sp.swap_first = swap_first
            out = with_pass(moves, s, _spread_rounds(sp, eligible, inputs))
            if sp.left(pairs, eligible) == 0:
                break
    return out


def _spread_rounds(sp: Spread, eligible: Mapping[int, float], inputs: Inputs) -> list[tuple]:
    """The pass's new rows: redirects and substitutes first, then sweeps with swap partners."""
    crowded = inputs.crowded()
    extra = spread_round(sp, crowded, None)
    if sp.left(inputs.pairs, eligible) > 0:
        sp.reach = sp.slack  # partners on every receiver of either step
        pools = inputs.pools(sp.receivers)
        extra += _sweeps(sp, crowded, pools)
        if sp.left(inputs.pairs, eligible) > 0:  # then relays too (their partners read only now)
            sp.reach = sp.slack
            sp.large = inputs.large(sp.receivers, RELAY_PER_BROKER)
            extra += _sweeps(sp, crowded, pools)
    return extra


def _sweeps(sp: Spread, crowded: dict[tuple[str, int], list[Replica]], pools: dict[int, Pool]) -> list[tuple]:
    """Sweeps at reach 0, then the slack, each until one changes nothing."""
    extra: list[tuple] = []
    for sp.reach in sorted({0, sp.slack}):
        for _ in range(SWEEPS):
            more = spread_round(sp, crowded, pools)
            extra += more
            if not more:
                break
    return extra
