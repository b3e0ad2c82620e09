"""ISR changes of the replication physics: followers leaving it, joining it, and the high watermark.

Kafka behaviour followed (apache/kafka, core/src/main/scala/kafka/cluster):

- The "isr-expiration" task (``ReplicaManager``, every ``replica.lag.time.max.ms`` / 2) removes
  every follower that has not caught up for ``replica.lag.time.max.ms`` (``Partition.maybeShrinkIsr``,
  ``getOutOfSyncReplicas``); the leader stays.
- A follower joins the ISR once the log end its fetch reports reaches the leader's high
  watermark (``Partition.maybeExpandIsr``, ``isFollowerInSync``). Joining does not make it
  caught up: ``Replica.lastCaughtUpTimeMs`` moves only when a fetch reaches the leader's log end
  (as of that fetch or the one before), so a follower still behind is removed again at the
  task's next run.
- The high watermark does not advance while the ISR is smaller than the effective
  ``min.insync.replicas`` (``Partition.maybeIncrementLeaderHW``: ``isUnderMinIsr``; the
  effective value is at most the replica count). So when lagging followers take a partition
  under min ISR, the watermark stays where their log ends held it and they are back in the ISR
  at their next fetch: on a saturated link a partition drops out and comes back at every run of
  the task (seen on Kafka 4.3.1: ``benchmarks/real_kafka_adaptive.py``, ISR 1 for under 2 s every
  15 s, side by side with this model).

The next fetch is not an event of the fluid model. A follower behind on a shared link gets at
most ``replica.fetch.max.bytes`` of the partition per round trip, so its round trip is about
that over its rate; its fetch in progress when the ISR shrank ends on average half a round trip
later, and the leader admits it then. Of ``n`` followers removed together, whose fetches run
independently, the k-th comes back at k/(n+1) of a round trip, the expected order of their ends.
"""
from __future__ import annotations

import math

from kafka_sim.state import Partition, Replica


class IsrChanges:
    """Mixin of ClusterModel: ISR shrink and expansion, and the high watermark they move."""

    def _effective_min_isr(self, p: Partition) -> int:
        topic = self.topics.get(p.topic)
        return min(self._min_isr(topic) if topic is not None else 1, max(1, len(p.replicas)))

    def _hw_bytes(self, p: Partition) -> float:
        """Bytes up to the high watermark: the leader's log end, or the least ISR member's bytes;
        where it stopped while the ISR is under min ISR."""
        if p.frozen_hw is not None:
            return p.frozen_hw
        low = p.log_bytes()
        for b in p.isr:
            r = p._reps.get(b)
            if r is not None and b != p.leader and not r.tracking:
                low = min(low, r._bytes)
        return low

    def _shrink_isr(self, p: Partition, out: list[Replica], rates: dict[int, float]) -> None:
        """Partition.maybeShrinkIsr: ``out`` leave the ISR (the leader stays); under min ISR the
        high watermark stops, and who is at it joins again at its next fetch.

        :param rates: bytes/s of each follower's fetch, by ``id`` of its replica
        """
        hw = self._hw_bytes(p)
        removed = []
        for r in out:
            if r.broker in p.isr and r.broker != p.leader and len(p.isr) > 1:
                p.isr.remove(r.broker)
                removed.append(r)
        if not removed:
            return
        self._touch(p)
        self._freeze_under_min_isr(p, hw)
        if p.frozen_hw is not None:
            back = [r for r in removed if r._bytes >= p.frozen_hw]
            for k, r in enumerate(back, 1):  # the k-th of n independent fetches ends k/(n+1) of a round trip on
                self._schedule_rejoin(r, rates.get(id(r), 0.0), k / (len(back) + 1))

    def _freeze_under_min_isr(self, p: Partition, hw: float) -> None:
        """After a shrink: under the effective min ISR the watermark stays at ``hw``, where it was
        before the shrink (whatever removed the follower: the isr-expiration task, a fenced broker)."""
        if p.frozen_hw is None and p.leader >= 0 and len(p.isr) < self._effective_min_isr(p):
            p.frozen_hw = hw

    def _schedule_rejoin(self, r: Replica, rate: float, share: float = 0.5) -> None:
        """The follower's fetch in progress ends ``share`` of a round trip from now (never while it stalls)."""
        if rate <= 0 or r in self._rejoins:
            return
        fetch_max = self.configs.long_value(r.broker, "replica.fetch.max.bytes")
        self._rejoins[r] = self._t + fetch_max / rate * share
        self._rejoin_next = min(self._rejoin_next, self._rejoins[r])

    def _rejoin_due(self) -> None:
        """The scheduled followers whose fetch came: each joins if it is still at the watermark."""
        now = self._t
        due = [r for r, at in self._rejoins.items() if at <= now]
        for r in due:
            del self._rejoins[r]
            p = r.partition
            if p._reps.get(r.broker) is r and r.broker not in p.isr and r.exact_bytes() >= self._hw_bytes(p):
                self._join_isr(p, r, caught_up=False)
        self._rejoin_next = min(self._rejoins.values(), default=math.inf)

    def _join_isr(self, p: Partition, r: Replica, caught_up: bool = True) -> None:
        """Partition.maybeExpandIsr: a follower whose log end reached the high watermark joins the ISR.

        :param caught_up: it reached the leader's log end (else only the watermark: its lag timer
            runs on, though not into the task's runs before it joined)
        """
        lag = self._lag_max(p.leader) if p.leader >= 0 else 0.0
        r.caught_up_at = self._t if caught_up else max(r.caught_up_at, self._t - lag + 1e-6)
        if r.broker not in p.isr and self.brokers[r.broker].alive and p.leader >= 0:
            p.isr.append(r.broker)
            self._touch(p)  # at min ISR again, the watermark moves (_touch)
            self._maybe_complete(p)
