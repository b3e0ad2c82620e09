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

import math

from kafka_sim.fairshare import allocate
from kafka_sim.quotas import DEFAULT_SAMPLE_SECONDS, DEFAULT_SAMPLES, QuotaMeter
from kafka_sim.model_base import CATCH_UP_EPS, MAX_SUBSTEPS
from kafka_sim.state import Partition, Replica, is_throttled

_LEADER_QUOTA = "lt"
_FOLLOWER_QUOTA = "ft"
#: a flow keeps up when its rate is at least its partition's write rate, within rounding
_KEEP_UP = 1.0 - 1e-9


class _Flow:
    """One transfer in a physics step."""

    __slots__ = ("kind", "partition", "replica", "resources", "recorded", "gap", "grow", "rate", "follows",
                 "fetched")

    def __init__(self, kind: int, partition: Partition, replica: Replica, resources: tuple, gap: float,
                 grow: float, recorded: tuple = ()) -> None:
        self.kind = kind  # 0 follower fetch, 1 future replica copy
        self.partition = partition
        self.replica = replica
        self.resources = resources  # what limits it
        self.recorded = recorded  # quota meters its bytes are recorded in
        self.gap = gap
        self.grow = grow
        self.rate = 0.0
        self.follows = False
        self.fetched = 1.0  # bytes recorded in its quotas per byte it adds to the log

    def keeps_up(self) -> bool:
        return self.rate >= self.grow * _KEEP_UP


def _changed_indices(old: object, new: object) -> set[int] | None:
    """Partition indices whose throttled status may differ between two specs (None: all)."""
    if old is True or new is True:
        return None if old != new else set()
    a = old if isinstance(old, frozenset) else frozenset()
    b = new if isinstance(new, frozenset) else frozenset()
    return {i for i, _b in a ^ b}


class Replication:
    """Mixin of ClusterModel: advances replication in simulated time."""

    # ------------------------------------------------------------ quotas and capacities
    def _refresh_rates(self) -> None:
        """Cache the three quota rates of every broker (inf = unthrottled)."""
        for bid in self.brokers:
            vals = []
            for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                         "replica.alter.log.dirs.io.max.bytes.per.second"):
                v = self.configs.long_value(bid, name)
                vals.append(math.inf if v >= 9223372036854775807 else float(v))
            self._rates[bid] = (vals[0], vals[1], vals[2])
        self._lag_cache.clear()
        self._plan = None

    def _meter(self, key: tuple[str, int]) -> QuotaMeter:
        meter = self._meters.get(key)
        if meter is None:
            samples = self.configs.long_value(key[1], "replication.quota.window.num") or DEFAULT_SAMPLES
            size = self.configs.long_value(key[1], "replication.quota.window.size.seconds") or DEFAULT_SAMPLE_SECONDS
            meter = self._meters[key] = QuotaMeter(int(samples), float(size), aged=key[0] == _LEADER_QUOTA)
        return meter

    def _bound(self, key: tuple[str, int]) -> float:
        return self._rates[key[1]][0 if key[0] == _LEADER_QUOTA else 1]

    def _record_rate(self, key: tuple[str, int]) -> None:
        """Set a meter's recording rate: in-sync traffic plus the current plan's flows."""
        rate = self._steady_rec.get(key, 0.0) + self._flow_rec.get(key, 0.0)
        meter = self._meters.get(key)
        if meter is None and rate <= 0:
            return
        (meter or self._meter(key)).set_rate(self._t, rate)

    def _record_produced(self, p: Partition, nbytes: float) -> None:
        """Produced records reach the in-sync followers: record their fetches in the quotas.

        Kafka records every byte a follower fetches of a throttled partition, in-sync
        followers included (KafkaApis.handleFetchRequest, ``sizeOfThrottledPartitions`` ->
        ``quotas.leader.record``; ReplicaFetcherThread.processPartitionData ->
        ``quota.record``). Seen on Apache Kafka 4.3.1 (benchmarks/calibration.py): a 20 MB
        move at 2 MB/s with an acks=all producer at R/6 took 25.7 s, the leader's quota
        pacing the new replica at R - 2P once in-sync traffic had spent the window; the
        simulator, recording only the snapshot's write rate, finished in 13 s. The tracking
        followers hold new records at once, so their fetch is recorded here as a lump;
        out-of-sync followers fetch the bytes later through their flows (recorded there).
        """
        leader = p.leader
        brokers = self.brokers
        if leader < 0 or not brokers[leader].alive or nbytes <= 0:
            return
        topic = self.topics[p.topic]
        fetched = [b for b, r in p._reps.items() if b != leader and r.tracking and brokers[b].alive]
        keys: list[tuple[tuple[str, int], float]] = []
        if fetched and is_throttled(topic.leader_throttled, p.index, leader):
            keys.append(((_LEADER_QUOTA, leader), nbytes * len(fetched)))
        keys.extend(((_FOLLOWER_QUOTA, b), nbytes) for b in fetched
                    if is_throttled(topic.follower_throttled, p.index, b))
        for key, amount in keys:
            self._meter(key).record(self._t, amount)
            if not math.isinf(self._bound(key)):
                self._plan = None  # the quota's allowance changed: re-plan rates and events

    def quota_state(self, broker: int) -> dict[str, dict[str, float]]:
        """Leader and follower quota of one broker: bound, recorded rate, window bytes, allowance.

        :param broker: broker id
        """
        with self.lock:
            self._run(self.now())
            out = {}
            for side, key in (("leader", (_LEADER_QUOTA, broker)), ("follower", (_FOLLOWER_QUOTA, broker))):
                meter = self._meter(key)
                meter.advance(self._t)
                bound = self._bound(key)
                out[side] = {"bound": bound, "recorded_rate": meter.rate, "window_bytes": meter.total,
                             "allowance": meter.allowance(bound) if bound < math.inf else math.inf,
                             "in_sync_rate": self._steady_rec.get(key, 0.0)}
            return out

    def _lag_max(self, broker: int) -> float:
        lag = self._lag_cache.get(broker)
        if lag is None:
            lag = self._lag_cache[broker] = self.configs.long_value(broker, "replica.lag.time.max.ms") / 1000.0
        return lag

    # ------------------------------------------------------------ change tracking
    def _touch(self, p: Partition) -> None:
        """Mark a partition changed: aggregates and active set are refreshed before physics."""
        self._dirty.add(p)
        p.partition_epoch += 1
        self.state_version += 1
        topic = self.topics.get(p.topic)
        if topic is not None:
            topic.version += 1  # the server re-encodes only changed topics' metadata
        self._plan = None
        self._note_preferred_leader(p)

    def _throttles_changed(self, topic: object, old_leader: object, old_follower: object) -> None:
        """A topic's throttled-replica lists changed: re-derive what the affected partitions record."""
        indices = _changed_indices(old_leader, topic.leader_throttled)  # type: ignore[attr-defined]
        more = _changed_indices(old_follower, topic.follower_throttled)  # type: ignore[attr-defined]
        parts = topic.partitions  # type: ignore[attr-defined]
        if indices is None or more is None:
            candidates = parts
        else:
            candidates = [parts[i] for i in indices | more if i < len(parts)]
        active = self._active
        for p in candidates:
            if p.bytes_in_per_sec > 0 or p in active:
                self._dirty.add(p)
        self._plan = None

    def _rebase(self, p: Partition) -> None:
        """Freeze the lazily grown log at the current time and re-derive its growth rate."""
        p._base_bytes = p.log_bytes()
        p._base_t = self._t
        leader_up = p.leader >= 0 and self.brokers[p.leader].alive
        rate = p.bytes_in_per_sec if leader_up else 0.0
        if rate != p._rate:  # same rate: the log's line through time is unchanged
            self._usage_changed(p)
        p._rate = rate

    def _flush_dirty(self) -> None:
        """Refresh steady traffic aggregates and the active set of changed partitions.

        Then hand every congested broker's tracking followers to the physics, so that the
        ones its link cannot carry fall behind.
        """
        while self._dirty:
            self._plan = None
            before: dict[int, tuple[float, float]] = {}
            rec_changed: set[tuple[str, int]] = set()
            for p in self._dirty:
                self._flush_one(p, before, rec_changed)
            self._dirty.clear()
            for key in rec_changed:
                self._record_rate(key)
            # only more in-sync traffic can newly overload a link
            grown = {b for b, (out, inn) in before.items()
                     if self._steady_out.get(b, 0.0) > out or self._steady_in.get(b, 0.0) > inn}
            self._relieve_congestion(grown)

    def _flush_one(self, p: Partition, before: dict[int, tuple[float, float]],
                   rec_changed: set[tuple[str, int]]) -> None:
        self._flow_cache.pop(p, None)
        self._fresh.add(p)
        steady_out, steady_in = self._steady_out, self._steady_in
        for b, out, inn, lrec, frec in self._contrib.pop(p, ()):
            if b not in before:
                before[b] = (steady_out.get(b, 0.0), steady_in.get(b, 0.0))
            steady_out[b] = steady_out.get(b, 0.0) - out
            steady_in[b] = steady_in.get(b, 0.0) - inn
            self._add_rec(rec_changed, (_LEADER_QUOTA, b), -lrec)
            self._add_rec(rec_changed, (_FOLLOWER_QUOTA, b), -frec)
        topic = self.topics.get(p.topic)
        exists = topic is not None and p.index < len(topic.partitions) and topic.partitions[p.index] is p
        if not exists:  # deleted topic: its contributions are gone, nothing to simulate
            self._active.discard(p)
            return
        self._rebase(p)
        brokers = self.brokers
        leader_up = p.leader >= 0 and brokers[p.leader].alive
        active = False
        contrib: list[tuple[int, float, float, float, float]] = []
        rate = p._rate
        followers = 0
        for b in p.replicas:
            r = p._reps[b]
            alive = brokers[b].alive
            if r.future_log_dir is not None and alive:
                active = True
            if b == p.leader:
                continue
            if r.tracking and alive and leader_up:
                if rate > 0:
                    frec = rate if is_throttled(topic.follower_throttled, p.index, b) else 0.0
                    contrib.append((b, 0.0, rate, 0.0, frec))
                    followers += 1
            elif alive and leader_up:
                active = True
        if leader_up and rate > 0:
            lrec = rate * followers if is_throttled(topic.leader_throttled, p.index, p.leader) else 0.0
            contrib.append((p.leader, rate * followers, rate, lrec, 0.0))
        for b, out, inn, lrec, frec in contrib:
            if b not in before:
                before[b] = (steady_out.get(b, 0.0), steady_in.get(b, 0.0))
            steady_out[b] = steady_out.get(b, 0.0) + out
            steady_in[b] = steady_in.get(b, 0.0) + inn
            self._add_rec(rec_changed, (_LEADER_QUOTA, b), lrec)
            self._add_rec(rec_changed, (_FOLLOWER_QUOTA, b), frec)
        if contrib:
            self._contrib[p] = tuple(contrib)
        if active:
            self._active.add(p)
        else:
            self._active.discard(p)

    def _add_rec(self, rec_changed: set[tuple[str, int]], key: tuple[str, int], delta: float) -> None:
        if delta:
            self._steady_rec[key] = self._steady_rec.get(key, 0.0) + delta
            rec_changed.add(key)

    def _relieve_congestion(self, brokers: set[int]) -> None:
        """Brokers whose link cannot carry their in-sync traffic: their followers become flows.

        A follower fetching through a saturated link gets a fair share of it; the ones
        whose partition is written faster than that share fall behind (and leave the ISR
        after replica.lag.time.max.ms), the others catch up and track again at once.
        """
        for b in brokers:
            broker = self.brokers.get(b)
            if broker is None or not broker.alive:
                continue
            cap = broker.network_bytes_per_sec * (1.0 + 1e-9)
            inbound = self._steady_in.get(b, 0.0) > cap
            outbound = self._steady_out.get(b, 0.0) > cap
            if not (inbound or outbound):
                continue
            for p in list(self._by_broker[b]):
                if p._rate <= 0 or p.leader < 0:
                    continue
                if inbound and p.leader != b:
                    self._release(p, p._reps[b])
                if outbound and p.leader == b:
                    for f, r in p._reps.items():
                        if f != b:
                            self._release(p, r)

    def _release(self, p: Partition, r: Replica) -> None:
        if r.tracking and self.brokers[r.broker].alive:
            self._materialize(p, r)
            self._dirty.add(p)

    # ------------------------------------------------------------ flows
    def _partition_flows(self, p: Partition) -> list[_Flow]:
        """The flows of one active partition (cached until the partition changes)."""
        brokers = self.brokers
        topic = self.topics[p.topic]
        leader = p.leader
        leader_up = leader >= 0 and brokers[leader].alive
        lead_thr = leader_up and is_throttled(topic.leader_throttled, p.index, leader)
        out: list[_Flow] = []
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
                    res.append((_LEADER_QUOTA, leader))
                # RemoteLeaderEndPoint.shouldFollowerThrottle asks fetchState.isReplicaInSync
                # (AbstractFetcherThread: lag = leader HW - fetch offset <= 0), not the ISR: a
                # follower behind the HW is held back even while still in the ISR, one at the HW
                # is not even before it joins. A flow here is a follower behind the leader.
                if follow_thr:
                    res.append((_FOLLOWER_QUOTA, b))
                recorded = (((_LEADER_QUOTA, leader),) if lead_thr else ()) + (
                    ((_FOLLOWER_QUOTA, b),) if follow_thr else ())
                flow = _Flow(0, p, r, tuple(res), 0.0, 0.0, recorded)
                if recorded:
                    flow.fetched = self._fetch_overhead(p, b)
                out.append(flow)
                fetching.add(b)
        for b in p.replicas:
            r = p._reps[b]
            if r.future_log_dir is not None and brokers[b].alive:
                f = _Flow(1, p, r, (("d", b), ("a", b)), 0.0, 0.0)
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

    def _collect_flows(self) -> list[_Flow]:
        cache = self._flow_cache
        flows: list[_Flow] = []
        for p in self._active:
            fl = cache.get(p)
            if fl is None:
                fl = cache[p] = self._partition_flows(p)
            if not fl:
                continue
            log = p.log_bytes()
            for f in fl:
                r = f.replica
                if f.kind == 0:
                    f.gap = max(0.0, log - r._bytes)
                    f.grow = p._rate
                else:
                    f.gap = max(0.0, r.exact_bytes() - r.future_bytes)
                    f.grow = -1.0 if f.follows else (p._rate if r.tracking else 0.0)
            flows.extend(fl)
        return flows

    def _capacities(self, flows: list[_Flow]) -> dict:
        cap: dict = {}
        quota_keys: list[tuple[str, int]] = []
        self._quota_keys = quota_keys
        unheld: dict[tuple[str, int], float] = {}  # recorded by ISR members, never held back
        overhead: dict[tuple[str, int], float] = {}  # recorded bytes per appended byte, per quota
        for f in flows:
            for key in f.recorded:
                if f.fetched > overhead.get(key, 1.0):
                    overhead[key] = f.fetched
        for f in flows:
            if f.kind == 0 and f.replica.broker in f.partition.isr:
                for key in f.recorded:
                    if key[0] == _LEADER_QUOTA:  # the follower side holds back ISR members too
                        unheld[key] = unheld.get(key, 0.0) + f.grow * f.fetched
        for f in flows:
            for key in f.resources:
                if key in cap:
                    continue
                kind, b = key
                broker = self.brokers[b]
                if kind == "o":
                    cap[key] = max(0.0, broker.network_bytes_per_sec - self._steady_out.get(b, 0.0))
                elif kind == "i":
                    cap[key] = max(0.0, broker.network_bytes_per_sec - self._steady_in.get(b, 0.0))
                elif kind in (_LEADER_QUOTA, _FOLLOWER_QUOTA):
                    # capacities are in appended bytes; the quota counts fetched bytes
                    cap[key] = self._quota_capacity(key, unheld.get(key, 0.0)) / overhead.get(key, 1.0)
                    quota_keys.append(key)
                elif kind == "a":
                    cap[key] = self._rates[b][2]
                elif kind == "d":
                    cap[key] = broker.disk_bytes_per_sec
        return cap

    def _quota_capacity(self, key: tuple[str, int], unheld: float) -> float:
        """What out-of-sync throttled replicas may fetch through one quota right now."""
        bound = self._bound(key)
        if math.isinf(bound):
            return math.inf
        meter = self._meter(key)
        meter.advance(self._t)
        allowance = meter.allowance(bound)
        band = meter.band(bound)
        if allowance > band:
            return math.inf  # quota not exceeded: fetches are not held back
        if allowance < -band:
            return 0.0  # in-sync traffic alone overran it: held back until the window drains
        # at the bound: what leaves the sliding window (and what it grows by) may come in
        return max(0.0, meter.bound_rate(bound) - self._steady_rec.get(key, 0.0) - unheld)

    def _quota_event(self, key: tuple[str, int]) -> float:
        """When a quota next changes mode: an open one is spent, an overrun one recovers."""
        bound = self._bound(key)
        if math.isinf(bound):
            return math.inf
        meter = self._meters[key]
        allowance = meter.allowance(bound)
        band = meter.band(bound)
        if allowance > band:
            return self._t + meter.seconds_to_cross(bound, 0.0)
        if allowance < -band:
            return self._t + meter.seconds_to_cross(bound, -band * 0.5)
        return self._t + meter.next_break()  # at the bound until what leaves the window changes

    def _make_plan(self) -> tuple[list[_Flow], float, list[tuple[Partition, Replica, float]]]:
        """Rates of every flow and the next event time; valid until something changes."""
        flows = self._collect_flows()
        rates = allocate([f.resources for f in flows], self._capacities(flows))
        follow_rate = {id(f.replica): r for f, r in zip(flows, rates) if f.kind == 0}
        now = self._t
        event = math.inf
        flow_rec: dict[tuple[str, int], float] = {}
        for f, rate in zip(flows, rates):
            f.rate = rate
            if f.grow < 0:
                f.grow = follow_rate.get(id(f.replica), 0.0)
            for key in f.recorded:
                flow_rec[key] = flow_rec.get(key, 0.0) + rate * f.fetched
            net = rate - f.grow
            if f.gap <= CATCH_UP_EPS:
                if f.kind == 1 or f.keeps_up():
                    event = now
            elif net > 0:
                event = min(event, now + f.gap / net)
        event = min(event, self._set_flow_records(flow_rec))
        lagging = self._lagging(flows)
        if lagging:
            event = min(event, max(now, min(d for _p, _r, d in lagging)))
            event = min(event, self._reaches_hw(flows, lagging))
        return flows, event, lagging

    def _hw_bytes(self, p: Partition) -> float:
        """Bytes up to the high watermark: the leader's log end, or the least ISR member's bytes."""
        low = p.log_bytes()
        for b in p.isr:
            r = p._reps.get(b)
            if r is not None and b != p.leader and not r.tracking:
                low = min(low, r._bytes)
        return low

    def _reaches_hw(self, flows: list[_Flow], lagging: list[tuple[Partition, Replica, float]]) -> float:
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

    def _set_flow_records(self, flow_rec: dict[tuple[str, int], float]) -> float:
        """Record the new flows in the quota meters; returns when a quota next flips."""
        old, self._flow_rec = self._flow_rec, flow_rec
        event = math.inf
        for key in set(old) | set(flow_rec):
            self._record_rate(key)
        for key in self._quota_keys:
            event = min(event, self._quota_event(key))
        return event

    def _lagging(self, flows: list[_Flow]) -> list[tuple[Partition, Replica, float]]:
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

    # ------------------------------------------------------------ time
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
        while self._t < until:
            if not self._active:
                if self._flow_rec:
                    self._set_flow_records({})
                self._t = until
                self._plan = None
                break
            if self._plan is None:
                self._plan = self._make_plan()
            flows, event_at, lagging = self._plan
            steps += 1
            forced = steps > MAX_SUBSTEPS  # too many events in one call: finish in one step
            stop_at = until if forced else min(until, event_at)
            dt = max(0.0, stop_at - self._t)
            if dt > 0:
                self._integrate(flows, dt)
                self._t = stop_at
            if self._t >= event_at or forced:
                self._settle(flows, lagging)
                self._plan = None
                self._flush_dirty()
                self._finish_trivial()

    def _finish_trivial(self) -> None:
        """Finish at once what needs no time: empty logs, caught-up copies of idle partitions.

        Done without a physics plan, so a burst of admin requests at one instant costs no
        re-planning; everything else waits for time to pass.
        """
        while self._fresh:
            fresh, self._fresh = self._fresh, set()
            done: list[_Flow] = []
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

    @staticmethod
    def _integrate(flows: list[_Flow], dt: float) -> None:
        # events end every step before a follower could pass the leader's log end
        for f in flows:
            rate = f.rate
            if rate > 0:
                if f.kind:
                    f.replica.future_bytes += rate * dt
                else:
                    f.replica._bytes += rate * dt

    def _settle(self, flows: list[_Flow], lagging: list[tuple[Partition, Replica, float]]) -> None:
        """At an event: finish caught-up flows, swap finished future replicas, shrink the ISR."""
        finished: list[_Flow] = []
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
                    self._join_isr(f.partition, r)  # reached the HW held back by a lagging ISR member
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
        for p, r, deadline in lagging:
            if self._t >= deadline and not r.tracking and r.broker in p.isr and len(p.isr) > 1:
                p.isr.remove(r.broker)  # Partition.maybeShrinkIsr
                self._touch(p)

    def _join_isr(self, p: Partition, r: Replica) -> None:
        """Partition.maybeExpandIsr: a follower whose log end reached the leader's joins the ISR."""
        r.caught_up_at = self._t
        if r.broker not in p.isr and self.brokers[r.broker].alive and p.leader >= 0:
            p.isr.append(r.broker)
            self._touch(p)
            self._maybe_complete(p)

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
