"""Preferred leaders, chosen per group of partitions as Spark tasks (``applyInPandas``).

Partitions are split into groups by ``crc32(topic-partition)``; the number of groups follows
from the data (about :data:`LEADERS_PER_BROKER_PER_GROUP` partitions per broker in each, at most
:data:`MAX_LEADER_GROUPS`), never from the Spark parallelism, so results do not depend on it. Each task applies the
partitions' replica moves (a replica moved keeps its position) and then picks leaders with a
per-broker quota of its group's share of the mean leader count (plus a small slack): a
partition keeps its current first replica while that broker is under quota, the rest go to the
replica with the fewest leaders so far. Reordering replicas moves no data. Only partitions whose
replica list changes are returned (the plan's rows), so the driver receives moves, not replicas.

The leader-bytes-in goal (Cruise Control's LeaderBytesInDistributionGoal) evens the produce rate
each broker leads the same way: a broker above its group's share x (1 + tolerance) hands its
hottest partitions to the in-sync replica leading the least, never pushing that one above the
share. The network-out goal (Cruise Control's NetworkOutboundUsageDistributionGoal) is the same
pass with each partition weighed by what its leader sends: the produce rate times (followers +
consumer fan-out). The leader goals run in the order of ``balance_goals``; a lower one never
pushes a broker above a higher one's limit (the sum of the groups' limits is the cluster's: each
group's share is its part of the mean).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kafka_reassign.planning.spark.loads import leader_out

#: brackets the names of duplicated partitions in the error a task raises (read by the driver)
DUPLICATE_MARK = "@@duplicate-partition-rows@@"
MAX_LEADER_GROUPS = 16
#: the goals this stage balances (planning/goal_order.py names)
LEADER_GOALS = ("leader-count", "leader-bytes-in", "network-out")
LEADERS_PER_BROKER_PER_GROUP = 200


def leader_groups(partitions: int, brokers: int) -> int:
    """How many partition groups: large enough quotas per group keep the sum of the groups'
    rounding small against the mean."""
    return max(1, min(MAX_LEADER_GROUPS, partitions // max(1, brokers * LEADERS_PER_BROKER_PER_GROUP)))
# bytes_in_per_sec and leader (-1: unknown) travel along for the summary's time estimate,
# remote_bytes (tiered topics: stays in remote storage) for its remote total.
# consumer_bytes_per_sec (null: not measured) for the summary's network out.
CHANGE_COLUMNS = ("topic", "partition", "orig", "final", "size_bytes", "added", "removed", "problem",
                  "bytes_in_per_sec", "leader", "remote_bytes", "consumer_bytes_per_sec")
CHANGE_SCHEMA = ("topic string, partition int, orig array<int>, final array<int>, "
                 "size_bytes double, added array<int>, removed array<int>, problem string, "
                 "bytes_in_per_sec double, leader int, remote_bytes double, consumer_bytes_per_sec double")


@dataclass
class LeaderInputs:
    """:param eligible: brokers that may gain leadership
    :param fixed: brokers whose leadership must not change (excluded brokers)
    :param slack: fraction above the mean a broker's leader count may reach
    :param balance: choose leaders (False: only apply the moves)
    :param gainers: brokers that may gain leadership by a reorder (None = every eligible one;
        add-brokers gives the new brokers only, so nothing else changes on the old ones)
    :param order: the leader goals (leader-count, leader-bytes-in) to balance, highest priority first
    :param count_tolerance: a rate goal (leader-bytes-in, network-out) ranked lower never pushes a
        leader count above the group's share x (1 + this)
    :param bytes_tolerance: the leader-bytes-in goal's limit: the group's share x (1 + this)
    :param out_tolerance: the network-out goal's limit: the group's share x (1 + this)
    :param fanout: consumer groups reading each partition (network out = rate x (followers + this))
    :param out_caps: broker -> network out it may not be pushed above in one group (the
        network-capacity goal, a rule above every leader goal: its limit / groups)
    :param out_links: broker -> link speed when every eligible broker has one: the network-out
        goal then evens utilisation (each broker's limit is its link's share of the group's total)
    """

    eligible: set[int]
    fixed: set[int]
    slack: float = 0.03
    balance: bool = True
    groups: int = 1
    gainers: set[int] | None = None
    rack: dict[int, str] = field(default_factory=dict)
    placeable: set[int] = field(default_factory=set)
    order: tuple[str, ...] = ("leader-count",)
    count_tolerance: float = 0.10
    bytes_tolerance: float = 0.10
    out_tolerance: float = 0.10
    fanout: float = 1.0
    out_caps: dict[int, float] = field(default_factory=dict)
    out_links: dict[int, float] = field(default_factory=dict)


def duplicates_in(error: BaseException) -> list[str]:
    """Partition names a leader task reported as duplicated, from its (possibly wrapped) error."""
    text = str(error)
    if DUPLICATE_MARK not in text:
        return []
    return text.split(DUPLICATE_MARK)[1].split(",")


def _ints(values: Any) -> list[int]:
    """Python ints of an Arrow/numpy array (``tolist`` converts in C) or of a list."""
    return values.tolist() if hasattr(values, "tolist") else [int(x) for x in values]


def _apply_moves(reps: list[int], mpos: Any, mdst: Any, rack: dict[int, str]) -> list[int]:
    """The replicas (a new list) with the moves ``mpos``/``mdst`` applied in position order; a
    move that would repeat a broker or lose a rack next to another group's move of the same
    partition is dropped."""
    out = reps[:]
    for p, d in sorted(zip(_ints(mpos), _ints(mdst))):
        trial = out[:p] + [d] + out[p + 1:]
        if d not in out and len({rack.get(b) for b in trial}) >= len({rack.get(b) for b in out}):
            out = trial
    return out


def with_moves(parts: Any, moves: Any) -> Any:
    """``parts`` (a new frame) with columns mpos and mdst: the positions each partition's moves
    replace and their brokers, None where none moves.

    :param moves: columns topic, partition, pos, dst
    """
    by_key: dict[tuple[str, int], tuple[list[int], list[int]]] = {}
    for t, p, pos, dst in zip(moves["topic"].tolist(), moves["partition"].tolist(), moves["pos"].tolist(),
                              moves["dst"].tolist()):
        e = by_key.setdefault((t, int(p)), ([], []))
        e[0].append(int(pos))
        e[1].append(int(dst))
    none: tuple[None, None] = (None, None)
    found = [by_key.get((t, int(p)), none) for t, p in zip(parts["topic"].tolist(), parts["partition"].tolist())]
    return parts.assign(mpos=[f[0] for f in found], mdst=[f[1] for f in found])


def choose_leaders_moved(parts: Any, moves: Any, inp: LeaderInputs) -> Any:
    """:func:`choose_leaders` of one group's partitions with the group's moves applied."""
    return choose_leaders(with_moves(parts, moves), inp)


def choose_leaders(pdf: Any, inp: LeaderInputs) -> Any:
    """Changed partitions of one group (pandas in, pandas out).

    :param pdf: columns lgrp, topic, partition, replicas, mpos, mdst, size_bytes, bytes_in_per_sec, leader,
        remote_bytes
    """
    import pandas as pd

    pdf = pdf.sort_values(["topic", "partition"], kind="mergesort")
    dup = pdf.duplicated(["topic", "partition"])
    if dup.any():  # rows of one partition share a group, so every duplicate is seen here
        names = [f"{t}-{p}" for t, p in zip(pdf["topic"][dup], pdf["partition"][dup])][:10]
        raise ValueError(DUPLICATE_MARK + ",".join(names) + DUPLICATE_MARK)
    # whole columns at once: per-row float()/int() and NaN tests were most of a task's time
    rates = pdf["bytes_in_per_sec"].fillna(0.0).astype(float).tolist()
    leads = pdf["leader"].fillna(-1).astype("int64").tolist()
    remote = pdf["remote_bytes"].fillna(0.0).astype(float).tolist()
    reads: list[float | None] = [None] * len(pdf)  # not measured: the fanout stands in
    if "consumer_bytes_per_sec" in pdf:
        reads = [None if c != c else c for c in pdf["consumer_bytes_per_sec"].astype(float).tolist()]  # NaN: null
    # most partitions have no move: a copy, no call
    rows = [(t, p, o, o[:] if mp is None else _apply_moves(o, mp, md, inp.rack), s)
            for t, p, o, mp, md, s in zip(pdf["topic"].tolist(), pdf["partition"].astype("int64").tolist(),
                                          [_ints(r) for r in pdf["replicas"]], pdf["mpos"], pdf["mdst"],
                                          pdf["size_bytes"].astype(float).tolist())]
    if inp.balance and rows:
        _balance(rows, rates, inp, reads)
    out = [(t, p, o, f, s, [b for b in f if b not in o], [b for b in o if b not in f],
            row_problem(o, f, inp), rates[i], leads[i], remote[i], reads[i])
           for i, (t, p, o, f, s) in enumerate(rows) if o != f]
    return pd.DataFrame(out, columns=list(CHANGE_COLUMNS))


def row_problem(orig: list[int], final: list[int], inp: LeaderInputs) -> str | None:
    """The rule a changed partition breaks, checked where the row is (the driver only collects):
    replication factor, repeated brokers, receivers that may not receive, racks, exclusions."""
    now = set(final)
    if now == set(orig) and len(now) == len(final) == len(orig):
        return None  # a reorder (most changed rows: a new leader) breaks none of the rules below
    new = now - set(orig)
    if len(final) != len(orig) or len(set(final)) != len(final):
        return f"replicas {final} change the replication factor or repeat a broker"
    if new - inp.placeable:
        return f"replicas {sorted(new - inp.placeable)} are not placeable (drained, excluded or dead)"
    if len({inp.rack.get(b) for b in final}) < len({inp.rack.get(b) for b in orig}):
        return f"replicas {final} span fewer racks than {orig}"
    if (set(orig) ^ set(final)) & inp.fixed:
        return "an excluded broker gains or loses a replica"
    return None


def _balance(rows: list[tuple], rates: list[float], inp: LeaderInputs,
             reads: list[float | None] | None = None) -> None:
    """The leader goals of ``inp.order`` one after the other on one group's rows: each keeps the
    brokers within the limits of the goals before it (``counts``, ``above``).

    :param reads: per row, the consumer bytes the snapshot measured (None: ``inp.fanout`` stands in)
    """
    share = len(rows) / max(1, len(inp.eligible))
    quota = math.ceil(share * (1 + inp.slack))
    counts: tuple[dict[int, int], int] | None = None
    hard = _network_capacity(rows, rates, inp, reads)
    above: list[LeaderBytes] = list(hard)
    for goal in inp.order:
        if goal == "leader-count":
            if len(above) > len(hard):  # it ranks lower: it only hands over where the rates stay in limit
                tally: dict[int, int] = {}
                for row in rows:
                    tally[row[3][0]] = tally.get(row[3][0], 0) + 1
                _repair(rows, inp, tally, quota, above)
            else:
                tally = _count_pass(rows, inp, quota, above)
            counts = (tally, math.floor(share * (1 + inp.count_tolerance)))
            continue
        if goal == "leader-bytes-in":
            lbi = LeaderBytes.of(rows, rates, inp, inp.bytes_tolerance)
        else:
            lbi = LeaderBytes.of(rows, _out_rates(rows, rates, inp, reads), inp, inp.out_tolerance, inp.out_links)
        _even_bytes(rows, inp, lbi, counts, above)
        above.append(lbi)


def _out_rates(rows: list[tuple], rates: list[float], inp: LeaderInputs,
               reads: list[float | None] | None = None) -> list[float]:
    """Per row, the network out its leader sends: to each follower and to the consumers
    (:func:`~.loads.leader_out`; ``reads`` as in :func:`_balance`)."""
    return [leader_out(rate * (len(row[3]) - 1), rate, inp.fanout, *(() if c is None else (c, rate)))
            for row, rate, c in zip(rows, rates, reads or [None] * len(rows))]


def _network_capacity(rows: list[tuple], rates: list[float], inp: LeaderInputs,
                      reads: list[float | None] | None = None) -> list["LeaderBytes"]:
    """The network-capacity goal's tally (none without caps): brokers above their cap hand their
    hottest partitions over first; every leader goal then keeps it."""
    if not inp.out_caps:
        return []
    hard = LeaderBytes.of(rows, _out_rates(rows, rates, inp, reads), inp, math.inf)
    hard.caps = inp.out_caps
    _even_bytes(rows, inp, hard, None, [])
    return [hard]


def _count_pass(rows: list[tuple], inp: LeaderInputs, quota: int,
                above: "list[LeaderBytes]") -> dict[int, int]:
    """Leader counts to the quota: first replicas kept while under it, the rest to the replica
    with the fewest leaders that stays within the limits of ``above`` (the rules), then the
    repair sweeps; the counts."""
    count: dict[int, int] = {}
    deferred = []
    for i, (_, _, orig, final, _) in enumerate(rows):
        lead = final[0]
        if lead in inp.fixed or orig[0] in inp.fixed:
            count[lead] = count.get(lead, 0) + 1
            continue
        if lead in inp.eligible and count.get(lead, 0) < quota:
            count[lead] = count.get(lead, 0) + 1
        else:
            deferred.append(i)
    for i in deferred:
        final = rows[i][3]
        choices = [b for b in final if b in inp.eligible
                   and (inp.gainers is None or b in inp.gainers or b == final[0])
                   and (b == final[0] or all(x.fits(b, i) for x in above))] or final[:1]
        best = min(choices, key=lambda b: (count.get(b, 0), final.index(b)))
        count[best] = count.get(best, 0) + 1
        for x in above:
            x.hand(i, final[0], best)
        _lead(final, best)
    _repair(rows, inp, count, quota, above)
    return count


REPAIR_SWEEPS = 8


def _repair(rows: list[tuple], inp: LeaderInputs, count: dict[int, int], quota: int,
            above: "list[LeaderBytes] | None" = None) -> None:
    """Sweeps that hand leadership from a broker above quota to a replica with at least two
    fewer leaders (which may itself end above quota and hand on in the next sweep): each hand-over
    lowers the sum of squared counts, so chains of brokers resolve in a few sweeps. Only the
    partitions led by brokers above quota are visited; none goes to a broker it would push above
    the limit of a goal ranked higher (``above``)."""
    led: dict[int, list[int]] = {}
    for i, row in enumerate(rows):
        led.setdefault(row[3][0], []).append(i)
    for _ in range(REPAIR_SWEEPS):
        changed = False
        for lead in sorted(b for b in led if count.get(b, 0) > quota and b not in inp.fixed):
            keep = []
            for i in led[lead]:
                orig, final = rows[i][2], rows[i][3]
                under = [] if count[lead] <= quota or orig[0] in inp.fixed else [
                    b for b in final[1:] if b in inp.eligible and count.get(b, 0) < count[lead] - 1
                    and (inp.gainers is None or b in inp.gainers) and all(x.fits(b, i) for x in above or ())]
                if not under:
                    keep.append(i)
                    continue
                best = min(under, key=lambda b: (count.get(b, 0), final.index(b)))
                count[lead] -= 1
                count[best] = count.get(best, 0) + 1
                for x in above or ():
                    x.hand(i, lead, best)
                _lead(final, best)
                led.setdefault(best, []).append(i)
                changed = True
            led[lead] = keep
        if not changed:
            return


def _lead(final: list[int], broker: int) -> None:
    """Make ``broker`` the preferred leader (first replica)."""
    j = final.index(broker)
    final[0], final[j] = final[j], final[0]


@dataclass
class LeaderBytes:
    """A rate each broker leads in one group (leader bytes in, network out), and its goal's limit.

    :param rates: per row, its partition's weight (produce rate; for network out times followers
        + fan-out)
    :param cap: no broker may be pushed above this (the group's share x (1 + tolerance))
    :param caps: broker -> its own lower limit (the network-capacity goal's)
    """

    rates: list[float]
    cap: float
    load: dict[int, float] = field(default_factory=dict)
    caps: dict[int, float] = field(default_factory=dict)

    def limit(self, b: int) -> float:
        return self.caps.get(b, self.cap)

    @classmethod
    def of(cls, rows: list[tuple], rates: list[float], inp: LeaderInputs, tolerance: float,
           links: dict[int, float] | None = None) -> "LeaderBytes":
        """:param links: broker -> link speed: each broker's limit is its link's share of the total
        (utilisation evened), else one share per eligible broker"""
        load: dict[int, float] = {}
        for row, rate in zip(rows, rates):
            load[row[3][0]] = load.get(row[3][0], 0.0) + rate
        total = sum(rates) * (1 + tolerance)
        per_link = total / sum(links.values()) if links else 0.0
        return cls(rates, total / max(1, len(inp.eligible)), load,
                   {b: per_link * v for b, v in links.items()} if links else {})

    def used(self, b: int) -> float:
        """How full ``b`` is: its load / its limit (a uniform limit orders brokers by load)."""
        lim = self.limit(b)
        return self.load.get(b, 0.0) / lim if lim > 0 else math.inf

    def fits(self, b: int, i: int) -> bool:
        return self.load.get(b, 0.0) + self.rates[i] <= self.limit(b)

    def swaps(self, b: int, i: int, a: int, j: int) -> bool:
        """``b`` takes row ``i`` from ``a`` and hands row ``j`` back: whichever gains stays in limit."""
        d = self.rates[i] - self.rates[j]
        if d > 0:
            return self.load.get(b, 0.0) + d <= self.limit(b)
        return d == 0 or self.load.get(a, 0.0) - d <= self.limit(a)

    def hand(self, i: int, src: int, dst: int) -> None:
        self.load[src] -= self.rates[i]
        self.load[dst] = self.load.get(dst, 0.0) + self.rates[i]


def _even_bytes(rows: list[tuple], inp: LeaderInputs, lbi: LeaderBytes,
                counts: tuple[dict[int, int], int] | None, above: list[LeaderBytes]) -> None:
    """Brokers above ``lbi``'s limit, fullest first, hand their hottest partitions to the
    in-sync replica leading the least that stays under the limit. When the leader-count goal
    ranks higher (``counts`` = (counts, limit)) no broker goes above that limit: a receiver at it
    hands a colder partition back (a swap, counts unchanged); nor above the limit of a rate goal
    ranked higher (``above``). Sweeps until none changes anything."""
    led: dict[int, list[int]] = {}
    for i, row in enumerate(rows):
        if row[2][0] not in inp.fixed and row[3][0] not in inp.fixed:
            led.setdefault(row[3][0], []).append(i)
    for _ in range(REPAIR_SWEEPS):
        changed = False
        for lead in sorted((b for b in led if lbi.load.get(b, 0.0) > lbi.limit(b)),
                           key=lambda b: (-lbi.used(b), -lbi.load[b], b)):
            for i in sorted(led[lead], key=lambda j: (-lbi.rates[j], j)):
                if lbi.load[lead] <= lbi.limit(lead):
                    break
                if rows[i][3][0] == lead and lbi.rates[i] > 0 and _hand_hot(rows, i, inp, [lbi, *above], counts,
                                                                             led):
                    changed = True
        if not changed:
            return


def _hand_hot(rows: list[tuple], i: int, inp: LeaderInputs, tallies: list[LeaderBytes],
              counts: tuple[dict[int, int], int] | None, led: dict[int, list[int]]) -> bool:
    """Row ``i`` (led by a broker above the limit of ``tallies[0]``, the goal evened; the others
    rank higher) to the follower least full (load / its limit) that takes it, alone or with a
    swap back; whether it moved."""
    lbi, final = tallies[0], rows[i][3]
    lead = final[0]
    for b in sorted((b for b in final[1:] if b in inp.eligible and (inp.gainers is None or b in inp.gainers)),
                    key=lambda b: (lbi.used(b), lbi.load.get(b, 0.0), final.index(b))):
        if counts is None or counts[0].get(b, 0) + 1 <= counts[1]:
            if all(x.fits(b, i) for x in tallies):
                _hand(rows, i, b, tallies, counts, led)
                return True
            continue
        # b is at the count limit: it hands back its coldest partition that lead holds and that fits
        if inp.gainers is not None and lead not in inp.gainers:
            continue
        back = [j for j in led.get(b, []) if rows[j][3][0] == b and lead in rows[j][3]
                and lbi.load[b] + lbi.rates[i] - lbi.rates[j] <= lbi.limit(b) and lbi.rates[j] < lbi.rates[i]
                and all(x.swaps(b, i, lead, j) for x in tallies[1:])]
        if back:
            _hand(rows, i, b, tallies, counts, led)
            _hand(rows, min(back, key=lambda j: (lbi.rates[j], j)), lead, tallies, counts, led)
            return True
    return False


def _hand(rows: list[tuple], i: int, dst: int, tallies: list[LeaderBytes],
          counts: tuple[dict[int, int], int] | None, led: dict[int, list[int]]) -> None:
    """Make ``dst`` the preferred leader of row ``i`` in every tally."""
    src = rows[i][3][0]
    for x in tallies:
        x.hand(i, src, dst)
    if counts is not None:
        counts[0][src] -= 1
        counts[0][dst] = counts[0].get(dst, 0) + 1
    _lead(rows[i][3], dst)
    led.setdefault(dst, []).append(i)
