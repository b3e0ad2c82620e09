"""KIP-73 replication quotas as the physics sees them: per-broker bounds, meters, capacities.

Kafka behaviour followed: see :mod:`kafka_sim.quotas` (KafkaApis.handleFetchRequest,
ReplicaManager.shouldLeaderThrottle, ReplicaFetcherThread.processPartitionData,
RemoteLeaderEndPoint.shouldFollowerThrottle).
"""
from __future__ import annotations

import math

from kafka_sim.alter_dirs import effective_rate
from kafka_sim.quotas import DEFAULT_SAMPLE_SECONDS, DEFAULT_SAMPLES, QuotaMeter
from kafka_sim.state import Partition, is_throttled

#: quota meter keys are (side, broker id): the leader's and the follower's replication quota
LEADER_QUOTA = "lt"
FOLLOWER_QUOTA = "ft"
#: With a re-plan quantum, how many sample purges ahead a quota's crossing is looked for. Most
#: quotas change course at the next full plan (at most a quantum away) before a far crossing is
#: reached; one not found by then is asked again at the last purge looked at (QuotaMeter.cross_at).
WALK_BREAKS = 2


class ReplicationQuotas:
    """Mixin of ClusterModel: the replication quota meters and what they let through."""

    def _refresh_rates(self, broker: int | None = None) -> None:
        """Cache the three quota rates of every broker, or of one whose own configs changed (inf =
        unthrottled). One broker's: a run sets and removes two throttles on each of hundreds of
        brokers, one write each, and every broker's rates were read again at each."""
        for bid in self.brokers if broker is None else (broker,):
            vals = []
            for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                         "replica.alter.log.dirs.io.max.bytes.per.second"):
                v = self.configs.long_value(bid, name)
                vals.append(math.inf if v >= 9223372036854775807 else float(v))
            self._rates[bid] = (vals[0], vals[1], vals[2])
        self._lag_cache.clear()
        self._plan = None
        self._last_kept = None  # its quota events were found for the old bounds

    def _meter(self, key: tuple[str, int]) -> QuotaMeter:
        meter = self._meters.get(key)
        if meter is None:
            samples = self.configs.long_value(key[1], "replication.quota.window.num") or DEFAULT_SAMPLES
            size = self.configs.long_value(key[1], "replication.quota.window.size.seconds") or DEFAULT_SAMPLE_SECONDS
            meter = self._meters[key] = QuotaMeter(int(samples), float(size), aged=key[0] == LEADER_QUOTA)
        return meter

    def _bound(self, key: tuple[str, int]) -> float:
        return self._rates[key[1]][0 if key[0] == LEADER_QUOTA else 1]

    def _record_rate(self, key: tuple[str, int]) -> None:
        """Set a meter's recording rate: in-sync traffic plus the current plan's flows."""
        self._course_changed.add(key)
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
            keys.append(((LEADER_QUOTA, leader), nbytes * len(fetched)))
        keys.extend(((FOLLOWER_QUOTA, b), nbytes) for b in fetched
                    if is_throttled(topic.follower_throttled, p.index, b))
        for key, amount in keys:
            self._meter(key).record(self._t, amount)
            self._course_changed.add(key)
            if not math.isinf(self._bound(key)):
                self._plan = None  # the quota's allowance changed: re-plan rates and events

    def quota_state(self, broker: int) -> dict[str, dict[str, float]]:
        """Leader and follower quota of one broker: bound, recorded rate, window bytes, allowance.

        :param broker: broker id
        """
        with self.lock:
            self._run(self.now())
            out = {}
            for side, key in (("leader", (LEADER_QUOTA, broker)), ("follower", (FOLLOWER_QUOTA, broker))):
                meter = self._meter(key)
                meter.advance(self._t)
                bound = self._bound(key)
                out[side] = {"bound": bound, "recorded_rate": meter.rate, "window_bytes": meter.total,
                             "allowance": meter.allowance(bound) if bound < math.inf else math.inf,
                             "in_sync_rate": self._steady_rec.get(key, 0.0)}
            return out

    def _alter_dirs_cap(self, broker: int, flows: list) -> float:
        """What the broker's future replicas copy per second under its KIP-113 limit.

        Not the limit itself: Kafka's alter-log-dirs thread copies in bursts paced by its
        fetch back-off (:mod:`kafka_sim.alter_dirs`), on average below the bound. The
        copies' sizes are taken to 3 significant digits so re-plans reuse the cached rate.
        """
        bound = self._rates[broker][2]
        if math.isinf(bound):
            return bound
        copies = [f for f in flows if f.kind == 1 and f.replica.broker == broker]
        size = float(f"{sum(f.replica.exact_bytes() for f in copies):.3g}")
        batch = min((f.partition.batch_bytes for f in copies), default=0)
        configs = self.configs
        return effective_rate(size, bound, batch, configs.long_value(broker, "replica.fetch.max.bytes"),
                              configs.long_value(broker, "replica.fetch.backoff.ms") / 1000.0,
                              configs.long_value(broker, "replication.quota.window.num") or DEFAULT_SAMPLES,
                              configs.long_value(broker, "replication.quota.window.size.seconds")
                              or DEFAULT_SAMPLE_SECONDS)

    def _lag_max(self, broker: int) -> float:
        lag = self._lag_cache.get(broker)
        if lag is None:
            lag = self._lag_cache[broker] = self.configs.long_value(broker, "replica.lag.time.max.ms") / 1000.0
        return lag

    def _quota_capacity(self, key: tuple[str, int], unheld: float) -> float:
        """What out-of-sync throttled replicas may fetch through one quota right now."""
        bound = self._bound(key)
        if math.isinf(bound):
            return math.inf
        meter = self._meters.get(key) or self._meter(key)
        now = self._t
        if meter.t is None or now > meter.t:  # (advance does nothing otherwise)
            meter.advance(now)
        allowance = meter.allowance(bound)
        band = meter.band(bound)
        if allowance > band:
            return math.inf  # quota not exceeded: fetches are not held back
        if allowance < -band:
            return 0.0  # in-sync traffic alone overran it: held back until the window drains
        # at the bound: what leaves the sliding window (and what it grows by) may come in
        return max(0.0, meter.bound_rate(bound) - self._steady_rec.get(key, 0.0) - unheld)

    def _quota_event(self, key: tuple[str, int]) -> float:
        """When a quota next changes mode: an open one is spent, an overrun one recovers.

        The mode is decided afresh (the bytes in the window now); the event time is kept while
        the meter's course (its version), the bound and the mode stay the same and the event is
        ahead. Between events most quotas' courses do not change (a re-plan changes the rates of
        the flows an event touched), and finding a crossing walks a window of sample purges,
        which at every re-plan for every quota was the rehearsal's hot spot. A kept crossing
        equals a recomputed one up to rounding (the walk started later); not kept while a lump
        is in the window, where the walk's answer can depend on when it starts
        (QuotaMeter.cross_at). With a re-plan quantum a crossing is looked for only
        ``WALK_BREAKS`` purges ahead; past them the event is a time to ask again.
        """
        bound = self._bound(key)
        if math.isinf(bound):
            return math.inf
        meter = self._meters[key]
        allowance = meter.allowance(bound)
        band = meter.band(bound)
        mode = 1 if allowance > band else -1 if allowance < -band else 0
        kept = self._kept_events.get(key)
        if (kept is not None and kept[0] is meter and kept[1] == (meter.version, bound, mode)
                and self._t < kept[2] and not self.replan_all):
            return kept[2]
        if mode != 0:
            # spent, or back under the bound (where Kafka lets a fetch through again): not before,
            # or a quota held back between purges would let bytes in while still over its bound
            event = meter.cross_at(self._t, bound, 0.0, WALK_BREAKS if self._quantized() else None)
        else:
            event = meter.break_at(self._t)  # at the bound until the next sample purge
        if meter.t is not None and meter._lump_at < meter.ts[0]:
            self._kept_events[key] = (meter, (meter.version, bound, mode), event)
        return event
