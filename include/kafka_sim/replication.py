"""Replication physics: followers fetching from leaders, future replicas copying, the ISR.

Every transfer that is not simply "a caught-up follower tracking its leader" is a flow
crossing capacitated resources: the leader's outbound and the follower's inbound network
(``network_bytes_per_sec`` minus the steady in-sync traffic), the KIP-73 quotas
(:mod:`kafka_sim.quotas`) for out-of-sync replicas of throttled partitions, the disk and
the KIP-113 quota for future replicas. Rates are max-min fair (:mod:`kafka_sim.fairshare`)
and constant between events (a flow catching up, a quota running out or recovering, an
ISR member's lag deadline), so a tick only integrates bytes.

Kafka behaviour followed (apache/kafka):

- Quota accounting and throttling: see :mod:`kafka_sim.quotas` (KafkaApis.handleFetchRequest,
  ReplicaManager.shouldLeaderThrottle, ReplicaFetcherThread.processPartitionData,
  RemoteLeaderEndPoint.shouldFollowerThrottle).
- A follower falls behind when its broker's link (or its leader's) cannot carry the
  partition's write rate; it leaves the ISR once it has not caught up for
  replica.lag.time.max.ms, checked every half of it (Partition.getOutOfSyncReplicas, the
  "isr-expiration" task of ReplicaManager), and rejoins once its log end reaches the
  leader's (Partition.maybeExpandIsr / isFollowerInSync).
"""
from __future__ import annotations

import heapq
import math
from typing import Any

from kafka_sim.model_base import CATCH_UP_EPS, MAX_SUBSTEPS, OrderedSet
from kafka_sim.replication_flows import Flow, FlowPlanning, Plan, bring_to, grow
from kafka_sim.replication_isr import IsrChanges
from kafka_sim.replication_patches import QuantumPatches
from kafka_sim.replication_quotas import ReplicationQuotas
from kafka_sim.replication_tracking import ChangeTracking
from kafka_sim.state import Partition, Replica


class Replication(QuantumPatches, FlowPlanning, IsrChanges, ChangeTracking, ReplicationQuotas):
    """Mixin of ClusterModel: advances replication in simulated time.

    Quotas (:mod:`kafka_sim.replication_quotas`), change tracking
    (:mod:`kafka_sim.replication_tracking`), flow planning (:mod:`kafka_sim.replication_flows`)
    and the re-plan quantum's patches (:mod:`kafka_sim.replication_patches`) are its parts;
    this class steps time from event to event.
    """

    def _init_physics(self) -> None:
        """The physics' own state, empty (ClusterModel.__init__)."""
        self._active: OrderedSet[Partition] = OrderedSet()
        self._dirty: OrderedSet[Partition] = OrderedSet()
        # per partition: (broker, out, in, leader-quota recorded, follower-quota recorded)
        self._contrib: dict[Partition, tuple[tuple[int, float, float, float, float], ...]] = {}
        self._steady_rec: dict[tuple[str, int], float] = {}  # in-sync bytes/s recorded per quota
        self._flow_rec: dict[tuple[str, int], float] = {}  # flows' bytes/s recorded per quota
        self._meters: dict[tuple[str, int], Any] = {}  # QuotaMeter per (side, broker)
        self._quota_keys: list[tuple[str, int]] = []  # quotas the current plan's flows cross
        # per quota: its meter, (version, bound, mode) and the next event found for them
        self._kept_events: dict[tuple[str, int], tuple[Any, tuple[int, float, int], float]] = {}
        self.replan_all = False  # True: nothing kept between plans (tests compare the two)
        # > 0: after a copy catches up, the other flows keep their rates until this many virtual
        # seconds have passed since the last full plan (Replication._physics_until); 0: exact
        self.replan_quantum = 0.0
        # a list the model appends every partition it changes to (_touch), for a reader that
        # wants only what changed (the rehearsal's watch drains it); None: not kept
        self.touch_journal: list[Partition] | None = None
        self.plans_made = 0  # full plans (rates shared anew), counted for tests and cost figures
        self._planned_at = -math.inf  # virtual time of the last full plan
        self._since_plan: set[Partition] = set()  # partitions flushed since the current plan
        self._course_changed: set[tuple[str, int]] = set()  # quotas recorded in since the current plan
        self._lazy_flows: list[Any] = []  # flows whose bytes are integrated when read (replan_quantum)
        self._synced: tuple[list[Any] | None, float] = (None, 0.0)  # the flows and time last synced (_sync_flows)
        self._last_kept: Any = None  # replan_quantum: the last plan's quota events, reused while they hold
        self._flow_cache: dict[Partition, list[Any]] = {}  # flows of each active partition
        self._res_ids: dict[tuple[str, int], int] = {}  # physics resource key -> its number
        self._res_keys: list[tuple[str, int]] = []  # physics resource number -> its key
        self._fresh: OrderedSet[Partition] = OrderedSet()  # flushed since the last zero-time check
        self._lag_cache: dict[int, float] = {}  # replica.lag.time.max.ms per broker, in seconds
        self._rejoins: dict[Any, float] = {}  # followers back in the ISR at their next fetch, and when
        self._rejoin_next = math.inf  # the earliest of them

    def _run(self, until: float) -> None:
        """Advance the physics from ``self._t`` to ``until``, event by event."""
        self._flush_dirty()
        self._finish_trivial()
        while True:
            balance_at = self._balance_at
            if balance_at is None or balance_at > until:
                self._physics_until(until)
                return
            self._physics_until(balance_at)
            self._balance_leaders()  # the controller's periodic preferred-leader election

    def _physics_until(self, until: float) -> None:
        steps = 0
        lazy = self._quantized()  # bytes integrated when read (_due_flows)
        try:
            while self._t < until:
                if not self._active:
                    if self._flow_rec:
                        self._set_flow_records({})
                    self._sync_flows()
                    self._lazy_flows = []
                    self._t = until
                    self._plan = None
                    break
                if self._plan is None:
                    self._sync_flows()
                    self._plan = self._make_plan()
                plan = self._plan
                flows, event_at, lagging, _kept = plan
                steps += 1
                forced = steps > MAX_SUBSTEPS  # too many events in one call: finish in one step
                stop_at = until if forced else min(until, event_at, self._rejoin_next)
                dt = max(0.0, stop_at - self._t)
                if dt > 0:
                    if not lazy:
                        self._integrate(flows, dt)
                    self._t = stop_at
                if self._t >= self._rejoin_next:
                    self._sync_flows()  # a join reads the follower's bytes
                    self._rejoin_due()
                    if self._plan is not plan:
                        self._sync_changed()
                        self._flush_dirty()
                        self._finish_trivial()
                        continue
                if self._t >= event_at or forced:
                    self._settle(self._due_flows(plan, forced) if lazy else flows, lagging)
                    # the settle drops the plan when it changes a partition (_touch, _caught_up)
                    unchanged = (self._plan is plan and not forced and not self._dirty and not self._fresh
                                 and not self.replan_all)
                    self._plan = self._refreshed(plan) if unchanged else None
                    if self._plan is None:
                        self._sync_changed()
                        self._flush_dirty()
                        self._finish_trivial()
                        if (lazy and not forced and self._plan is None
                                and self._t < self._planned_at + self.replan_quantum):
                            self._plan = self._patched(plan)
        finally:
            self._sync_flows()

    def _finish_trivial(self) -> None:
        """Finish at once what needs no time: empty logs, caught-up copies of idle partitions.

        Done without a physics plan, so a burst of admin requests at one instant costs no
        re-planning; everything else waits for time to pass.
        """
        while self._fresh:
            fresh, self._fresh = self._fresh, OrderedSet()
            done: list[Flow] = []
            for p in fresh:
                if p not in self._active:
                    continue
                fl = self._flow_cache.get(p)
                if fl is None:
                    fl = self._flow_cache[p] = self._partition_flows(p)
                log = p.log_bytes()
                for f in fl:
                    r = f.replica
                    if f.kind == 0 and p._rate == 0 and log - r._bytes <= CATCH_UP_EPS:
                        f.grow = f.rate = 0.0
                        done.append(f)
                    elif (f.kind == 1 and not f.follows and p._rate == 0
                          and r.exact_bytes() - r.future_bytes <= CATCH_UP_EPS):
                        f.grow = f.rate = 0.0
                        done.append(f)
            if not done:
                return
            self._settle(done, [])
            self._plan = None
            self._flush_dirty()

    def _due_flows(self, plan: Plan, forced: bool) -> list[Flow]:
        """With ``replan_quantum``: the flows an event may finish, their bytes brought to now.

        The flows whose planned catch-up is due, and the other flows of their partitions (a
        completion may elect a leader and truncate them); every flow when ISR members lag (a
        follower may reach the high watermark they hold back) or the step was forced.
        """
        flows, _event, lagging, kept = plan
        if forced or lagging:
            self._sync_flows()
            return flows
        heap, now, due = kept.heap, self._t, []
        while heap and heap[0][0] <= now:
            at, _n, f = heapq.heappop(heap)
            if f.at == at:  # not left the plan (nan) since
                due.append(f)
        cache = self._flow_cache
        for p in {f.partition for f in due}:
            bring_to(cache.get(p) or [f for f in due if f.partition is p], now)
        return due

    def _sync_flows(self) -> None:
        """Bring the bytes of the flows integrated lazily to now (every flow of the last plan).

        Not again while neither the time nor the plan's flows changed: every request to the model
        syncs, and a refill's one config write per topic made this a walk over every flow in
        flight per topic (a flow planned or re-rated since starts at now: it is in sync).
        """
        flows = self._lazy_flows
        if flows and (flows is not self._synced[0] or self._t != self._synced[1]):
            bring_to(flows, self._t)
            self._synced = (flows, self._t)

    def _sync_changed(self) -> None:
        """Bring the flows of the partitions an event changed to now, before they are planned anew."""
        if self._lazy_flows:
            cache = self._flow_cache
            for p in self._dirty:
                fl = cache.get(p)
                if fl:
                    bring_to(fl, self._t)

    @staticmethod
    def _integrate(flows: list[Flow], dt: float) -> None:
        # events end every step before a follower could pass the leader's log end
        for f in flows:
            rate = f.rate
            if rate > 0:
                grow(f, rate * dt)

    def _settle(self, flows: list[Flow], lagging: list[tuple[Partition, Replica, float]]) -> None:
        """At an event: finish caught-up flows, swap finished future replicas, shrink the ISR."""
        finished: list[Flow] = []
        for f in flows:
            r = f.replica
            if f.kind == 0:
                target = f.partition.log_bytes()
                if target - r._bytes <= CATCH_UP_EPS:
                    r._bytes = min(r._bytes, target)
                    if f.keeps_up():
                        r._bytes = target
                        finished.append(f)
                    elif r.broker not in f.partition.isr:
                        self._join_isr(f.partition, r)  # reached the log end, even if it slips again
                elif r.broker not in f.partition.isr and r._bytes >= self._hw_bytes(f.partition) - CATCH_UP_EPS:
                    if f.partition.frozen_hw is None:  # the HW a lagging ISR member holds back
                        self._join_isr(f.partition, r, caught_up=False)
                    else:
                        self._schedule_rejoin(r, f.rate)
            else:
                src = r.exact_bytes()
                if src - r.future_bytes <= CATCH_UP_EPS:
                    r.future_bytes = src
                    finished.append(f)
        for f in finished:
            if f.kind == 0:
                self._caught_up(f.partition, f.replica)
        for f in finished:
            r = f.replica
            if f.kind == 1 and r.future_log_dir is not None and f.partition._reps.get(r.broker) is r:
                if r.exact_bytes() - r.future_bytes <= CATCH_UP_EPS:
                    self._swap_future(f.partition, r)
        out: dict[Partition, list[Replica]] = {}
        for p, r, deadline in lagging:
            if self._t >= deadline and not r.tracking and r.broker in p.isr:
                out.setdefault(p, []).append(r)
        if out:
            rates = {id(f.replica): f.rate for f in flows if f.kind == 0}
            for p, leaving in out.items():
                self._shrink_isr(p, leaving, rates)

    def _caught_up(self, p: Partition, r: Replica) -> None:
        """A follower keeps up with the leader's log end: it tracks the leader and is in the ISR."""
        r.tracking = True
        r._bytes = 0.0
        self._usage_changed(p)
        self._dirty.add(p)
        self._plan = None
        self._join_isr(p, r)

    def _swap_future(self, p: Partition, r: Replica) -> None:
        """KIP-113: the future replica caught up; it replaces the current one in its dir."""
        self._count_log(r.broker, r.log_dir, -1)  # the old copy is deleted
        r.log_dir = r.future_log_dir  # type: ignore[assignment]
        r.future_log_dir = None
        r.future_bytes = 0.0
        self._usage_changed(p)
        self._touch(p)
