"""The adaptive throttle in the executor: each full poll, each broker in flight gets the rate its
clients leave room for (:mod:`kafka_reassign.throttle.adaptive`), through the run's recorded writer.

Cost per poll: the poll's DescribeLogDirs asks the brokers in flight for every replica they host
rather than only the moving ones (the same requests, larger answers: they follow the brokers,
not the plan), and one Metadata read of those replicas' topics at most every
:data:`HOSTING_REFRESH_SECONDS` (leaders and ISRs change seldom). What it keeps between polls
(one size per partition hosted on a broker in flight) is saved with the executor's state, so a
DAG task woken by its trigger measures growth from the last poll.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from kafka_reassign.cluster.port import KafkaAdminPort
from kafka_reassign.errors import KafkaAdminError
from kafka_reassign.throttle.adaptive import (Hosting, Partition, RateBounds, RateChange, broker_rates,
                                              client_traffic, partition_growth, partition_sizes, projected,
                                              rate_changes)
from kafka_reassign.throttle.apply import set_broker_rates
from kafka_reassign.throttle.record import RecordStore

if TYPE_CHECKING:
    from kafka_reassign.execution.limits import ExecutionLimits

log = logging.getLogger("kafka_reassign.execution.executor")

#: Seconds a Metadata read of leaders and ISRs is used for.
HOSTING_REFRESH_SECONDS = 60.0


class RateControl:
    """Per-broker replication rates that follow client traffic within bounds.

    :param bounds: capacity, floor and ceiling
    :param initial: the rate set at the start of the run (on every broker)
    :param store: the run's throttle record store (the one writer's)
    :param run_id: the run
    """

    def __init__(self, bounds: RateBounds, initial: int, store: RecordStore | None, run_id: str) -> None:
        self.bounds = bounds
        self.initial = initial
        self.store = store
        self.run_id = run_id
        #: broker -> the rate in force, where it differs from ``initial``
        self.rates: dict[int, int] = {}
        #: brokers whose rate the run did not set (someone's lower one was kept): never changed
        self.not_ours: set[int] = set()
        #: the changes of the last poll that changed a rate
        self.changes: list[RateChange] = []
        self._sizes: dict[Partition, int] = {}
        self._sizes_at: float | None = None
        self._hosting: dict[Partition, Hosting] = {}
        self._hosting_at: float | None = None
        #: broker -> client traffic measured at the last poll (for the projection)
        self._traffic: dict[int, float] = {}

    def rate_of(self, broker: int) -> int:
        """Bytes/s the broker moves now."""
        return self.rates.get(broker, self.initial)

    def observe(self, admin: KafkaAdminPort, sizes: Mapping[tuple[str, int, int], int],
                copying: Iterable[tuple[str, int, int]], brokers: Iterable[int], now: float) -> list[RateChange]:
        """Fold one poll's sizes in; change (and log) the rates that should change.

        :param sizes: (topic, partition, broker) -> bytes of every replica on ``brokers``
        :param copying: replicas being copied by the run's steps (not client traffic)
        :param brokers: the brokers in flight, whose sizes were read in full
        """
        brokers = sorted(set(brokers) - self.not_ours)
        after = partition_sizes(sizes, copying)
        before, then = self._sizes, self._sizes_at
        self._sizes, self._sizes_at = after, now
        if then is None or now <= then or not brokers or self.store is None:
            return []
        growth = partition_growth(before, after, now - then)
        hosting = self._hosting_for(admin, growth, now)
        if hosting is None:
            return []
        measured = client_traffic(growth, hosting, brokers)
        traffic = projected(measured, self._traffic)
        self._traffic = measured
        wanted = rate_changes({b: self.rate_of(b) for b in brokers}, traffic, self.bounds)
        if not wanted:
            return []
        written = {int(c.name) for c in set_broker_rates(admin, self.store, self.run_id,
                                                         {c.broker: c.new for c in wanted})}
        done = [c for c in wanted if c.broker in written]
        self.not_ours.update(c.broker for c in wanted if c.broker not in written)
        for c in done:
            self.rates[c.broker] = c.new
            log.info("run %s: adaptive throttle: %s", self.run_id, c.text)
        self.changes = done or self.changes  # the last poll that changed a rate
        return done

    def _hosting_for(self, admin: KafkaAdminPort, growth: Mapping[Partition, float], now: float
                     ) -> dict[Partition, Hosting] | None:
        """Leaders and ISRs of the partitions written to (a Metadata read when stale or incomplete)."""
        written = [p for p, g in growth.items() if g > 0]
        fresh = self._hosting_at is not None and now - self._hosting_at < HOSTING_REFRESH_SECONDS
        if fresh and all(p in self._hosting for p in written):
            return self._hosting
        topics = sorted({t for t, _ in growth})
        try:
            metadata = admin.topic_metadata(topics) if topics else []
        except KafkaAdminError as exc:  # the rates stay until the next poll
            log.warning("run %s: adaptive throttle: metadata read failed (%s); rates unchanged", self.run_id, exc)
            return None
        self._hosting = {(t.name, p.partition): Hosting(p.leader, tuple(p.isr))
                         for t in metadata for p in t.partitions}
        self._hosting_at = now
        return self._hosting

    def summary(self) -> dict[str, int]:
        """Broker (as a string, JSON's keys) -> its rate, for the brokers whose rate changed."""
        return {str(b): r for b, r in sorted(self.rates.items())}

    def last_change(self) -> str:
        return "; ".join(c.text for c in self.changes)

    def to_json(self) -> dict[str, Any]:
        return {"rates": self.summary(), "not_ours": sorted(self.not_ours), "at": self._sizes_at,
                "traffic": {str(b): t for b, t in self._traffic.items()},
                "sizes": [[t, p, n] for (t, p), n in sorted(self._sizes.items())],
                "changes": [[c.broker, c.old, c.new, c.client, c.capacity] for c in self.changes]}

    def load(self, d: Mapping[str, Any]) -> None:
        self.rates = {int(b): int(r) for b, r in d.get("rates", {}).items()}
        self.not_ours = {int(b) for b in d.get("not_ours", [])}
        self._sizes_at = d.get("at")
        self._traffic = {int(b): float(t) for b, t in d.get("traffic", {}).items()}
        self._sizes = {(str(t), int(p)): int(n) for t, p, n in d.get("sizes", [])}
        self.changes = [RateChange(int(b), int(o), int(n), float(c), int(k)) for b, o, n, c, k in d.get("changes", [])]


def rate_control_for(limits: ExecutionLimits, throttle_rate: int | None, store: RecordStore | None,
                     run_id: str) -> RateControl | None:
    """The run's adaptive throttle (None: off, unthrottled, or no capacity given)."""
    capacity = limits.broker_network_capacity_bytes_per_sec
    if not limits.adaptive_throttle or throttle_rate is None or capacity is None:
        return None
    bounds = RateBounds(int(capacity), int(limits.throttle_min_bytes_per_sec), int(limits.throttle_max_bytes_per_sec),
                        per_broker=broker_rates(limits.broker_network_capacities))
    return RateControl(bounds, int(throttle_rate), store, run_id)
