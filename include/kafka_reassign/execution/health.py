"""Health-adaptive concurrency: the caps shrink while moves hurt the ISR and grow back once healthy.

Like Cruise Control's executor concurrency adjuster, the caps on moves in flight follow the
health of the brokers the run touches. Health is read on its own, slower interval
(:data:`HEALTH_READ_SECONDS`, not every poll), and only for the partitions in flight
(:func:`read_health`): one Metadata request for their topics (their ISR) and, once per topic, a
DescribeConfigs of ``min.insync.replicas`` (cached: it rarely changes). So the cost of a poll
stays flat, however large the plan.

Two signs of trouble, both from the ISR Kafka reports (replica.lag.time.max.ms decides when a
follower that does not keep up leaves it):

* a partition in flight *at or under* min ISR because one of its in-sync replicas left the ISR
  (one more loss and ``acks=all`` writes fail); a topic whose replication factor equals its
  min ISR is at min ISR by configuration and is not counted;
* a broker whose follower of a partition in flight fell out of the ISR (it does not keep up).

The shrink is per broker: each broker holding one of such a partition's replicas (those it had
in sync, not those being added: a receiving broker is not why an ISR shrank), or whose follower
lagged, gets its cap halved, and no other broker. A slow disk or a saturated link is a
broker's trouble, and halving every broker's cap for it would slow the whole run for nothing.
The cluster cap halves only when the trouble is widespread: more than half of the brokers the
steps in flight touch (and at least two) are in trouble at once.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from kafka_reassign.cluster.port import KafkaAdminPort
from kafka_reassign.cluster.state import TopicPartition
from kafka_reassign.errors import KafkaAdminError
from kafka_reassign.execution.steps import StepMove

log = logging.getLogger(__name__)

#: Seconds between two health reads (a poll in between reads no more than before).
HEALTH_READ_SECONDS = 30.0
#: Seconds a broker must stay healthy before its cap grows by one step, and between steps.
RECOVER_AFTER_SECONDS = 60.0
#: Partitions named in a change's reason (the count says how many more).
NAMED_PARTITIONS = 3
MIN_ISR_KEY = "min.insync.replicas"


@dataclass
class Health:
    """What one health read found among the partitions in flight.

    :param at_min_isr: partition -> the replicas it had in sync before its step, for partitions
        at or under min ISR after losing one of them
    :param out_of_isr: broker -> partitions in flight whose in-sync follower on it left the ISR
    :param brokers_touched: brokers the steps in flight touch (the cluster cap's yardstick)
    """

    at_min_isr: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    out_of_isr: dict[int, list[TopicPartition]] = field(default_factory=dict)
    brokers_touched: int = 0

    def troubled(self) -> set[int]:
        """Brokers whose cap should shrink."""
        return {b for reps in self.at_min_isr.values() for b in reps} | set(self.out_of_isr)

    def reason(self, brokers: Iterable[int]) -> str:
        """Why ``brokers`` are in trouble, naming a few partitions."""
        wanted = set(brokers)
        low = sorted(k for k, reps in self.at_min_isr.items() if wanted & set(reps))
        lagging = sorted({k for b in wanted for k in self.out_of_isr.get(b, ())} - set(low))
        parts = []
        if low:
            parts.append(f"{len(low)} partition(s) at min ISR ({_names(low)})")
        if lagging:
            lag_brokers = sorted(wanted & set(self.out_of_isr))
            parts.append(f"followers on broker(s) {_ids(lag_brokers)} left the ISR of {len(lagging)} "
                         f"partition(s) ({_names(lagging)})")
        return "; ".join(parts)


def _ids(brokers: Iterable[int]) -> str:
    return ", ".join(str(b) for b in brokers)


def _names(keys: Sequence[TopicPartition]) -> str:
    shown = ", ".join(f"{t}-{p}" for t, p in keys[:NAMED_PARTITIONS])
    return shown + (", …" if len(keys) > NAMED_PARTITIONS else "")


class MinIsrCache:
    """min.insync.replicas per topic, read once per topic (a topic's own value, else the broker's)."""

    def __init__(self) -> None:
        self.by_topic: dict[str, int] = {}

    def get(self, admin: KafkaAdminPort, topics: Iterable[str], broker: int | None) -> dict[str, int]:
        """The topics' min ISR; one DescribeConfigs for those not cached (1 while unreadable).

        :param broker: a live broker whose own value applies to topics without one
        """
        missing = sorted(set(topics) - set(self.by_topic))
        if missing:
            try:
                read = admin.describe_sourced([broker] if broker is not None else [], missing, [MIN_ISR_KEY])
            except KafkaAdminError as exc:
                log.warning("min.insync.replicas of %d topic(s) unreadable (%s): counting 1 until read",
                            len(missing), exc)
                return {t: self.by_topic.get(t, 1) for t in topics}
            key = ("broker", str(broker))
            inherited = read.inherited.get(key, {}).get(MIN_ISR_KEY)
            default = read.values.get(key, {}).get(MIN_ISR_KEY) or (inherited.value if inherited else None)
            for t in missing:
                own = read.values.get(("topic", t), {}).get(MIN_ISR_KEY)
                self.by_topic[t] = max(1, int(own or default or 1))
        return {t: self.by_topic[t] for t in topics}


def read_health(admin: KafkaAdminPort, steps: Sequence[StepMove], min_isr: MinIsrCache) -> Health:
    """The ISR of the partitions in flight against their topics' min ISR (see the module docstring).

    :param steps: the steps in flight (log-dir steps keep their replicas and are not read)
    """
    moving = [s for s in steps if not s.is_log_dir_only]
    health = Health(brokers_touched=len({b for s in moving for b in (*s.current, *s.target)}))
    if not moving:
        return health
    parts = admin.partition_metadata([s.key for s in moving])
    any_broker = next((p.leader for p in parts.values() if p.leader >= 0), None)
    floors = min_isr.get(admin, {s.topic for s in moving}, any_broker)
    for s in moving:
        p = parts.get(s.key)
        if p is None:
            continue
        isr = set(p.isr)
        # The replicas in sync before the step; those it adds join the ISR only at its end, and one
        # it removed (the step completed since the last poll) is gone from the replicas, not lost.
        lost = sorted(b for b in set(s.current) - isr if b in p.replicas)
        for b in lost:
            health.out_of_isr.setdefault(b, []).append(s.key)
        if lost and len(isr) <= floors.get(s.topic, 1):
            # Against the replicas that were in sync (leader included), not the ones being added:
            # a receiving broker is not why the ISR shrank.
            health.at_min_isr[s.key] = tuple(s.current)
    return health


@dataclass
class CapChange:
    """One change of the caps: when, and the line the log and the progress view show."""

    at: float
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at, "text": self.text}


class CapGovernor:
    """The caps now, between a floor and the configured caps, adapted by AIMD to :class:`Health`.

    Why AIMD (additive increase, multiplicative decrease, as TCP's congestion control): a cap
    only stops new moves, those in flight keep copying, so a halving is what takes effect quickly
    enough when the ISR is already hurt; growing back one small step per healthy interval probes
    for the load the brokers carry without overshooting straight back into the trouble, and a
    run that never sees trouble never changes its caps.

    :param cluster_cap: the configured ``max_partition_movements``
    :param broker_cap: the configured ``max_movements_per_broker``
    :param floor: ``min_movements_per_broker``: no cap shrinks below it
    """

    def __init__(self, cluster_cap: int, broker_cap: int, floor: int) -> None:
        self.configured = (cluster_cap, broker_cap)
        self.floor = max(1, min(floor, broker_cap))
        self.cluster_floor = min(self.floor, cluster_cap)  # a cluster cap below the floor stays as set
        self.cluster = cluster_cap
        self.brokers: dict[int, int] = {}  # brokers whose cap is below the configured one
        self.since: dict[int, float] = {}  # broker -> last trouble or step up (-1: the cluster)
        self.last_read: float | None = None
        self.last_change: CapChange | None = None

    def cap_of(self, broker: int) -> int:
        return self.brokers.get(broker, self.configured[1])

    def due(self, now: float) -> bool:
        """A health read is due (the first one at once, then every :data:`HEALTH_READ_SECONDS`)."""
        return self.last_read is None or now - self.last_read >= HEALTH_READ_SECONDS

    def observe(self, health: Health, now: float) -> CapChange | None:
        """Shrink the troubled brokers' caps, grow the healthy ones' back; the change, if any."""
        self.last_read = now
        troubled = health.troubled()
        widespread = len(troubled) >= 2 and 2 * len(troubled) > health.brokers_touched
        lines = self._shrink(health, troubled, widespread, now) + self._grow(troubled, widespread, now)
        if not lines:
            return None
        self.last_change = CapChange(now, "; ".join(lines))
        return self.last_change

    def _shrink(self, health: Health, troubled: set[int], widespread: bool, now: float) -> list[str]:
        moves: dict[tuple[int, int], list[int]] = {}
        for b in sorted(troubled):
            self.since[b] = now
            old = self.cap_of(b)
            new = max(self.floor, old // 2)
            if new < old:
                self.brokers[b] = new
                moves.setdefault((old, new), []).append(b)
        lines = [f"caps {old}->{new} per broker (broker(s) {_ids(bs)}): {health.reason(bs)}"
                 for (old, new), bs in sorted(moves.items())]
        if widespread:
            self.since[-1] = now
            old = self.cluster
            self.cluster = max(self.cluster_floor, old // 2)
            if self.cluster < old:
                lines.append(f"cluster cap {old}->{self.cluster}: {len(troubled)} of "
                             f"{health.brokers_touched} brokers in flight in trouble")
        return lines

    def _grow(self, troubled: set[int], widespread: bool, now: float) -> list[str]:
        lines = []
        cluster_cap, broker_cap = self.configured
        moves: dict[tuple[int, int], list[int]] = {}
        for b, old in sorted(self.brokers.items()):
            if b in troubled or now - self.since.get(b, now) < RECOVER_AFTER_SECONDS:
                continue
            self.since[b] = now
            new = min(broker_cap, old + _step(broker_cap))
            moves.setdefault((old, new), []).append(b)
            if new >= broker_cap:
                del self.brokers[b]
            else:
                self.brokers[b] = new
        lines += [f"caps {old}->{new} per broker (broker(s) {_ids(bs)}): healthy for "
                  f"{RECOVER_AFTER_SECONDS:.0f} s" for (old, new), bs in sorted(moves.items())]
        healthy_for = now - self.since.get(-1, now)
        if self.cluster < cluster_cap and not widespread and healthy_for >= RECOVER_AFTER_SECONDS:
            self.since[-1] = now
            old, self.cluster = self.cluster, min(cluster_cap, self.cluster + _step(cluster_cap))
            lines.append(f"cluster cap {old}->{self.cluster}: healthy for {RECOVER_AFTER_SECONDS:.0f} s")
        return lines

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "brokers": {str(b): c for b, c in self.brokers.items()},
                "since": {str(b): t for b, t in self.since.items()}, "last_read": self.last_read,
                "last_change": self.last_change.to_json() if self.last_change else None}

    def load(self, state: Mapping[str, Any]) -> None:
        """Resume from :meth:`to_json` (caps clamped to the configured ones, which may differ now)."""
        cluster_cap, broker_cap = self.configured
        self.cluster = max(self.cluster_floor, min(cluster_cap, int(state.get("cluster", cluster_cap))))
        self.brokers = {int(b): max(self.floor, int(c)) for b, c in state.get("brokers", {}).items()
                        if int(c) < broker_cap}
        self.since = {int(b): float(t) for b, t in state.get("since", {}).items()}
        last_read = state.get("last_read")
        self.last_read = float(last_read) if last_read is not None else None
        change = state.get("last_change")
        self.last_change = CapChange(float(change["at"]), str(change["text"])) if change else None


def _step(cap: int) -> int:
    """The additive step: a tenth of the configured cap (at least 1), so recovery takes ~10 intervals."""
    return max(1, cap // 10)
