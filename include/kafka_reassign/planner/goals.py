"""The built-in goals, each a :class:`~kafka_reassign.planner.assignor.ReplicaAssignor`.

All goals share one rule set (:class:`BuiltinGoal`):

* a replica never lands on an excluded broker, a broker being drained, or a broker that
  already holds the partition;
* rack diversity never drops, and a new replica goes to an unused rack whenever racks allow;
* a broker or log dir that receives data ends at most at ``capacity_ceiling`` of its capacity
  (and, for the balancing goals, at most ``balance_tolerance`` above the mean utilisation);
* excluded topics are never offered; a replica on an excluded broker never moves (the other
  replicas of its partition may), and no leadership moves to or from an excluded broker.

Minimal movement: every goal first works out the bytes any plan must move (the lower bound
reported in the summary) and then moves replicas only off brokers that are over their target.
Rebalance sheds each over-loaded broker's excess with replicas of about
``excess / surplus replica count`` (so bytes and replica count come down together, and replicas
of over-concentrated topics go first), finishing with the largest replica that still fits the
remaining excess, or the smallest that covers it; the bytes moved stay within a few percent of
the bound. Then topic spread and replica counts are evened out with the smallest replicas, and
leadership by reordering replicas (a preferred-leader swap moves no data).
"""
from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections import defaultdict
from typing import Iterable, Mapping, Sequence

from kafka_reassign.planner.assignor import PlanContext, Proposal, ReplicaAssignor
from kafka_reassign.planner.cluster import ANY, Assignment, Cluster, Partition
from kafka_reassign.planner.errors import GoalError, Problem

EPS = 1e-6


class BuiltinGoal(ReplicaAssignor):
    """Shared placement rules and helpers of the built-in goals."""

    name = "builtin"
    _lb: float = 0.0  # set by each goal's assign(): the bytes any plan reaching the goal must move

    def lower_bound_bytes(self, cluster: Cluster) -> float:
        return self._lb

    def configure(self, context: PlanContext) -> None:
        super().configure(context)
        self.opt = context.options
        self.a: Assignment = context.assignment
        self.cl: Cluster = self.a.cluster
        self.excluded_brokers = set(self.opt.exclude_brokers)
        self.draining: set[int] = set()
        self.movable: set[int] = set()

    # -- scope ---------------------------------------------------------------------------
    def _scope(self, partitions: Sequence[Partition]) -> None:
        self.movable = {p.index for p in partitions}
        # a broker the snapshot marks dead ("alive": false) never receives a replica
        self.placeable = [b for b in sorted(self.cl.brokers)
                          if b not in self.excluded_brokers and b not in self.draining
                          and self.cl.brokers[b].alive]
        self.n_racks = len({self.cl.rack_of(b) for b in self.placeable}) or 1
        self.cap = {b: x.capacity_bytes for b, x in self.cl.brokers.items()}
        self.rack = {b: x.rack_key for b, x in self.cl.brokers.items()}
        n = max(1, len(self.placeable))
        total_cap = sum(self.cap[b] for b in self.placeable) or 1.0
        self._mu = (sum(self.a.broker_bytes[b] for b in self.placeable) / total_cap) or 1.0
        self._mc = (sum(self.a.broker_count[b] for b in self.placeable) / n) or 1.0

    # -- rules ---------------------------------------------------------------------------
    def rack_ok(self, pi: int, broker: int, replacing: int | None = None) -> bool:
        """Would placing ``broker`` (instead of ``replacing``, or in addition) keep rack diversity?"""
        rack = self.rack
        reps = self.a.replicas[pi]
        others = [rack[r] for r in reps if r != replacing]
        rb = rack[broker]
        if rb not in others:
            return True
        current = len({rack[r] for r in reps})
        new_distinct = len(set(others))
        wanted = min(self.n_racks, len(others) + 1, current + (0 if replacing is not None else 1))
        return new_distinct >= wanted

    def hard_ceiling(self, broker: int) -> float:
        return self.cl.brokers[broker].capacity_bytes * self.opt.capacity_ceiling

    def dest_dir(self, broker: int, size: float) -> str | None:
        return self.a.best_dir(broker, size, self.opt.capacity_ceiling)

    def pick_dest(self, pi: int, replacing: int | None, candidates: Iterable[int],
                  ceiling: Mapping[int, float], topic_cap: int | None = None) -> tuple[int, str] | None:
        """Best destination for a replica of ``pi`` among brokers passing every rule: fewest
        replicas (relative to the mean), lowest utilisation after the move (relative to the
        mean), fewest replicas of the same topic - in that order of weight.

        :param replacing: the broker the replica leaves (None when adding a replica)
        :param ceiling: byte ceiling per broker for this goal
        :param topic_cap: at most this many replicas of the topic per broker (None = no cap)
        """
        a = self.a
        size = a.sizes[pi]
        reps = a.replicas[pi]
        topic = self.cl.partitions[pi].topic
        tb = a.topic_broker
        cap, counts, mu, mc = self.cap, a.broker_count, self._mu, self._mc
        best: tuple[float, int] | None = None
        # the rack rule (rack_ok) depends on the candidate only through its rack: decide it once
        rack = self.rack
        others = [rack[r] for r in reps if r != replacing]
        taken = set(others)
        current = len({rack[r] for r in reps})
        dup_ok = len(taken) >= min(self.n_racks, len(others) + 1,
                                   current + (0 if replacing is not None else 1))
        ordered = candidates is self.placeable
        if ordered:
            # scan brokers by (recent) base score and stop once no later broker can win: the
            # size and topic terms only add to the base; on 300 brokers this skips most of them
            candidates = self._by_base()
        for item in candidates:
            if ordered:
                base, b = item  # type: ignore[misc]
                if best is not None and base >= best[0]:
                    break
            else:
                b = item  # type: ignore[assignment]
            if b in reps or (not dup_ok and rack[b] in taken):
                continue
            load = a.broker_bytes[b] + size
            if load > ceiling[b] + EPS:
                continue
            tcount = tb.get((topic, b), 0)
            if topic_cap is not None and tcount + 1 > topic_cap:
                continue
            score = counts[b] / mc + 0.5 * load / cap[b] / mu + 0.05 * tcount
            if best is not None and score >= best[0]:
                continue
            if self.dest_dir(b, size) is None:
                continue
            best = (score, b)
        if best is None:
            return None
        b = best[1]
        return b, self.dest_dir(b, size)  # type: ignore[return-value]

    def _by_base(self) -> list[tuple[float, int]]:
        """Placeable brokers sorted by base score (replicas / mean + 0.5 x utilisation / mean),
        rebuilt every 64 calls: receivers only get fuller, so a stale entry never hides a
        better receiver (brokers that shrink are the over-loaded sources)."""
        self._order_calls = getattr(self, "_order_calls", 0) + 1
        order = getattr(self, "_order", None)
        if order is None or self._order_calls >= 64:
            a, cap, mu, mc = self.a, self.cap, self._mu, self._mc
            order = sorted((a.broker_count[b] / mc + 0.5 * a.broker_bytes[b] / cap[b] / mu, b)
                           for b in self.placeable)
            self._order = order
            self._order_calls = 0
        return order

    # -- output --------------------------------------------------------------------------
    def proposals(self) -> dict[tuple[str, int], Proposal]:
        """Proposals for every partition the goal touched, with log dirs where it chose one."""
        out: dict[tuple[str, int], Proposal] = {}
        for pi in sorted(self.a.touched):
            p = self.cl.partitions[pi]
            reps = tuple(self.a.replicas[pi])
            dirs = self.a.dirs[pi]
            old_dir = dict(zip(p.replicas, p.log_dirs))
            log_dirs = []
            for b, d in zip(reps, dirs):
                multi = len(self.cl.brokers[b].log_dirs) > 1
                # name a dir only where it matters: a new replica on a JBOD broker, or a
                # replica that changes dir inside its broker (KIP-113)
                if multi and (b not in old_dir or old_dir[b] != d):
                    log_dirs.append(d)
                else:
                    log_dirs.append(ANY)
            if reps == p.replicas and all(x == ANY for x in log_dirs):
                continue
            out[p.key] = Proposal(reps, tuple(log_dirs))
        return out

    # -- balancing helpers shared by rebalance / add-brokers ----------------------------
    def mean_util(self, brokers: Sequence[int]) -> float:
        total = sum(self.a.broker_bytes[b] for b in brokers)
        cap = sum(self.cl.brokers[b].capacity_bytes for b in brokers)
        return total / cap if cap else 0.0

    def balance_ceiling(self, brokers: Sequence[int]) -> dict[int, float]:
        mean = self.mean_util(brokers)
        limit = min(self.opt.capacity_ceiling, mean * (1 + self.opt.balance_tolerance))
        if mean * (1 + self.opt.balance_tolerance) > self.opt.capacity_ceiling and self.context:
            self.context.warnings.append(
                f"mean utilisation {mean:.1%} plus tolerance is above the capacity ceiling "
                f"{self.opt.capacity_ceiling:.0%}: the cluster needs more disk, not a rebalance")
        return {b: self.cl.brokers[b].capacity_bytes * limit for b in brokers}

    def broker_replicas(self, brokers: Iterable[int]) -> dict[int, list[tuple[float, int]]]:
        """Movable replicas per broker as (size, partition index), smallest first."""
        wanted = set(brokers)
        out: dict[int, list[tuple[float, int]]] = {b: [] for b in wanted}
        for pi in self.movable:
            size = self.a.sizes[pi]
            for r in self.a.replicas[pi]:
                if r in wanted:
                    out[r].append((size, pi))
        for v in out.values():
            v.sort()
        return out

    def topic_caps(self, brokers: Sequence[int]) -> dict[str, int]:
        """Even share of each topic per broker plus the allowed slack (topic spread goal)."""
        counts: dict[str, int] = defaultdict(int)
        for pi in self.movable:
            counts[self.cl.partitions[pi].topic] += len(self.a.replicas[pi])
        n = max(1, len(brokers))
        return {t: math.ceil(c / n) + self.opt.topic_spread_slack for t, c in counts.items()}

    def shed_bytes(self, src: int, items: list[tuple[float, int]], target: float,
                   dests: Sequence[int], ceiling: Mapping[int, float],
                   caps: Mapping[str, int] | None, prefer: set[int] | None = None) -> None:
        """Move replicas off ``src`` until its bytes are at most ``target``, moving as few bytes
        as possible: repeatedly the largest replica not above the remaining excess, and when
        none fits, the smallest replica that covers it.

        :param items: movable replicas on src, (size, partition index), smallest first
        :param prefer: partition indexes to try first (e.g. over-concentrated topics)
        """
        a = self.a
        sizes = [s for s, _ in items]
        parts = self.cl.partitions
        n = len(items)
        # skip pointers over removed (moved or unplaceable) candidates, with path compression:
        # down[j] -> largest live index <= j, up[j] -> smallest live index >= j
        down = list(range(n + 1))  # index shifted by one: down[j + 1] for item j, 0 = none
        up = list(range(n + 1))    # up[n] = none

        def live_down(j: int) -> int:
            root = j + 1
            while down[root] != root:
                root = down[root]
            x = j + 1
            while down[x] != root:
                down[x], x = root, down[x]
            return root - 1

        def live_up(j: int) -> int:
            root = j
            while up[root] != root:
                root = up[root]
            x = j
            while up[x] != root:
                up[x], x = root, up[x]
            return root

        def drop(j: int) -> None:
            down[j + 1] = j
            up[j] = j + 1

        def try_move(j: int) -> bool:
            size, pi = items[j]
            if size <= 0 or pi not in self.movable or src not in a.replicas[pi]:
                drop(j)
                return False
            cap = caps.get(parts[pi].topic) if caps is not None else None
            dest = self.pick_dest(pi, src, dests, ceiling, cap)
            # moved or nowhere to go right now: either way not a candidate any more
            drop(j)
            if dest is None:
                return False
            a.move(pi, src, dest[0], dest[1])
            return True

        prefer = prefer or set()
        while True:
            excess = a.broker_bytes[src] - target
            if excess <= EPS:
                return
            # replicas of about excess / surplus-count shed bytes and replica count together;
            # the last one is the largest that still fits the remaining excess
            surplus = a.broker_count[src] - self._mc
            want = excess / surplus if surplus > 1 else excess
            k = bisect_right(sizes, want)
            below: list[int] = []
            j = live_down(k - 1)
            while j >= 0 and len(below) < 40:
                below.append(j)
                j = live_down(j - 1)
            # near the wanted size, replicas of over-concentrated topics go first (fixes the
            # topic spread for free), then the next smaller ones, then the smallest larger one
            order = ([j for j in below if items[j][1] in prefer]
                     + [j for j in below if items[j][1] not in prefer])
            moved = False
            for j in order:
                if try_move(j):
                    moved = True
                    break
            tries = 0
            while not moved and tries < 400:
                j = live_down(k - 1)
                if j < 0:
                    break
                moved = try_move(j)
                tries += 1
            tries = 0
            while not moved and tries < 400:
                j = live_up(k)
                if j >= n:
                    break
                moved = try_move(j)
                tries += 1
            if not moved:
                if self.context is not None:
                    self.context.warnings.append(
                        f"broker {src} stays {excess / 1e9:.2f} GB above its target: no replica "
                        "could move without breaking a rack, capacity or exclusion rule")
                return

    def balance_leaders(self, brokers: Sequence[int], only: set[int] | None = None,
                        tolerance: float | None = None) -> None:
        """Even out preferred leaders by swapping leadership inside partitions (no data moves).

        :param only: restrict swaps to these partitions (add-brokers: partitions on new brokers)
        """
        a = self.a
        tol = self.opt.leader_tolerance if tolerance is None else tolerance
        eligible = set(brokers)
        pool = [pi for pi in (self.movable if only is None else only & self.movable)
                if all(r in eligible for r in a.replicas[pi][:1])]
        total = sum(a.broker_leaders[b] for b in brokers)
        mean = total / max(1, len(brokers))
        hi = math.ceil(mean * (1 + tol))
        lo = math.floor(mean * (1 - tol))
        led: dict[int, list[int]] = defaultdict(list)
        follows: dict[int, list[int]] = defaultdict(list)
        for pi in pool:
            reps = a.replicas[pi]
            led[reps[0]].append(pi)
            for r in reps[1:]:
                if r in eligible:
                    follows[r].append(pi)
        # big producers first: moving their leadership evens out bytes-in as well
        rate = [p.bytes_in_per_sec for p in self.cl.partitions]
        for b in sorted(brokers, key=lambda x: -a.broker_leaders[x]):
            if a.broker_leaders[b] <= hi:
                continue
            for pi in sorted(led[b], key=lambda i: -rate[i]):
                if a.broker_leaders[b] <= hi:
                    break
                reps = a.replicas[pi]
                if reps[0] != b:
                    continue
                cands = [r for r in reps[1:] if r in eligible]
                if not cands:
                    continue
                f = min(cands, key=lambda r: a.broker_leaders[r])
                if a.broker_leaders[f] + 1 < a.broker_leaders[b] and a.broker_leaders[f] < hi:
                    a.make_leader(pi, f)
        for b in sorted(brokers, key=lambda x: a.broker_leaders[x]):
            if a.broker_leaders[b] >= lo:
                continue
            for pi in follows[b]:
                if a.broker_leaders[b] >= lo:
                    break
                reps = a.replicas[pi]
                if b not in reps[1:] or reps[0] not in eligible:
                    continue
                cur = reps[0]
                if a.broker_leaders[cur] - 1 > a.broker_leaders[b] and a.broker_leaders[cur] > lo:
                    a.make_leader(pi, b)


class Rebalance(BuiltinGoal):
    """Even out disk bytes relative to capacity, then topic spread, replica counts and leaders."""

    name = "rebalance"

    def assign(self, cluster: Cluster, partitions: Sequence[Partition]) -> dict:
        self._scope(partitions)
        a, ctx = self.a, self.context
        brokers = self.placeable
        ceiling = self.balance_ceiling(brokers)
        self._lb = sum(max(0.0, a.broker_bytes[b] - ceiling[b]) for b in brokers)
        caps = self.topic_caps(brokers) if self.opt.balance_topic_spread else None
        sources = sorted((b for b in brokers if a.broker_bytes[b] > ceiling[b] + EPS),
                         key=lambda b: ceiling[b] - a.broker_bytes[b])
        # candidates and topic spread: scored on Spark when the planner runs there
        if ctx is not None and ctx.replicas_df is not None:
            from kafka_reassign.planner import spark_stats

            excess = {b: a.broker_bytes[b] - ceiling[b] for b in sources}
            cands = spark_stats.rebalance_candidates(ctx.spark, ctx.replicas_df, excess,
                                                     self.movable, caps)
        else:
            cands = self.broker_replicas(sources)
        prefer: set[int] = set()
        if caps is not None:
            for pi in self.movable:
                t = self.cl.partitions[pi].topic
                if any(a.topic_broker[(t, r)] > caps[t] for r in a.replicas[pi]):
                    prefer.add(pi)
        for src in sources:
            self.shed_bytes(src, cands.get(src, []), ceiling[src], brokers, ceiling, caps, prefer)
        if caps is not None:
            self._spread(brokers, ceiling, caps)
        if self.opt.balance_counts:
            self._counts(brokers, ceiling, caps)
        if self.opt.balance_leaders:
            self.balance_leaders(brokers)
        return self.proposals()

    def _spread(self, brokers: Sequence[int], ceiling: Mapping[int, float],
                caps: Mapping[str, int]) -> None:
        """Move the smallest replicas of over-concentrated topics to brokers with room."""
        a = self.a
        # (topic, broker) counts come from the Spark aggregate (kept current by the moves)
        allowed = set(brokers)
        over = sorted(((t, b) for (t, b), c in a.topic_broker.items()
                       if c > caps.get(t, c) and b in allowed),
                      key=lambda tb: (caps[tb[0]] - a.topic_broker[tb], tb))
        if not over:
            return
        by_tb: dict[tuple[str, int], list[tuple[float, int]]] = defaultdict(list)
        wanted = set(over)
        for pi in self.movable:
            t = self.cl.partitions[pi].topic
            for r in a.replicas[pi]:
                if (t, r) in wanted:
                    by_tb[(t, r)].append((a.sizes[pi], pi))
        for (t, b) in over:
            items = sorted(by_tb.get((t, b), []))
            even = caps[t] - self.opt.topic_spread_slack
            for size, pi in items:
                if a.topic_broker[(t, b)] <= caps[t]:
                    break
                if b not in a.replicas[pi]:
                    continue
                dest = self.pick_dest(pi, b, brokers, ceiling, topic_cap=max(1, even))
                if dest is not None:
                    a.move(pi, b, dest[0], dest[1])

    def _counts(self, brokers: Sequence[int], ceiling: Mapping[int, float],
                caps: Mapping[str, int] | None) -> None:
        """Even out replica counts by moving the smallest replicas (cheap in bytes)."""
        a = self.a
        tol = self.opt.count_tolerance
        mean = sum(a.broker_count[b] for b in brokers) / max(1, len(brokers))
        hi, lo = math.ceil(mean * (1 + tol)), math.floor(mean * (1 - tol))
        if all(lo <= a.broker_count[b] <= hi for b in brokers):
            return
        heaps = {b: list(v) for b, v in self.broker_replicas(brokers).items()}
        for h in heaps.values():
            heapq.heapify(h)
        parts = self.cl.partitions
        blocked: set[int] = set()
        budget = math.ceil(sum(abs(a.broker_count[b] - mean) for b in brokers)) + 10
        for _ in range(budget):
            live = [b for b in brokers if b not in blocked]
            if not live:
                break
            src = max(live, key=lambda b: a.broker_count[b])
            dst_min = min(a.broker_count[b] for b in brokers)
            if (a.broker_count[src] <= hi and dst_min >= lo) or a.broker_count[src] - dst_min <= 1:
                break
            # the 20 emptiest brokers that stay below src and the upper bound after receiving
            targets = sorted((b for b in brokers if a.broker_count[b] + 1 < a.broker_count[src]
                              and a.broker_count[b] < hi), key=lambda b: a.broker_count[b])[:20]
            h = heaps[src]
            moved = False
            skipped: list[tuple[float, int]] = []
            while h and len(skipped) < 50:
                size, pi = heapq.heappop(h)
                if src not in a.replicas[pi]:
                    continue
                cap = caps.get(parts[pi].topic) if caps is not None else None
                dest = self.pick_dest(pi, src, targets, ceiling, cap)
                if dest is None:
                    skipped.append((size, pi))
                    continue
                a.move(pi, src, dest[0], dest[1])
                heapq.heappush(heaps[dest[0]], (size, pi))
                moved = True
                break
            for item in skipped:
                heapq.heappush(h, item)
            if not moved:
                blocked.add(src)


class AddBrokers(BuiltinGoal):
    """Fill the given (new) brokers up to the mean; only moves replicas onto them.

    Replicas are taken from the fullest old brokers first, so the old brokers come down
    towards the mean too; but an old broker that was far above the mean before stays above it
    (evening out old brokers among themselves is the rebalance goal, not this one).
    """

    name = "add-brokers"

    def assign(self, cluster: Cluster, partitions: Sequence[Partition]) -> dict:
        self._scope(partitions)
        a, opt = self.a, self.opt
        new = [b for b in opt.brokers if b in self.placeable]
        old = [b for b in self.placeable if b not in set(new)]
        if not new:
            raise GoalError(Problem("brokers", "add-brokers needs at least one broker to fill "
                                               "that is not excluded", "no_brokers"))
        brokers = self.placeable
        mean = self.mean_util(brokers)
        tol = opt.balance_tolerance
        cap = {b: self.cl.brokers[b].capacity_bytes for b in brokers}
        ceil_util = min(opt.capacity_ceiling, mean * (1 + tol))
        ceiling = {b: cap[b] * ceil_util for b in brokers}
        # the goal is met when every new broker is within the tolerance of the mean: the bytes
        # still missing there are what any plan must copy (old brokers only give, see docstring)
        self._lb = sum(max(0.0, cap[n] * mean * (1 - tol) - a.broker_bytes[n]) for n in new)
        # aim between the tolerance floor and the mean: moving to exactly the mean would move
        # more than needed, stopping at the floor would leave the old brokers fuller
        fill = {n: cap[n] * min(ceil_util, mean * (1 - tol / 2)) for n in new}
        mean_count = sum(a.broker_count[b] for b in brokers) / len(brokers)
        items = self.broker_replicas(old)
        sizes = {b: [s for s, _ in v] for b, v in items.items()}
        taken: set[tuple[int, int]] = set()
        src_heap = [(-(a.broker_bytes[b] / cap[b]), b) for b in old]
        heapq.heapify(src_heap)
        active = {n for n in new if a.broker_bytes[n] < fill[n] - EPS}
        stuck: dict[int, int] = defaultdict(int)
        while active and src_heap:
            for n in sorted(active, key=lambda x: a.broker_bytes[x] / cap[x]):
                remaining = fill[n] - a.broker_bytes[n]
                if remaining <= EPS:
                    active.discard(n)
                    continue
                # ask for replicas of the size that fills both bytes and replica count
                want_count = max(1.0, mean_count - a.broker_count[n])
                desired = remaining / want_count
                if not self._take_one(n, desired, remaining, src_heap, items, sizes, taken,
                                      ceiling, cap):
                    stuck[n] += 1
                    if stuck[n] > 3:
                        active.discard(n)
                        self.context.warnings.append(  # type: ignore[union-attr]
                            f"broker {n} filled to {a.broker_bytes[n] / cap[n]:.1%} only: no more "
                            "replicas fit the rack and capacity rules")
        if opt.balance_leaders:
            on_new = {pi for pi in self.movable if any(r in set(new) for r in a.replicas[pi])}
            self._leaders_to_new(new, brokers, on_new)
        return self.proposals()

    def _take_one(self, n: int, desired: float, remaining: float, src_heap: list,
                  items: dict[int, list[tuple[float, int]]], sizes: dict[int, list[float]],
                  taken: set[tuple[int, int]], ceiling: dict[int, float],
                  cap: dict[int, float]) -> bool:
        """Move one replica from the fullest old broker onto new broker ``n``."""
        a = self.a
        tried: list[tuple[float, int]] = []
        ok = False
        while src_heap and len(tried) < 8:
            negu, src = heapq.heappop(src_heap)
            tried.append((negu, src))
            lst, sz = items[src], sizes[src]
            if not lst:
                continue
            k = min(bisect_right(sz, min(desired, remaining)), len(lst) - 1)
            # scan outwards from the desired size
            order = []
            lo, hi = k, k + 1
            while (lo >= 0 or hi < len(lst)) and len(order) < 60:
                if lo >= 0:
                    order.append(lo)
                    lo -= 1
                if hi < len(lst):
                    order.append(hi)
                    hi += 1
            for j in order:
                size, pi = lst[j]
                if (src, pi) in taken or size <= 0 or size > remaining + desired:
                    continue
                if src not in a.replicas[pi] or n in a.replicas[pi]:
                    continue
                if a.broker_bytes[n] + size > ceiling[n] + EPS or not self.rack_ok(pi, n, src):
                    continue
                d = self.dest_dir(n, size)
                if d is None:
                    continue
                a.move(pi, src, n, d)
                taken.add((src, pi))
                ok = True
                break
            if ok:
                break
        for negu, src in tried:
            heapq.heappush(src_heap, (-(a.broker_bytes[src] / cap[src]), src))
        return ok

    def _leaders_to_new(self, new: Sequence[int], brokers: Sequence[int], pool: set[int]) -> None:
        """Give new brokers their share of preferred leaders by swaps on partitions they hold."""
        a = self.a
        mean = sum(a.broker_leaders[b] for b in brokers) / len(brokers)
        target = math.floor(mean * (1 - self.opt.leader_tolerance / 2))
        for n in new:
            for pi in sorted(pool, key=lambda i: -self.cl.partitions[i].bytes_in_per_sec):
                if a.broker_leaders[n] >= target:
                    break
                reps = a.replicas[pi]
                if n in reps[1:] and reps[0] not in set(new) and a.broker_leaders[reps[0]] > mean:
                    a.make_leader(pi, n)


class RemoveBrokers(BuiltinGoal):
    """Drain the given brokers; every other replica stays where it is."""

    name = "remove-brokers"

    def configure(self, context: PlanContext) -> None:
        super().configure(context)
        self.draining = set(self.opt.brokers)

    def assign(self, cluster: Cluster, partitions: Sequence[Partition]) -> dict:
        self._scope(partitions)
        a = self.a
        if not self.draining:
            raise GoalError(Problem("brokers", "remove-brokers needs the brokers to drain", "no_brokers"))
        if not self.placeable:
            raise GoalError(Problem("brokers", "no broker would be left to take the replicas",
                                    "no_brokers"))
        work = [(a.sizes[pi], pi, r) for pi in self.movable for r in a.replicas[pi]
                if r in self.draining]
        self._lb = sum(s for s, _, _ in work)
        ceiling = {b: self.hard_ceiling(b) for b in self.placeable}
        problems: list[Problem] = []
        # biggest first: they are the hardest to fit (first-fit decreasing)
        for size, pi, r in sorted(work, key=lambda x: (-x[0], x[1])):
            dest = self.pick_dest(pi, r, self.placeable, ceiling)
            if dest is None:
                problems.append(Problem(self.cl.partitions[pi].name,
                                        f"no broker can take its replica from broker {r} "
                                        "without breaking the rack or capacity rules",
                                        "no_destination"))
                continue
            a.move(pi, r, dest[0], dest[1])
        if problems:
            raise GoalError(problems[:20] + ([Problem("...", f"{len(problems) - 20} more")]
                                             if len(problems) > 20 else []))
        return self.proposals()


class ReplicationFactor(BuiltinGoal):
    """Raise or lower the replication factor of the given topics."""

    name = "replication-factor"
    changes_replication_factor = True

    def assign(self, cluster: Cluster, partitions: Sequence[Partition]) -> dict:
        self._scope(partitions)
        a, rf = self.a, self.opt.replication_factor
        assert rf is not None  # validated by the planner
        topics = set(self.opt.topics) if self.opt.topics else None
        scope = [pi for pi in sorted(self.movable)
                 if topics is None or self.cl.partitions[pi].topic in topics]
        ceiling = {b: self.hard_ceiling(b) for b in self.placeable}
        self._lb = sum(a.sizes[pi] * max(0, rf - len(a.replicas[pi])) for pi in scope)
        problems: list[Problem] = []
        rack_of = self.cl.rack_of
        for pi in sorted(scope, key=lambda i: -a.sizes[i]):
            while len(a.replicas[pi]) < rf:
                dest = self.pick_dest(pi, None, self.placeable, ceiling)
                if dest is None:
                    problems.append(Problem(self.cl.partitions[pi].name,
                                            f"no broker can take replica {len(a.replicas[pi]) + 1} "
                                            "without breaking the rack or capacity rules",
                                            "no_destination"))
                    break
                a.add(pi, dest[0], dest[1])
            while len(a.replicas[pi]) > rf:
                reps = a.replicas[pi]
                # drop a follower, preferring a duplicated rack, then the fullest broker
                counts: dict[str, int] = defaultdict(int)
                for r in reps:
                    counts[rack_of(r)] += 1
                cands = [r for r in reps[1:] if r not in self.excluded_brokers]
                if not cands:
                    problems.append(Problem(self.cl.partitions[pi].name,
                                            "every follower is on an excluded broker", "excluded"))
                    break
                drop = max(cands, key=lambda r: (counts[rack_of(r)], a.util(r)))
                a.remove(pi, drop)
        if problems:
            raise GoalError(problems[:20])
        return self.proposals()


class RackRepair(BuiltinGoal):
    """Move replicas that share a rack with another replica of their partition to unused racks."""

    name = "rack-repair"

    def assign(self, cluster: Cluster, partitions: Sequence[Partition]) -> dict:
        self._scope(partitions)
        a = self.a
        rack_of = self.cl.rack_of
        ceiling = {b: self.hard_ceiling(b) for b in self.placeable}
        self._lb = 0.0
        unfixable = 0
        for pi in sorted(self.movable, key=lambda i: -a.sizes[i]):
            reps = a.replicas[pi]
            want = min(self.n_racks, len(reps))
            have = len({rack_of(r) for r in reps})
            if have >= want:
                continue
            self._lb += a.sizes[pi] * (want - have)
            # keep the leader and the first replica seen in each rack; move the others
            seen: set[str] = set()
            dupes: list[int] = []
            for r in reps:
                if rack_of(r) in seen:
                    dupes.append(r)
                else:
                    seen.add(rack_of(r))
            for r in sorted(dupes, key=lambda x: -a.util(x)):
                if len({rack_of(x) for x in a.replicas[pi]}) >= want:
                    break
                if r in self.excluded_brokers:
                    continue
                free = [b for b in self.placeable if rack_of(b) not in {rack_of(x) for x in a.replicas[pi]}]
                dest = self.pick_dest(pi, r, free, ceiling)
                if dest is None:
                    unfixable += 1
                    continue
                a.move(pi, r, dest[0], dest[1])
        if unfixable and self.context is not None:
            self.context.warnings.append(f"{unfixable} replicas still share a rack: no broker in a "
                                         "free rack had room under the capacity ceiling")
        return self.proposals()


class Disks(BuiltinGoal):
    """KIP-113: balance log dirs inside each broker; replicas stay on their brokers."""

    name = "disks"

    def assign(self, cluster: Cluster, partitions: Sequence[Partition]) -> dict:
        self._scope(partitions)
        a, opt = self.a, self.opt
        self._lb = 0.0
        jbod = [b for b in self.placeable if len(self.cl.brokers[b].log_dirs) > 1]
        unknown = [p.name for p in self.cl.partitions
                   if not p.dirs_known and any(r in set(jbod) for r in p.replicas)]
        if unknown:
            raise GoalError(Problem("snapshot", f"{len(unknown)} partitions on brokers with several "
                                                f"log dirs have no log_dirs (e.g. {unknown[:3]}): "
                                                "take the snapshot with DescribeLogDirs",
                                    "unknown_log_dirs"))
        for b in jbod:
            dirs = self.cl.brokers[b].log_dirs
            util = a.broker_bytes[b] / self.cl.brokers[b].capacity_bytes
            # a dir may end at most `tolerance` above its broker's utilisation (the target every
            # plan must reach: the lower bound); a receiving dir also stays under the ceiling
            ceil = {d.path: d.capacity_bytes * util * (1 + opt.balance_tolerance) for d in dirs}
            room = {d.path: min(ceil[d.path], d.capacity_bytes * opt.capacity_ceiling) for d in dirs}
            self._lb += sum(max(0.0, a.dir_bytes[(b, d.path)] - ceil[d.path]) for d in dirs)
            items: dict[str, list[tuple[float, int]]] = defaultdict(list)
            for pi in self.movable:
                reps = a.replicas[pi]
                if b in reps:
                    items[a.dirs[pi][reps.index(b)]].append((a.sizes[pi], pi))
            for d in sorted(dirs, key=lambda d: ceil[d.path] - a.dir_bytes[(b, d.path)]):
                lst = sorted(items[d.path])
                sizes = [s for s, _ in lst]
                used: set[int] = set()
                while a.dir_bytes[(b, d.path)] - ceil[d.path] > EPS:
                    excess = a.dir_bytes[(b, d.path)] - ceil[d.path]
                    k = bisect_right(sizes, excess)
                    order = list(range(k - 1, -1, -1)) + list(range(k, len(lst)))
                    moved = False
                    for j in order:
                        if j in used or lst[j][0] <= 0:
                            continue
                        size, pi = lst[j]
                        dest = max((o for o in dirs if o.path != d.path
                                    and a.dir_bytes[(b, o.path)] + size <= room[o.path] + EPS),
                                   key=lambda o: room[o.path] - a.dir_bytes[(b, o.path)], default=None)
                        if dest is None:
                            continue
                        a.set_dir(pi, b, dest.path)
                        used.add(j)
                        moved = True
                        break
                    if not moved:
                        self.context.warnings.append(  # type: ignore[union-attr]
                            f"broker {b} log dir {d.path} stays above its target")
                        break
        return self.proposals()


GOALS: dict[str, type[BuiltinGoal]] = {
    "rebalance": Rebalance,
    "add-brokers": AddBrokers,
    "remove-brokers": RemoveBrokers,
    "replication-factor": ReplicationFactor,
    "rack-repair": RackRepair,
    "disks": Disks,
}
