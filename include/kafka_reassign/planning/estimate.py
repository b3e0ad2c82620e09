"""How long replica moves take under a KIP-73 throttle, counting Kafka's quota accounting.

The one time estimator of the project (dry runs, plan summaries, the UI and the pre-flight
stall check all read it): ``prepare`` calls :func:`estimate_run` on the run's steps, the planner
:func:`~.plan_estimate.estimate_plan` on its plain data (:class:`~.plan_estimate.PlannedMove`),
which builds the same KIP-435 steps and ends in :func:`estimate_loads` as :func:`estimate_run` does, so both give one plan
the same figure. What it models, as Kafka does it:

* A broker's *leader* quota (``leader.replication.throttled.rate``) records the bytes of
  every follower fetch it answers for a throttled partition, from in-sync and out-of-sync
  followers alike; only the out-of-sync ones are held back when the quota is exceeded
  (``ReplicaManager`` / ``KafkaApis`` in apache/kafka: the response size of all throttled
  partitions is recorded, the ISR check only decides who waits). The throttled-replica lists
  of a run are set for all of its moving partitions at once, so every in-sync follower of a
  moving partition eats ``P`` bytes/s of its leader's quota for the whole run.
* A broker's *follower* quota (``follower.replication.throttled.rate``) records the fetches
  of its throttled replicas, again in sync or not: a new replica that caught up keeps
  costing ``P`` on its broker.
* So a partition written at ``P`` with ``k`` in-sync followers, moving alone through a
  leader with throttle ``R``, catches up at ``R - (k+1)P``: it never finishes (stalls) once
  ``R <= (k+1)P`` and otherwise takes about ``S / (R - (k+1)P)`` for ``S`` bytes.
* KIP-113 moves between log dirs use ``replica.alter.log.dirs.io.max.bytes.per.second``,
  copied below it (the alter-log-dirs fetch loop, :func:`~.catch_up.log_dir_copy_rate`: ``r_dir``);
  the future replica must beat the produce rate too: ``S / (r_dir - P)``.

Per broker, moves through it share its quotas; the run takes as long as its busiest broker.
Two lower bounds come with an estimate (:mod:`kafka_reassign.planning.bounds`): the
*fixed-leader bound* (busiest broker's bytes in or out, as the prepare-time leader, / its
throttle: ``estimate / bound`` is what in-sync traffic and produce rates cost on top) and the
*source-free bound* (any in-sync replica may send; what moving leadership off the busiest
sender could save; not in the plan summary, which reads the time only).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from kafka_reassign.cluster.state import ClusterState, TopicPartition
from kafka_reassign.planning.bounds import source_free_bound, throttle_bound
from kafka_reassign.planning.catch_up import log_dir_copy_rate, log_dir_throttle_needed, throttle_needed
from kafka_reassign.planning.leadership import senders
from kafka_reassign.units import DEFAULT_NETWORK_BYTES_PER_SEC, fmt_bytes, format_duration

INF = math.inf

SOURCE_FORMULA = "formula"
SOURCE_REHEARSAL = "rehearsal"


class StepLoad(NamedTuple):
    """What one KIP-435 step costs the brokers it crosses (a tuple: a million are made at 3M replicas).

    :param key: (topic, partition)
    :param leader: the broker the new replicas fetch from (the current leader)
    :param adding: brokers receiving a new replica
    :param size_bytes: bytes each new replica copies (the partition's size)
    :param produce: bytes/s written to the partition
    :param in_sync_followers: followers in the ISR now, each fetching ``produce`` bytes/s
    :param dir_brokers: brokers moving the replica between their own log dirs (KIP-113)
    :param sources: the step's current replicas that are in sync when it starts (any of them may
        send its bytes once it leads); empty: the leader only
    """

    key: TopicPartition
    leader: int
    adding: tuple[int, ...]
    size_bytes: int
    produce: float
    in_sync_followers: int
    dir_brokers: tuple[int, ...] = ()
    sources: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.key[0]}-{self.key[1]}"


def step_loads(steps: Iterable[Any], state: ClusterState) -> list[StepLoad]:
    """One :class:`StepLoad` per step (StepMove-like objects), in the given order.

    :param steps: objects with topic, partition, current, target, size_bytes[, log_dirs]
    :param state: the cluster as read before the run (leaders, ISR, produce rates)
    """
    steps = list(steps)
    # each partition looked up once (a million-step plan has several steps per partition)
    parts = {k: state.partition(*k) for k in dict.fromkeys((s.topic, s.partition) for s in steps)}
    sending = senders(steps, {k: p.leader for k, p in parts.items() if p is not None})
    out = []
    # Per partition, the replicas in sync when its next step starts: the ISR read before the run,
    # then every replica an earlier step of its chain added (a step ends once they caught up).
    in_sync: dict[TopicPartition, set[int]] = {}
    for s, lead in zip(steps, sending):
        current, target = tuple(s.current), tuple(s.target)
        p = parts[key := (s.topic, s.partition)]
        leader = lead if lead is not None else -1
        isr = p.isr if p is not None else current
        synced = in_sync.get(key) or in_sync.setdefault(key, set(isr or current))
        produce = p.bytes_in_per_sec if p is not None else 0.0
        size = int(getattr(s, "size_bytes", 0) or (p.size_bytes if p is not None else 0))
        adding = tuple([b for b in target if b not in current])  # lists, not generators: a million steps
        log_dirs = getattr(s, "log_dirs", None)
        dirs = tuple(b for b, d in zip(target, log_dirs) if d != "any") if current == target and log_dirs else ()
        out.append(StepLoad(key, leader, adding, size, produce, len([b for b in isr if b != leader and b in current]),
                            dirs, tuple([b for b in current if b in synced])))
        synced.update(adding)
    return out


@dataclass(frozen=True)
class QuotaLoad:
    """In-sync replication traffic recorded in each broker's quotas while the run's throttle is set.

    :param leader: broker -> bytes/s its in-sync followers fetch from it for throttled partitions
    :param follower: broker -> bytes/s its new replicas fetch once in sync (all of them, end of run)
    :param per_step: the throttled-replica lists name only the moves in flight (an executor that
        updates them per step): a move then shares its quotas only with moves in flight beside
        it, which the formula leaves to the rehearsal, and counts its own in-sync followers
    """

    leader: dict[int, float]
    follower: dict[int, float]
    per_step: bool = False

    def leader_in_sync(self, ld: StepLoad) -> float:
        """In-sync bytes/s recorded in the leader quota of ``ld``'s leader while it moves."""
        return ld.in_sync_followers * ld.produce if self.per_step else self.leader.get(ld.leader, 0.0)


def quota_load(loads: Iterable[StepLoad], per_step: bool = False) -> QuotaLoad:
    """The in-sync load the throttled partitions of the run put on their brokers' quotas.

    A partition counts once however many steps it has (its throttle is set once).

    :param per_step: the throttle lists name only the moves in flight (see :class:`QuotaLoad`)
    """
    leader: dict[int, float] = {}
    follower: dict[int, float] = {}
    if per_step:
        return QuotaLoad(leader=leader, follower=follower, per_step=True)
    seen: set[TopicPartition] = set()
    new_replicas: set[tuple[TopicPartition, int]] = set()
    for ld in loads:
        if not ld.adding:
            continue
        if ld.key not in seen:
            seen.add(ld.key)
            leader[ld.leader] = leader.get(ld.leader, 0.0) + ld.in_sync_followers * ld.produce
        for b in ld.adding:
            if (ld.key, b) not in new_replicas:
                new_replicas.add((ld.key, b))
                follower[b] = follower.get(b, 0.0) + ld.produce
    return QuotaLoad(leader=leader, follower=follower)


@dataclass
class Estimate:
    """A predicted moving time and where it comes from.

    :param seconds: predicted moving time (``inf``: some move never finishes)
    :param bound_seconds: the fixed-leader bound: busiest broker's bytes / its throttle, each copy
        sent by the prepare-time leader (no schedule with those senders is faster)
    :param source: ``formula`` (KIP-73 with in-sync traffic) or ``rehearsal`` (simulated run)
    :param busiest_broker: the broker that sets the bound
    :param bytes_total: bytes all new replicas copy
    :param broker_seconds: broker -> predicted busy time
    :param stalled: partitions that never finish at this throttle
    :param detail: free-form extra figures (rehearsal: ratio, CPU, ...; ``remote_bytes``: bytes of
        the moving partitions of tiered topics that stay in remote storage, never copied)
    :param source_free_seconds: the source-free bound: any in-sync replica may send a copy's bytes
        (no schedule at all is faster); None when not computed (older JSON)
    """

    seconds: float
    bound_seconds: float
    source: str = SOURCE_FORMULA
    busiest_broker: int | None = None
    bytes_total: int = 0
    broker_seconds: dict[int, float] = field(default_factory=dict)
    stalled: list[str] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)
    source_free_seconds: float | None = None

    @property
    def ratio(self) -> float | None:
        """Estimate / throttle bound (1.0 = as fast as the throttle allows)."""
        if not self.bound_seconds or math.isinf(self.seconds):
            return None
        return self.seconds / self.bound_seconds

    def describe(self) -> str:
        """One line for dry runs, plan summaries and logs; says where the figure comes from."""
        how = ("rehearsal on a simulated copy of the cluster" if self.source == SOURCE_REHEARSAL
               else "KIP-73 formula, in-sync replication counted in the throttle")
        if math.isinf(self.seconds):
            return (f"estimated moving time: never, {len(self.stalled)} move(s) stall "
                    f"({', '.join(self.stalled[:5])}{'...' if len(self.stalled) > 5 else ''}) [{how}]")
        extra = ""
        if self.ratio is not None:
            extra = f", {self.ratio:.2f}x the fixed-leader bound {format_duration(self.bound_seconds)}"
            if self.busiest_broker is not None:
                extra += f" (broker {self.busiest_broker})"
            if self.source_free_seconds is not None:
                extra += f"; source-free bound {format_duration(self.source_free_seconds)}"
        if self.detail.get("remote_bytes"):  # tiered topics (KIP-405): moves copy only the local log
            extra += f"; {fmt_bytes(self.detail['remote_bytes'])} in remote storage not copied"
        return f"estimated moving time: {format_duration(self.seconds)}{extra} [{how}]"

    def to_json(self) -> dict[str, Any]:
        return {"seconds": None if math.isinf(self.seconds) else round(self.seconds, 3),
                "bound_seconds": round(self.bound_seconds, 3), "source": self.source,
                "ratio": None if self.ratio is None else round(self.ratio, 4),
                "busiest_broker": self.busiest_broker, "bytes_total": self.bytes_total,
                "broker_seconds": {str(b): (None if math.isinf(v) else round(v, 3))
                                   for b, v in sorted(self.broker_seconds.items())},
                "stalled": list(self.stalled), "detail": dict(self.detail),
                "source_free_seconds": None if self.source_free_seconds is None else round(self.source_free_seconds, 3),
                "text": self.describe()}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Estimate":
        return cls(seconds=INF if d.get("seconds") is None else float(d["seconds"]),
                   bound_seconds=float(d.get("bound_seconds") or 0.0), source=d.get("source", SOURCE_FORMULA),
                   busiest_broker=d.get("busiest_broker"), bytes_total=int(d.get("bytes_total") or 0),
                   broker_seconds={int(b): (INF if v is None else float(v))
                                   for b, v in (d.get("broker_seconds") or {}).items()},
                   stalled=list(d.get("stalled") or []), detail=dict(d.get("detail") or {}),
                   source_free_seconds=(None if d.get("source_free_seconds") is None
                                        else float(d["source_free_seconds"])))


@dataclass(frozen=True)
class Limits:
    """Per-broker rates the estimate runs against.

    :param rate: replication throttle (None = not throttled)
    :param log_dir_rate: KIP-113 throttle (None = ``rate``)
    :param broker_rates: broker -> effective throttle where it differs from ``rate`` (a lower
        rate someone else set and the run keeps)
    :param network: broker -> network bytes/s (default 1 Gbit/s)
    """

    rate: float | None
    log_dir_rate: float | None = None
    broker_rates: Mapping[int, float] = field(default_factory=dict)
    network: Mapping[int, float] = field(default_factory=dict)

    def throttle(self, broker: int) -> float:
        r = self.broker_rates.get(broker, self.rate)
        return INF if r is None else float(r)

    def dir_throttle(self, broker: int) -> float:
        return self.throttle(broker) if self.log_dir_rate is None else float(self.log_dir_rate)

    def capacity(self, broker: int) -> float:
        return float(self.network.get(broker, DEFAULT_NETWORK_BYTES_PER_SEC))


def _drain(seconds: float, size: float, budget: float, produce: float) -> float:
    """Time to copy ``size`` bytes with ``budget`` bytes/s while the source grows at ``produce``."""
    if size <= 0:
        return seconds
    return INF if budget - produce <= 0 else seconds + size / (budget - produce)


def broker_times(loads: Sequence[StepLoad], limits: Limits, quota: QuotaLoad | None = None,
                 follower_base: Mapping[int, float] | None = None) -> dict[int, float]:
    """Seconds each broker spends on ``loads`` (moves through one broker share its quotas).

    :param loads: the steps (of one batch, or of the whole run)
    :param limits: throttles and network capacities
    :param quota: in-sync load of the whole run (default: from ``loads``)
    :param follower_base: broker -> follower-quota load already in sync before these steps
    """
    quota = quota or quota_load(loads)
    done_in = dict(follower_base or {})
    # Leader (outbound), follower (inbound) and log-dir quotas are separate: one clock each.
    sides: dict[tuple[int, str], float] = {}
    rate, dir_rate = cache(lambda b: min(limits.throttle(b), limits.capacity(b))), cache(limits.dir_throttle)  # once each
    for ld in loads:
        if ld.adding:
            lb = ld.leader
            budget = rate(lb) - quota.leader_in_sync(ld)
            sides[(lb, "out")] = _drain(sides.get((lb, "out"), 0.0), ld.size_bytes * len(ld.adding), budget,
                                        ld.produce * len(ld.adding))
            for b in ld.adding:
                budget = rate(b) - done_in.get(b, 0.0)
                sides[(b, "in")] = _drain(sides.get((b, "in"), 0.0), ld.size_bytes, budget, ld.produce)
                if not quota.per_step:  # in sync and still listed: it keeps costing P
                    done_in[b] = done_in.get(b, 0.0) + ld.produce
        for b in ld.dir_brokers:
            copy = log_dir_copy_rate(ld.size_bytes, dir_rate(b))  # below the limit: fetch loop
            sides[(b, "dir")] = _drain(sides.get((b, "dir"), 0.0), ld.size_bytes, copy, ld.produce)
    times: dict[int, float] = {}
    for (b, _side), secs in sides.items():
        times[b] = max(times.get(b, 0.0), secs)
    return times


def estimate_batches(batches: Sequence[Sequence[Any]], state: ClusterState, limits: Limits,
                     pipelined: bool = False, per_step: bool = False) -> tuple[Estimate, list[float]]:
    """Estimate a run made of batches of steps.

    :param batches: the steps of each batch, in execution order
    :param state: leaders, ISR and produce rates before the run
    :param limits: throttles and capacities
    :param pipelined: moves start as soon as their broker has room (a sliding window): the run
        takes as long as its busiest broker; otherwise each batch waits for the previous one
        and the run is the sum of the batches' busiest brokers
    :param per_step: the throttle lists name only the moves in flight (see :class:`QuotaLoad`)
    :returns: (the estimate, seconds per batch)
    """
    return estimate_loads([step_loads(b, state) for b in batches], state, limits, pipelined, per_step)


def estimate_loads(per_batch: Sequence[Sequence[StepLoad]], state: ClusterState | None, limits: Limits,
                   pipelined: bool = False, per_step: bool = False, stalls: Sequence[StallPoint] | None = None,
                   source_free: bool = True, remote_bytes: int | None = None) -> tuple[Estimate, list[float]]:
    """:func:`estimate_batches` on the batches' :func:`step_loads`; ``stalls``: their stalling :func:`stall_points`
    when the caller has them (made once for a million steps); ``source_free=False``: ``source_free_seconds`` None;
    ``remote_bytes``: the moving partitions' bytes in remote storage when the caller knows them (``state`` unread)."""
    everything = [ld for b in per_batch for ld in b]
    quota = quota_load(everything, per_step)
    whole = broker_times(everything, limits, quota)
    batch_secs = [] if len(per_batch) > 1 else [max(whole.values(), default=0.0)]  # one batch: the whole run
    follower_base: dict[int, float] = {}
    for loads in per_batch if len(per_batch) > 1 else ():
        times = broker_times(loads, limits, quota, follower_base)
        batch_secs.append(max(times.values(), default=0.0))
        for ld in loads:
            for b in ld.adding if not per_step else ():
                follower_base[b] = follower_base.get(b, 0.0) + ld.produce
    bound = throttle_bound(everything, limits)
    seconds = max(whole.values(), default=0.0) if pipelined else sum(batch_secs)
    stalled = sorted({p.name for p in (stall_points(everything, limits, quota, True) if stalls is None else stalls)})
    seconds = INF if stalled else seconds
    remote = remote_bytes if remote_bytes is not None else 0 if state is None else sum(
        p.remote_bytes for k in {ld.key for ld in everything} if (p := state.partition(*k)) is not None)
    return (Estimate(detail={"remote_bytes": remote} if remote else {}, seconds=seconds, bound_seconds=bound.seconds,
                     busiest_broker=bound.broker,
                     source_free_seconds=source_free_bound(everything, limits).seconds if source_free else None,
                     bytes_total=sum(ld.size_bytes * (len(ld.adding) or len(ld.dir_brokers)) for ld in everything),
                     broker_seconds=whole, stalled=stalled), batch_secs)


def estimate_run(steps: Sequence[Any], state: ClusterState, limits: Limits,
                 loads: Sequence[StepLoad] | None = None, stalls: Sequence[StallPoint] | None = None) -> Estimate:
    """The estimate of a run as the executor makes it, shared by the dry run, the planner's
    summary, the rehearsal's comparison and the UI.

    The executor runs every KIP-435 step in one sliding window (pipelined) and names only the
    moves in flight as throttled replicas (per step).

    :param steps: the run's StepMove-like steps, in executor order
    :param state: leaders, ISR and produce rates before the run
    :param limits: throttles and capacities
    :param loads: ``step_loads(steps, state)`` when the caller made them (prepare's pre-flight check did)
    :param stalls: their stalling points at ``limits`` (per step) when the caller made them (that check did)
    """
    if loads is None:
        loads = step_loads(steps, state)
    return estimate_loads([loads], state, limits, pipelined=True, per_step=True, stalls=stalls)[0]


class StallPoint(NamedTuple):
    """Where a move stops making progress.

    A named tuple, not a frozen dataclass: a pre-flight check makes one per copying step and broker
    it crosses (400,000 for 100,000 moves), and a frozen dataclass's ``__init__`` took 3.5 times as long.

    :param name: partition ``topic-p``
    :param broker: the broker whose quota runs out
    :param side: ``leader`` (its leader quota) or ``follower`` (the receiving broker's quota)
        or ``log_dir`` (KIP-113 copy)
    :param produce: the partition's produce rate (bytes/s)
    :param in_sync: in-sync load already recorded in that quota (bytes/s), the move's own
        in-sync followers included
    :param needed: the throttle must be above this for the move to finish
    :param throttle: the throttle the run would have on that broker
    """

    name: str
    broker: int
    side: str
    produce: float
    in_sync: float
    needed: float
    throttle: float

    @property
    def stalls(self) -> bool:
        return self.throttle <= self.needed

    @property
    def catch_up(self) -> float:
        """Bytes/s the new replica gains on the log end when it moves alone."""
        return self.throttle - self.needed


def stall_points(loads: Sequence[StepLoad], limits: Limits, quota: QuotaLoad | None = None,
                 stalling_only: bool = False) -> list[StallPoint]:
    """For each copying step: the throttle it needs on its leader and on each receiving broker.

    Leader side: ``R > (in-sync load of every throttled partition it leads) + P``; for a
    partition alone (or with per-step throttle lists) that is ``(k+1)P``. Follower side, for
    the last move into a broker: ``R >`` the produce rates of all new replicas it receives (the
    others are in sync by then), or ``P`` with per-step lists. The catching-up part counts
    more (:mod:`kafka_reassign.planning.catch_up`: what real Kafka showed).

    :param stalling_only: only the points that stall (a plan's million steps mostly do not)
    """
    quota = quota or quota_load(loads)
    out: list[StallPoint] = []
    throttle_of, dir_throttle_of = cache(limits.throttle), cache(limits.dir_throttle)

    def point(ld: StepLoad, broker: int, side: str, in_sync: float, needed: float, throttle: float) -> None:
        if not stalling_only or throttle <= needed:  # StallPoint.stalls, before making the point
            out.append(StallPoint(ld.name, broker, side, ld.produce, in_sync, needed, throttle))

    for ld in loads:
        if ld.produce <= 0:
            continue
        if ld.adding:
            used = quota.leader_in_sync(ld)
            point(ld, ld.leader, "leader", used, throttle_needed(used, ld.produce * len(ld.adding)),
                  throttle_of(ld.leader))
            for b in ld.adding:
                total = ld.produce if quota.per_step else quota.follower.get(b, 0.0)
                point(ld, b, "follower", total - ld.produce, throttle_needed(total - ld.produce, ld.produce),
                      throttle_of(b))
        for b in ld.dir_brokers:  # the alter-log-dirs thread's fetches (catch_up.log_dir_copy_rate)
            point(ld, b, "log_dir", 0.0, log_dir_throttle_needed(ld.produce), dir_throttle_of(b))
    return out
