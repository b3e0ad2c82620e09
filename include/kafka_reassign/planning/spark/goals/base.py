"""Shared placement rules of the driver-side goals (:class:`BuiltinGoal`).

* a replica never lands on an excluded broker, a broker being drained, or a broker that
  already holds the partition;
* rack diversity never drops, and a new replica goes to an unused rack whenever racks allow;
* a broker or log dir that receives data ends at most at ``capacity_ceiling`` of its capacity;
* excluded topics are never offered; a replica on an excluded broker never moves.

The balancing goals (rebalance, add-brokers, remove-brokers) do not use these classes: they run
on Spark (:mod:`kafka_reassign.planning.spark.flow`).
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from kafka_reassign.planning.spark.assignor import PlanContext, Proposal, ReplicaAssignor
from kafka_reassign.planning.spark.cluster import ANY, Assignment, Cluster, Partition

EPS = 1e-6


class BuiltinGoal(ReplicaAssignor):
    """Shared placement rules and helpers of the built-in goals."""

    name = "builtin"
    _lb: float = 0.0  # set by each goal's assign(): the bytes any plan reaching the goal must move
    bound_reached: bool = True  # False: the plan stops short of what _lb is for (no ratio reported)

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
        # a broker the snapshot marks dead ("alive": false) or cordoned never receives a replica
        self.placeable = [b for b in sorted(self.cl.brokers)
                          if b not in self.excluded_brokers and b not in self.draining
                          and self.cl.brokers[b].alive and not self.cl.brokers[b].cordoned]
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
        # All placeable brokers are scanned by (recent) base score, stopping once no later broker
        # can win: the size and topic terms only add to the base; on 300 brokers this skips most.
        scan: Iterable[int | tuple[float, int]] = self._by_base() if candidates is self.placeable else candidates
        for item in scan:
            if isinstance(item, tuple):
                base, b = item
                if best is not None and base >= best[0]:
                    break
            else:
                b = item
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
