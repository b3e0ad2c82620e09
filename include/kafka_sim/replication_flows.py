"""Flows of the replication physics: who copies what through which resources, at what rate.

Every transfer that is not simply "a caught-up follower tracking its leader" is a flow
crossing capacitated resources: the leader's outbound and the follower's inbound network
(``network_bytes_per_sec`` minus the steady in-sync traffic, which shares a saturated link
with them per partition: :mod:`kafka_sim.replication_sharing`), the KIP-73 quotas for
out-of-sync replicas of throttled partitions, the disk and the KIP-113 quota for future
replicas. Rates are max-min fair (:mod:`kafka_sim.fairshare`) and constant until the next
event, which the plan computes too.
"""
from __future__ import annotations

import heapq
import math
from collections import Counter
from itertools import chain
from typing import Iterable

from kafka_sim.flow_index import FlowIndex
from kafka_sim.model_base import CATCH_UP_EPS
from kafka_sim.replication_quotas import FOLLOWER_QUOTA, LEADER_QUOTA
from kafka_sim.replication_sharing import FetchSharing
from kafka_sim.state import Partition, Replica, is_throttled

#: a flow keeps up when its rate is at least its partition's write rate, within rounding
_KEEP_UP = 1.0 - 1e-9


class Flow:
    """One transfer in a physics step."""

    __slots__ = ("kind", "partition", "replica", "resources", "rids", "recorded", "gap", "grow", "rate",
                 "follows", "fetched", "at", "since", "n")

    def __init__(self, kind: int, partition: Partition, replica: Replica, resources: tuple, rids: tuple[int, ...],
                 gap: float, grow: float, recorded: tuple = ()) -> None:
        self.kind = kind  # 0 follower fetch, 1 future replica copy
        self.partition = partition
        self.replica = replica
        self.resources = resources  # what limits it
        self.rids = rids  # the numbers of its resources (FlowPlanning._resource_ids)
        self.recorded = recorded  # quota meters its bytes are recorded in
        self.gap = gap
        self.grow = grow
        self.rate = 0.0
        self.follows = False
        self.fetched = 1.0  # bytes recorded in its quotas per byte it adds to the log
        self.at = math.inf  # when it catches up at the planned rate (nan: left the plan)
        self.since = 0.0  # bytes integrated up to this time (replan_quantum: lazily, Replication._due_flows)
        self.n = 0  # its place in the plan (FlowIndex)

    def keeps_up(self) -> bool:
        return self.rate >= self.grow * _KEEP_UP


def bring_to(flows: list[Flow], now: float) -> None:
    """Integrate flows from their last integration (``since``) to ``now`` at their planned rates."""
    for f in flows:
        dt = now - f.since
        if dt > 0:
            rate = f.rate
            if rate > 0:
                grow(f, rate * dt)
            f.since = now


def grow(f: Flow, nbytes: float) -> None:
    """Add copied bytes to a flow's replica (a KIP-113 copy's future log, or the follower's log)."""
    if f.kind:
        f.replica.future_bytes += nbytes
    else:
        f.replica._bytes += nbytes


class _Kept:
    """What a plan keeps to be refreshed after an event that changed no partition."""

    __slots__ = ("event", "cap", "terms", "quota_at", "versions", "alter_keys", "heap", "follows", "seq", "index",
                 "quota_heap")

    def __init__(self, event: float, cap: dict, terms: dict[tuple[str, int], tuple[float, float]],
                 quota_at: dict[tuple[str, int], float], versions: dict[tuple[str, int], int],
                 alter_keys: list | None = None) -> None:
        self.event = event  # the first catch-up, ISR shrink or HW event
        self.cap = cap  # resource -> capacity the rates were shared from
        self.terms = terms  # quota -> (unheld, overhead) of its capacity
        self.quota_at = quota_at  # quota -> when it next changes mode
        self.versions = versions  # quota -> its meter's course when that was found
        self.alter_keys = [key for key in cap if key[0] == "a" and not math.isinf(cap[key])] \
            if alter_keys is None else alter_keys
        self.heap: list[tuple[float, int, Flow]] = []  # replan_quantum: (catch-up time, n, flow)
        self.follows = False  # a KIP-113 copy's rate follows a catching-up replica's (FlowPlanning._make_plan)
        self.seq = 0  # the next heap entry's tie-breaker
        self.index: FlowIndex | None = None  # replan_quantum: the plan's live flows, by partition and resource
        # replan_quantum: (when, quota) of quota_at, stale entries left in (FlowPlanning._due_quota_events)
        self.quota_heap: list[tuple[float, tuple[str, int]]] | None = None

    def again(self, event: float, cap: dict | None = None) -> "_Kept":
        """The same plan's record with its next event (and capacities) found again after a patch."""
        # a KIP-113 limit is finite or not by its broker's config, which a patch never changes
        out = _Kept(event, self.cap if cap is None else cap, self.terms, self.quota_at, self.versions, self.alter_keys)
        out.heap, out.follows, out.seq, out.index = self.heap, self.follows, self.seq, self.index
        out.quota_heap = self.quota_heap
        return out


#: resource key -> capacity, quota -> (unheld, overhead), resource number -> flows crossing it
Capacities = tuple[dict, dict[tuple[str, int], tuple[float, float]], Counter[int]]

#: flows, next event, lagging ISR members, what a refresh needs
Plan = tuple[list[Flow], float, list[tuple[Partition, Replica, float]], _Kept]


def _due_keys(heap: list[tuple[float, tuple[str, int]]], quota_at: dict[tuple[str, int], float],
              now: float) -> dict[tuple[str, int], None]:
    """The quotas whose event is due at ``now``, read from their heap without popping it (a node
    not due has no due entry below it), in no particular order."""
    out: dict[tuple[str, int], None] = {}
    stack, n = [0], len(heap)
    while stack:
        i = stack.pop()
        if i < n and heap[i][0] <= now:
            at, key = heap[i]
            if quota_at[key] == at:
                out[key] = None
            stack += (2 * i + 1, 2 * i + 2)
    return out


class FlowPlanning(FetchSharing):
    """Mixin of ClusterModel: the flows of the active partitions, their rates and the next event."""

    def _partition_flows(self, p: Partition) -> list[Flow]:
        """The flows of one active partition (cached until the partition changes)."""
        brokers = self.brokers
        topic = self.topics[p.topic]
        leader = p.leader
        leader_up = leader >= 0 and brokers[leader].alive
        lead_thr = leader_up and is_throttled(topic.leader_throttled, p.index, leader)
        out: list[Flow] = []
        fetching: set[int] = set()
        for b in p.replicas:
            r = p._reps[b]
            if not brokers[b].alive:
                continue
            if b != leader and not r.tracking and leader_up:
                follow_thr = is_throttled(topic.follower_throttled, p.index, b)
                res: list = [("o", leader), ("i", b)]
                # ReplicaManager.shouldLeaderThrottle: the leader never holds back an ISR member.
                if lead_thr and b not in p.isr:
                    res.append((LEADER_QUOTA, leader))
                # RemoteLeaderEndPoint.shouldFollowerThrottle asks fetchState.isReplicaInSync
                # (AbstractFetcherThread: lag = leader HW - fetch offset <= 0), not the ISR: a
                # follower behind the HW is held back even while still in the ISR, one at the HW
                # is not even before it joins. A flow here is a follower behind the leader.
                if follow_thr:
                    res.append((FOLLOWER_QUOTA, b))
                recorded = (((LEADER_QUOTA, leader),) if lead_thr else ()) + (
                    ((FOLLOWER_QUOTA, b),) if follow_thr else ())
                flow = Flow(0, p, r, tuple(res), self._resource_ids(res), 0.0, 0.0, recorded)
                if recorded:
                    flow.fetched = self._fetch_overhead(p, b)
                out.append(flow)
                fetching.add(b)
        for b in p.replicas:
            r = p._reps[b]
            if r.future_log_dir is not None and brokers[b].alive:
                copy = (("d", b), ("a", b))
                f = Flow(1, p, r, copy, self._resource_ids(copy), 0.0, 0.0)
                f.follows = b in fetching  # its source is itself catching up
                out.append(f)
        return out

    def _fetch_overhead(self, p: Partition, follower: int) -> float:
        """Bytes a catching-up follower's fetches record in the quotas per byte it appends.

        The leader reads ``replica.fetch.max.bytes`` per partition from the segment file
        (LocalLog.read -> FileRecords.slice), so a response usually ends in a partial batch;
        KafkaApis records the whole response size in the leader quota
        (``sizeOfThrottledPartitions``) and ReplicaFetcherThread.processPartitionData records
        ``records.sizeInBytes`` in the follower quota, but the follower appends only the whole
        batches and fetches the partial one again. A batch larger than the fetch size comes
        alone (KIP-74, minOneMessage). Seen on Apache Kafka 4.3.1 (docs/SIMULATOR.md,
        calibration): a 20 MB log of 0.9 MB batches grew by one batch per fetch, and the
        follower stopped fetching at 1.75 MB/s of appended bytes under a 2 MB/s throttle,
        i.e. at 2 MB/s of 1 MiB responses.
        """
        batch = p.batch_bytes
        size = self.configs.long_value(follower, "replica.fetch.max.bytes")
        if batch <= 0 or size <= 0 or batch >= size:
            return 1.0
        return size / ((size // batch) * batch)

    def _collect_flows(self) -> list[Flow]:
        cache = self._flow_cache
        flows: list[Flow] = []
        for p in self._active:
            fl = cache.get(p)
            if fl is None:
                fl = cache[p] = self._partition_flows(p)
            if not fl:
                continue
            log = p.log_bytes()
            rate = p._rate
            for f in fl:
                r = f.replica
                if f.kind == 0:
                    gap = log - r._bytes
                    f.gap = gap if gap > 0.0 else 0.0  # max(0.0, gap), without the call
                    f.grow = rate
                else:
                    f.gap = max(0.0, r.exact_bytes() - r.future_bytes)
                    f.grow = -1.0 if f.follows else (rate if r.tracking else 0.0)
            flows.extend(fl)
        return flows

    def _resource_ids(self, resources: list | tuple) -> tuple[int, ...]:
        """The numbers of resource keys (numbered once per model, for :func:`kafka_sim.fairshare.fill`)."""
        ids = self._res_ids
        out = []
        for key in resources:
            rid = ids.get(key)
            if rid is None:
                rid = ids[key] = len(self._res_keys)
                self._res_keys.append(key)
            out.append(rid)
        return tuple(out)

    def _capacities(self, flows: list[Flow]) -> Capacities:
        """Each resource's capacity, and each quota's (unheld, overhead) terms (kept for a refresh)."""
        cap: dict = {}
        quota_keys: list[tuple[str, int]] = []
        self._quota_keys = quota_keys
        unheld: dict[tuple[str, int], float] = {}  # recorded by ISR members, never held back
        overhead: dict[tuple[str, int], float] = {}  # recorded bytes per appended byte, per quota
        brokers = self.brokers
        for f in flows:
            recorded = f.recorded  # the leader's quota first (_partition_flows); none for a KIP-113 copy
            if not recorded:
                continue
            fetched = f.fetched
            if fetched > 1.0:
                for key in recorded:
                    if fetched > overhead.get(key, 1.0):
                        overhead[key] = fetched
            key = recorded[0]
            # the follower side holds back ISR members too
            if key[0] == LEADER_QUOTA and f.replica.broker in f.partition.isr:
                unheld[key] = unheld.get(key, 0.0) + f.grow * fetched
        # each resource once, in the order the flows first cross it, with the number of flows
        # crossing it (thousands of flows share a few hundred resources: counted in one pass)
        crossing = Counter(chain.from_iterable([f.rids for f in flows]))
        keys = self._res_keys
        for rid in crossing:
            key = keys[rid]
            kind, b = key
            if kind == "o":
                cap[key] = max(0.0, brokers[b].network_bytes_per_sec - self._steady_out.get(b, 0.0))
            elif kind == "i":
                cap[key] = max(0.0, brokers[b].network_bytes_per_sec - self._steady_in.get(b, 0.0))
            elif kind in (LEADER_QUOTA, FOLLOWER_QUOTA):
                cap[key] = math.nan  # once every flow's overhead and unheld bytes are counted
                quota_keys.append(key)
            elif kind == "a":
                cap[key] = self._alter_dirs_cap(b, flows)
            elif kind == "d":
                cap[key] = brokers[b].disk_bytes_per_sec
        terms = {key: (unheld.get(key, 0.0), overhead.get(key, 1.0)) for key in quota_keys}
        for key, (held, over) in terms.items():
            # capacities are in appended bytes; the quota counts fetched bytes
            cap[key] = self._quota_capacity(key, held) / over
        return cap, terms, crossing

    def _make_plan(self) -> Plan:
        """Rates of every flow and the next event time; valid until something changes."""
        while True:
            flows = self._collect_flows()
            cap, terms, crossing = self._capacities(flows)
            rates = self._fair_rates(flows, cap, crossing)
            if rates is not None:
                break
            self._flush_dirty()  # in-sync followers a saturated link squeezed became flows: plan again
        self.plans_made += 1
        self._planned_at = self._t
        self._since_plan = set()
        self._course_changed = set()
        lazy = self._quantized()
        self._lazy_flows = flows if lazy else []
        follow_rate: dict[int, float] | None = None  # only future replicas copying a catching-up one need it
        now = self._t
        event = math.inf
        flow_rec: dict[tuple[str, int], float] = {}
        for f, rate in zip(flows, rates):
            f.rate = rate
            grow = f.grow
            if grow < 0:
                if follow_rate is None:
                    follow_rate = {id(g.replica): r for g, r in zip(flows, rates) if g.kind == 0}
                grow = f.grow = follow_rate.get(id(f.replica), 0.0)
            if f.recorded:
                fetched = f.fetched
                for key in f.recorded:
                    flow_rec[key] = flow_rec.get(key, 0.0) + rate * fetched
            net = rate - grow
            f.at = math.inf
            f.since = now
            if f.gap <= CATCH_UP_EPS:
                if f.kind == 1 or f.keeps_up():
                    event = f.at = now
            elif net > 0:
                at = f.at = now + f.gap / net
                if at < event:  # min(event, at), without the call
                    event = at
        quota_at = self._set_flow_records(flow_rec, self._last_kept if lazy else None)
        lagging = self._lagging(flows)
        if lagging:
            event = min(event, max(now, min(d for _p, _r, d in lagging)))
            event = min(event, self._reaches_hw(flows, lagging))
        kept = _Kept(event, cap, terms, quota_at, {key: self._course(key) for key in quota_at})
        kept.follows = follow_rate is not None
        if lazy:
            kept.index = FlowIndex(flows)
            kept.quota_heap = [(at, key) for key, at in quota_at.items()]
            heapq.heapify(kept.quota_heap)
            kept.heap = [(f.at, n, f) for n, f in enumerate(flows) if f.at < math.inf]
            heapq.heapify(kept.heap)
            kept.seq = len(flows)
            self._last_kept = kept
        return flows, min(event, min(quota_at.values(), default=math.inf)), lagging, kept

    def _refreshed(self, plan: Plan) -> Plan | None:
        """The plan after an event that changed no partition, or None when it must be made again.

        Most events of a large rehearsal are a quota reaching a sample purge at its bound, or a
        quota's allowance changing mode: nothing but that quota's meter moved. Flows, their
        write rates and the in-sync traffic are as planned (every change of those drops the
        plan), so the rates stand as long as every capacity does: the quotas' (their mode is
        decided afresh, as a new plan would) and the KIP-113 copies' (their size moved). The
        catch-up, ISR and HW events of the plan are absolute times that stand with the rates;
        only the quotas whose event is due, or whose meter changed course, are asked again.
        """
        flows, _event, lagging, kept = plan
        if self._changed_capacities(plan):
            return None
        event = min(kept.event, self._due_quota_events(kept))
        if event <= self._t:
            return None  # an event now that changed nothing would repeat: plan afresh, as before
        return flows, event, lagging, kept

    def _changed_capacities(self, plan: Plan) -> dict:
        """Resource -> its capacity now, for the quotas and KIP-113 limits whose capacity changed.

        With a re-plan quantum only the quotas that may have changed are asked: those whose event
        (a change of mode, a sample purge: where the capacity moves) is due, and those whose
        meter changed course since the plan. Asking all of them at every event was a tenth of a
        100,000-move rehearsal.
        """
        flows, _event, _lagging, kept = plan
        cap, out = kept.cap, {}
        terms = kept.terms
        if self._quantized() and kept.quota_heap is not None:
            due = _due_keys(kept.quota_heap, kept.quota_at, self._t)
            asked = [*due, *(key for key in self._course_changed if key in terms and key not in due)]
        else:
            asked = list(terms)
        for key in asked:
            held, over = terms[key]
            now = self._quota_capacity(key, held) / over
            if now != cap[key]:
                out[key] = now
        for key in kept.alter_keys:
            now = self._alter_dirs_cap(key[1], flows)
            if now != cap[key]:
                out[key] = now
        return out

    def _due_quota_events(self, kept: _Kept, touched: set[tuple[str, int]] | None = None) -> float:
        """Find again the events of the quotas whose event is due or whose meter changed course; the first.

        :param touched: the only quotas whose course may have changed (None: ask every one)
        """
        now = self._t
        quota_at, versions, heap = kept.quota_at, kept.versions, kept.quota_heap
        keys: Iterable[tuple[str, int]] = quota_at
        if touched is not None and heap is not None:  # the due ones, and those whose course may have changed
            keys = []
            while heap and heap[0][0] <= now:
                at, key = heapq.heappop(heap)
                if quota_at[key] == at:
                    keys.append(key)
            keys += [key for key in touched if key in quota_at]
        meters = self._meters
        for key in keys:
            meter = meters.get(key)  # self._course(key), inlined: this loop runs at every event
            if quota_at[key] <= now or (-1 if meter is None else meter.version) != versions[key]:
                at = quota_at[key] = self._quota_event(key)
                versions[key] = self._course(key)
                if heap is not None:
                    heapq.heappush(heap, (at, key))
        if heap is None:
            return min(quota_at.values(), default=math.inf)
        while heap and quota_at[heap[0][1]] != heap[0][0]:
            heapq.heappop(heap)  # found again since
        return heap[0][0] if heap else math.inf

    def _course(self, key: tuple[str, int]) -> int:
        """The version of a quota meter's course (-1 before it exists)."""
        meter = self._meters.get(key)
        return -1 if meter is None else meter.version

    def _reaches_hw(self, flows: list[Flow], lagging: list[tuple[Partition, Replica, float]]) -> float:
        """When an out-of-sync follower reaches a HW that a lagging ISR member holds back.

        Partition.isFollowerInSync admits a follower whose log end reached the leader's high
        watermark (and the leader epoch's start offset), not the leader's log end: behind a
        slow ISR member the HW lags, and a new replica joins the ISR once it gets there.
        """
        rate_of = {id(f.replica): f.rate for f in flows if f.kind == 0}
        event = math.inf
        for p in {p for p, _r, _d in lagging}:
            slow = [(r._bytes, rate_of.get(id(r), 0.0)) for q, r, _d in lagging if q is p]
            hw, hw_rate = min(slow)
            for f in flows:
                r = f.replica
                if f.kind == 0 and f.partition is p and r.broker not in p.isr and f.rate > hw_rate:
                    event = min(event, self._t + max(0.0, hw - r._bytes) / (f.rate - hw_rate))
        return event

    def _set_flow_records(self, flow_rec: dict[tuple[str, int], float],
                          known: _Kept | None = None) -> dict[tuple[str, int], float]:
        """Record the new flows in the quota meters; returns when each quota the flows cross next flips.

        :param known: with ``replan_quantum``, the last plan: a quota whose meter kept its course
            (and whose event is ahead) keeps the event found then, as in :meth:`_refreshed`
        """
        old, self._flow_rec = self._flow_rec, flow_rec
        for key in set(old) | set(flow_rec):
            # an unchanged rate only brings the meter to now, which every reader of it does first
            if old.get(key, 0.0) != flow_rec.get(key, 0.0):
                self._record_rate(key)
        if known is None:
            return {key: self._quota_event(key) for key in self._quota_keys}
        now, found, versions = self._t, known.quota_at, known.versions
        out = {}
        for key in self._quota_keys:
            at = found.get(key)
            if at is None or at <= now or self._course(key) != versions[key]:
                at = self._quota_event(key)
            out[key] = at
        return out

    def _lagging(self, flows: list[Flow]) -> list[tuple[Partition, Replica, float]]:
        """ISR members not caught up, with the time the isr-expiration task removes them."""
        lagging: list[tuple[Partition, Replica, float]] = []
        for f in flows:
            p, r = f.partition, f.replica
            if f.kind != 0 or p.leader < 0 or len(p.isr) < 2 or r.broker not in p.isr:
                continue
            if f.gap <= CATCH_UP_EPS and f.keeps_up():
                continue
            lag = self._lag_max(p.leader)
            deadline = r.caught_up_at + lag
            # ReplicaManager schedules maybeShrinkIsr every replica.lag.time.max.ms / 2
            period = lag / 2 if lag > 0 else 0.0
            if period > 0:
                deadline = math.ceil(deadline / period - 1e-9) * period
            lagging.append((p, r, deadline))
        return lagging
