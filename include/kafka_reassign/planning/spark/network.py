"""The network-in goal (Cruise Control's NetworkInboundUsageDistributionGoal): after the disk
search, replicas of hot partitions leave the brokers that receive the most produce traffic.

Network in of a broker = the produce rate of every replica it holds, as leader or follower. A
broker above ``mean x (1 + network_in_tolerance)`` (the *upper limit*, mean over live brokers)
sheds its replicas with the most produce rate per byte first, each to the receiver with the
least network in that stays under the limit:

* a plain move when the receiver has disk room, else
* a swap: the receiver sends back a replica of about the same size and a lower rate (the
  smallest that fits), so both brokers' bytes stay put.

It never undoes the disk goal: no broker ends above the fullest utilisation the disk search left
or half the balance tolerance above the mean, whichever is higher (never above ``1 +
balance_tolerance`` times the mean, nor its hard cap), so disk stays within its tolerance. Every rule of the search holds: a broker never gets a second replica of
a partition, a partition never spans fewer racks, only the goal's receivers gain replicas
(placeable brokers; add-brokers: the new ones), excluded topics stay, and a replica the disk
search moved is not moved again (its partition's other replicas may be, once). It runs on the driver over the moves and a few candidate
replicas per broker (:meth:`~.data.SparkData.net_candidates`), so both engines give one plan;
a snapshot without produce rates skips it (the plan is the disk goal's alone).

Candidates (``CANDIDATE_ORDER``): on a hot broker, highest rate / size first (most traffic per
byte copied), then smallest; on a cold broker, lowest rate / size first (partners of every size,
the coldest per byte), then smallest.
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

from kafka_reassign.planning.spark.loads import Loads
from kafka_reassign.planning.spark.search import MOVE_COLUMNS
from kafka_reassign.planning.spark.targets import BrokerInfo, Targets

CANDIDATE_ORDER = "hot: -rate/max(size, 1), size, topic, partition; cold: rate/max(size, 1), size, topic, partition"
#: candidate replicas fetched per broker (hot brokers shed from them, cold ones swap back from them)
PER_BROKER = 400
SWEEPS = 8
#: partners a swap looks at on each side of the replica's size, per receiver
SWAP_SCAN = 64


@dataclass
class Replica:
    topic: str
    partition: int
    pos: int
    broker: int
    size: float
    rate: float
    replicas: tuple[int, ...]  # after the search's moves of the partition
    orig: tuple[int, ...]      # in the snapshot


@dataclass
class NetState:
    """Per-broker bytes and network in while the pass runs, and each broker's byte ceiling.

    :param upper: network in no broker may be pushed above (and hot brokers shed down to)
    :param ceil: bytes a broker may hold at most after the pass
    :param receivers: brokers that may gain a replica
    """

    bytes: dict[int, float]
    net: dict[int, float]
    upper: float
    ceil: dict[int, float]
    receivers: set[int]
    rack: dict[int, str]
    touched: set[tuple[str, int]] = field(default_factory=set)

    def may_take(self, r: Replica, b: int) -> bool:
        """Broker ``b`` may receive ``r``: a receiver, holding the partition neither before nor
        after the search, no rack lost against either list (the leader stage applies the
        search's move and this one in position order, so each must pass on its own)."""
        if b not in self.receivers or b in r.replicas or b in r.orig or (r.topic, r.partition) in self.touched:
            return False
        return all(len({self.rack[x] for x in reps if x != r.broker} | {self.rack[b]})
                   >= len({self.rack[x] for x in reps}) for reps in {r.replicas, r.orig})

    def room(self, b: int) -> float:
        return self.ceil[b] - self.bytes[b]

    def apply(self, r: Replica, dst: int) -> tuple:
        """Move ``r`` to ``dst`` in the counters; the move row (search.MOVE_COLUMNS)."""
        self.bytes[r.broker] -= r.size
        self.net[r.broker] -= r.rate
        self.bytes[dst] += r.size
        self.net[dst] += r.rate
        self.touched.add((r.topic, r.partition))
        return (r.topic, r.partition, r.pos, r.broker, dst, r.size, r.rate)


def mid_loads(before: Loads, moves: Any) -> tuple[dict[int, float], dict[int, float]]:
    """Bytes and network in per broker after the disk search's moves.

    :param moves: the search's moves (search.MOVE_COLUMNS)
    """
    byt, net = dict(before.bytes), dict(before.net_in)
    for src, dst, size, rate in zip(moves["src"], moves["dst"], moves["size_bytes"], moves["bytes_in_per_sec"]):
        byt[int(src)] -= float(size)
        byt[int(dst)] += float(size)
        net[int(src)] = net.get(int(src), 0.0) - float(rate)
        net[int(dst)] = net.get(int(dst), 0.0) + float(rate)
    return byt, net


def net_state(brokers: dict[int, BrokerInfo], t: Targets, byt: dict[int, float], net: dict[int, float],
              hard_cap: dict[int, float], tolerance: float, disk_tolerance: float) -> NetState | None:
    """The pass's state, or None when there is no produce rate or no live broker."""
    live = [b for b, x in brokers.items() if x.alive and b not in t.drained]
    total_net = sum(net.get(b, 0.0) for b in live)
    cap = sum(brokers[b].capacity for b in live)
    if total_net <= 0 or cap <= 0:
        return None
    mean_util = sum(byt[b] for b in live) / cap
    # the fullest utilisation the disk search left, or half the tolerance if that is higher (the
    # search's own "balanced" band): room for swaps of unequal sizes, disk still within tolerance
    top_util = min(max(max(byt[b] / brokers[b].capacity for b in live), mean_util * (1 + disk_tolerance / 2)),
                   mean_util * (1 + disk_tolerance))
    ceil = {b: min(hard_cap[b], max(byt[b], top_util * brokers[b].capacity)) for b in t.placeable}
    return NetState(dict(byt), {b: net.get(b, 0.0) for b in brokers}, total_net / len(live) * (1 + tolerance),
                    ceil, set(t.receivers), {b: x.rack for b, x in brokers.items()})


def _rows(frame: Any, side: dict[int, str], moved: dict[tuple[str, int], dict[int, int]]) -> dict[int, list[Replica]]:
    """Candidates per broker in rank order, with the search's moves applied to their replica
    lists (a replica the search moves itself is left out).

    :param moved: (topic, partition) -> {position: new broker} of the search's moves
    """
    out: dict[int, list[Replica]] = {b: [] for b in side}
    ordered = frame.sort_values(["broker", "rank"], kind="mergesort")
    for t, p, pos, b, size, rate, reps in zip(ordered["topic"], ordered["partition"], ordered["pos"],
                                              ordered["broker"], ordered["size_bytes"], ordered["rate"],
                                              ordered["replicas"]):
        orig = tuple(int(x) for x in reps)
        done = moved.get((str(t), int(p)), {})
        if int(pos) not in done:
            now = tuple(done.get(i, x) for i, x in enumerate(orig))
            out[int(b)].append(Replica(str(t), int(p), int(pos), int(b), float(size), float(rate), now, orig))
    return out


def _plain(s: NetState, x: Replica, order: list[int]) -> int | None:
    """The receiver with the least network in that takes ``x`` as it is (disk room, under the limit)."""
    for b in order:
        if s.net[b] + x.rate <= s.upper and x.size <= s.room(b) and s.may_take(x, b):
            return b
    return None


def _swap(s: NetState, x: Replica, order: list[int], cold: dict[int, list[Replica]]) -> tuple[int, Replica] | None:
    """(receiver, replica it sends back): the partner of a lower rate closest in size to ``x``
    that keeps both brokers under their byte ceilings and the receiver under the network limit
    (closest, so both keep their disk room for the next swaps)."""
    a = x.broker
    for b in order:
        pool = cold.get(b, [])
        if not pool or not s.may_take(x, b):
            continue
        lo, hi = x.size - s.room(b), x.size + s.room(a)
        mid = bisect_left([y.size for y in pool], x.size)
        near = sorted(range(max(0, mid - SWAP_SCAN), min(len(pool), mid + SWAP_SCAN)),
                      key=lambda i: (abs(pool[i].size - x.size), i))
        for y in (pool[i] for i in near):
            if lo <= y.size <= hi and y.rate < x.rate and s.net[b] + x.rate - y.rate <= s.upper \
                    and s.may_take(y, a):
                return b, y
    return None


def _shed(s: NetState, a: int, xs: list[Replica], pools: dict[int, list[Replica]]) -> list[tuple]:
    """One sweep of hot broker ``a``'s candidates: moves and swaps until it is under the limit."""
    out: list[tuple] = []
    for x in xs:
        if s.net[a] <= s.upper:
            break
        if x.rate <= 0 or (x.topic, x.partition) in s.touched:
            continue
        order = sorted((b for b in pools if s.net[b] < s.upper), key=lambda b: (s.net[b], b))
        dst = _plain(s, x, order)
        if dst is not None:
            out.append(s.apply(x, dst))
            continue
        hit = _swap(s, x, order, pools)
        if hit is not None:
            b, y = hit
            out += [s.apply(x, b), s.apply(y, a)]
            pools[b].remove(y)
    return out


def balance_network(s: NetState, hot: dict[int, list[Replica]], cold: dict[int, list[Replica]]) -> list[tuple]:
    """The pass's moves (search.MOVE_COLUMNS rows): sweeps over the hot brokers, hottest first,
    until a sweep changes nothing (a candidate that fitted nowhere may fit once other swaps
    freed disk room).

    :param hot: hot broker -> its candidates in rank order
    :param cold: cold broker -> its candidates (sorted here by size)
    """
    pools = {b: sorted(rs, key=lambda y: (y.size, y.rate, y.topic, y.partition)) for b, rs in cold.items()}
    out: list[tuple] = []
    for _ in range(SWEEPS):
        done = len(out)
        for a in sorted(hot, key=lambda b: (-s.net[b], b)):
            out += _shed(s, a, hot[a], pools)
        if len(out) == done:
            break
    return out


def network_moves(engine: Any, brokers: dict[int, BrokerInfo], t: Targets, before: Loads, moves: Any,
                  hard_cap: dict[int, float], opts: Any) -> Any:
    """The search's moves plus the network-in pass's (unchanged when the pass is off, there is
    no produce rate, or no broker is above the limit).

    :param engine: SparkData or LocalData (for the candidate replicas)
    :param opts: PlanOptions (balance_network_in, network_in_tolerance, balance_tolerance, exclude_topics)
    """
    import pandas as pd

    if not opts.balance_network_in:
        return moves
    byt, net = mid_loads(before, moves)
    s = net_state(brokers, t, byt, net, hard_cap, opts.network_in_tolerance, opts.balance_tolerance)
    if s is None:
        return moves
    hot = [b for b in t.placeable if s.net[b] > s.upper]
    if not hot:
        return moves
    side = {b: "cold" for b in s.receivers if s.net[b] < s.upper}
    side.update({b: "hot" for b in hot})
    frame = engine.net_candidates(side, PER_BROKER, set(opts.exclude_topics))
    moved: dict[tuple[str, int], dict[int, int]] = {}
    for x, p, pos, dst in zip(moves["topic"], moves["partition"], moves["pos"], moves["dst"]):
        moved.setdefault((str(x), int(p)), {})[int(pos)] = int(dst)
    rows = _rows(frame, side, moved)
    extra = balance_network(s, {b: rows[b] for b in hot},
                            {b: rs for b, rs in rows.items() if side[b] == "cold"})
    if not extra:
        return moves
    return pd.concat([moves, pd.DataFrame(extra, columns=list(MOVE_COLUMNS))], ignore_index=True)
