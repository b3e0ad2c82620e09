"""Pre-flight: refuse, before the first write, a run whose throttle would stall a move.

Kafka records every follower fetch of a throttled partition in the leader's replication
quota, in-sync followers included, and holds back only the out-of-sync ones (see
:mod:`kafka_reassign.planning.estimate`). A partition written at ``P`` with ``k`` in-sync followers
therefore needs a throttle above ``(k+1)P`` on its leader, more when the leader serves
other throttled partitions, or its new replica never catches up: the reassignment hangs,
under-replicated, until someone notices. :func:`preflight` finds those moves from measured
produce rates and refuses the run (nothing written) naming the partitions, the brokers and
the smallest throttle that works, unless the operator sets ``allow_stalling_moves``.

Produce rates are measured, never guessed: the partitions' log-end offsets (ListOffsets)
and their leaders' log sizes (DescribeLogDirs) are read twice, ``produce_sample_seconds``
apart, and the growth of the leader's log is the rate (offset growth times the mean record
size when retention shrank the log in between). A snapshot's ``bytes_in_per_sec`` carries
rates for offline use (``prepare(..., produce_rates=...)``).
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

from kafka_reassign.cluster.config_source import ConfigsRead
from kafka_reassign.cluster.consumers import bytes_per_offset
from kafka_reassign.cluster.port import ClusterReader, KafkaAdminPort
from kafka_reassign.errors import PreflightError, Problem
from kafka_reassign.planning.estimate import Limits, StallPoint, StepLoad, quota_load, stall_points, step_loads
from kafka_reassign.cluster.state import ClusterState, TopicPartition
from kafka_reassign.units import fmt_bytes

log = logging.getLogger(__name__)
T = TypeVar("T")

#: A move whose catch-up gets less than this share of the throttle is reported as slow.
SLOW_SHARE = 0.5
#: Partitions named per message (the rest are counted).
NAMED = 10


@dataclass
class ProduceRates:
    """Produce rates of the moving partitions and how they were obtained.

    :param rates: (topic, partition) -> bytes/s
    :param source: ``sampled`` (measured on the cluster), ``given`` (a snapshot's
        bytes_in_per_sec) or ``none`` (not measured: the stall check is skipped)
    :param seconds: sampling window (sampled only)
    :param records: (topic, partition) -> records/s from the log-end offsets (sampled only)
    :param missing: partitions that could not be measured (leader offline...)
    """

    rates: dict[TopicPartition, float]
    source: str
    seconds: float = 0.0
    records: dict[TopicPartition, float] = field(default_factory=dict)
    missing: list[TopicPartition] = field(default_factory=list)

    def describe(self) -> str:
        if self.source == "sampled":
            return (f"produce rates measured over {self.seconds:.1f}s (log-end offsets and leader log growth) "
                    f"for {len(self.rates)} partition(s)")
        if self.source == "given":
            return f"produce rates from the snapshot's bytes_in_per_sec ({len(self.rates)} partition(s) written)"
        return "produce rates not measured (produce_sample_seconds is 0 and no snapshot rates)"


def _leader_sizes(admin: KafkaAdminPort, leaders: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    brokers = sorted({b for b in leaders.values() if b >= 0})
    if not brokers:
        return {}
    rows = admin.describe_log_dirs(brokers, sorted(leaders))
    return {(r.topic, r.partition): r.size for r in rows
            if not r.is_future and leaders.get((r.topic, r.partition)) == r.broker}


def _timed(clock: Callable[[], float], read: Callable[[], T]) -> tuple[T, float]:
    start = clock()
    value = read()
    return value, (start + clock()) / 2


def measure_produce_rates(admin: KafkaAdminPort, state: ClusterState, partitions: Iterable[TopicPartition], seconds: float,
                          *, sleep: Callable[[float], None] = time.sleep,
                          clock: Callable[[], float] = time.monotonic) -> ProduceRates:
    """Sample log-end offsets and leader log sizes twice, ``seconds`` apart.

    :param admin: KafkaAdmin
    :param state: for the partitions' leaders
    :param partitions: the partitions to measure (the moving ones)
    :param seconds: sampling window (> 0)
    """
    leaders: dict[TopicPartition, int] = {}
    for key in partitions:
        p = state.partition(*key)
        if p is not None and p.leader >= 0:
            leaders[key] = p.leader
    # Each read is stamped at its own midpoint: a slow second read (a loaded broker, a new
    # connection) would otherwise count the bytes written while it waited against the window.
    off0, to0 = _timed(clock, lambda: admin.list_offsets(leaders))
    size0, ts0 = _timed(clock, lambda: _leader_sizes(admin, leaders))
    sleep(seconds)
    off1, to1 = _timed(clock, lambda: admin.list_offsets(leaders))
    size1, ts1 = _timed(clock, lambda: _leader_sizes(admin, leaders))
    dt, dt_off = max(ts1 - ts0, 1e-6), max(to1 - to0, 1e-6)
    rates: dict[TopicPartition, float] = {}
    records: dict[TopicPartition, float] = {}
    shrunk: list[TopicPartition] = []
    missing: list[TopicPartition] = []
    for key in leaders:
        if key in off0 and key in off1:
            records[key] = max(0, off1[key] - off0[key]) / dt_off
        if key in size0 and key in size1 and size1[key] >= size0[key]:
            rates[key] = (size1[key] - size0[key]) / dt
        elif key in size0 and key in size1 and key in records:
            shrunk.append(key)  # retention deleted a segment in between: use offsets instead
        else:
            missing.append(key)
    if shrunk:
        starts = admin.list_offsets(shrunk, latest=False)
        for key in shrunk:
            scale = bytes_per_offset(size1[key], starts.get(key, off1.get(key, 0)), off1.get(key, 0))
            rates[key] = records[key] * scale if scale is not None else 0.0
    if missing:
        log.warning("produce rate not measured for %d partition(s) (no leader or no answer): %s", len(missing),
                    ", ".join(f"{t}-{p}" for t, p in missing[:NAMED]))
    return ProduceRates(rates=rates, source="sampled", seconds=dt, records=records, missing=missing)


def effective_rates(rate: int | None, configs: Mapping[tuple[str, str], Mapping[str, str | None]],
                    brokers: Iterable[int]) -> dict[int, float]:
    """Broker -> the throttle it will really have: ours, or a lower one someone set and we keep.

    :param rate: the run's throttle
    :param configs: dynamic broker configs read before the run (``("broker", "1") -> {key: value}``)
    """
    from kafka_reassign.throttle.specs import FOLLOWER_RATE, LEADER_RATE
    out: dict[int, float] = {}
    if rate is None:
        return out
    for b in brokers:
        vals = (configs.get(("broker", str(b))) or {})
        theirs = []
        for key in (LEADER_RATE, FOLLOWER_RATE):
            try:
                theirs.append(float(vals.get(key) or ""))
            except ValueError:  # not set (None -> "") or not a number
                continue
        if theirs and min(theirs) < rate:
            out[b] = min(theirs)
    return out


def smallest_working_throttle(points: Iterable[StallPoint]) -> int | None:
    """The smallest throttle (rounded up to 1 KB/s) above every move's stall point."""
    needed = max((p.needed for p in points), default=0.0)
    if needed <= 0:
        return None
    return int(math.floor(needed / 1000.0) + 1) * 1000


@dataclass
class PreflightReport:
    """The stall check of a run, before any write.

    :param points: every copying move's stall point on each broker it crosses
    :param throttle: the run's throttle (None = unthrottled)
    :param rates: the produce rates used
    :param kept_lower: brokers whose lower throttle (set by someone else) the run keeps
    :param together: leader broker -> throttle its moves need when all are in flight at once
        (only where that is above the throttle; per-step throttle lists)
    :param loads: the steps' :func:`~.estimate.step_loads` checked (prepare's estimate reads them too);
        None when not kept
    """

    points: list[StallPoint]
    throttle: int | None
    rates: ProduceRates
    kept_lower: dict[int, float] = field(default_factory=dict)
    together: dict[int, float] = field(default_factory=dict)
    loads: list[StepLoad] | None = field(default=None, repr=False, compare=False)

    @property
    def stalls(self) -> list[StallPoint]:
        return [p for p in self.points if p.stalls]

    @property
    def slow(self) -> list[StallPoint]:
        return [p for p in self.points if not p.stalls and p.catch_up < SLOW_SHARE * p.throttle]

    @property
    def smallest_throttle(self) -> int | None:
        return smallest_working_throttle(self.points)

    def problems(self) -> list[Problem]:
        """One problem per stalling move (up to a limit) and one naming the throttle that works."""
        stalls = sorted(self.stalls, key=lambda p: -(p.needed - p.throttle))
        out = [Problem(p.name, _stall_reason(p), "stalling_move") for p in stalls[:NAMED * 5]]
        if len(stalls) > NAMED * 5:
            out.append(Problem("...", f"and {len(stalls) - NAMED * 5} more stalling move(s)", "stalling_move"))
        if stalls:
            need = self.smallest_throttle
            brokers = sorted({p.broker for p in stalls})
            names = sorted({p.name for p in stalls})
            lower = sorted(b for b in brokers if b in self.kept_lower)
            reason = (f"{len(names)} move(s) would stall on broker(s) {','.join(map(str, brokers))}; the smallest "
                      f"throttle that lets every move finish is {fmt_bytes(need or 0)}/s ({need}); "
                      "raise throttle_bytes_per_sec, move fewer written partitions at once, or set "
                      "allow_stalling_moves to start them anyway (they stay under-replicated until the "
                      "throttle is raised)")
            if lower:
                reason += (f"; broker(s) {','.join(map(str, lower))} keep a lower throttle someone else set, "
                           "remove it first")
            out.append(Problem("throttle_bytes_per_sec", reason, "throttle_too_low"))
        return out

    def warnings(self) -> list[str]:
        """Slow moves (most of the throttle goes to in-sync traffic) and what was not checked."""
        return self._warnings(self.slow)

    def _warnings(self, slow: list[StallPoint]) -> list[str]:
        """:meth:`warnings` given :attr:`slow` (a pass over every point: a million at 3M replicas)."""
        out = []
        if self.rates.source == "none":
            out.append("stall check skipped: " + self.rates.describe())
        if self.rates.missing:
            out.append(f"stall check incomplete: produce rate of {len(self.rates.missing)} partition(s) not "
                       "measured (no leader)")
        by_broker: dict[tuple[int, str], list[StallPoint]] = {}
        for p in slow:
            by_broker.setdefault((p.broker, p.side), []).append(p)
        for (b, side), pts in sorted(by_broker.items()):
            pts.sort(key=lambda p: p.catch_up)
            worst = pts[0]
            names = ", ".join(p.name for p in pts[:NAMED]) + (f" and {len(pts) - NAMED} more" if len(pts) > NAMED
                                                              else "")
            out.append(f"slow moves on broker {b} ({side} quota): in-sync replication of throttled partitions and "
                       f"produce take {fmt_bytes(worst.needed)}/s of its {fmt_bytes(worst.throttle)}/s throttle, "
                       f"so {names} copy at {fmt_bytes(worst.catch_up)}/s or less; a throttle of "
                       f"{fmt_bytes(2 * worst.needed)}/s would give them half of it")
        for b, need in sorted(self.together.items()):
            out.append(f"the moves led by broker {b} need {fmt_bytes(need)}/s of its leader quota when all are in "
                       f"flight together (in-sync followers and produce), above its throttle: with too many in "
                       f"flight at once they all stall; lower max_partition_movements or raise "
                       f"throttle_bytes_per_sec")
        return out

    def to_json(self) -> dict[str, Any]:
        stalls, slow = self.stalls, self.slow  # each a pass over every point: made once here
        return {"throttle": self.throttle, "rates_source": self.rates.source, "rates": self.rates.describe(),
                "smallest_throttle": self.smallest_throttle,
                "stalls": [_point_json(p) for p in stalls[:NAMED * 5]], "stall_count": len(stalls),
                "slow_count": len(slow), "warnings": self._warnings(slow)}


def _point_json(p: StallPoint) -> dict[str, Any]:
    return {"partition": p.name, "broker": p.broker, "side": p.side, "produce": round(p.produce, 3),
            "in_sync": round(p.in_sync, 3), "needed": round(p.needed, 3), "throttle": p.throttle}


def _stall_reason(p: StallPoint) -> str:
    if p.side == "leader":
        where = (f"broker {p.broker} (its leader) records {fmt_bytes(p.in_sync)}/s of in-sync replication of "
                 "throttled partitions in its leader quota")
    elif p.side == "follower":
        where = (f"broker {p.broker} (receiving it) records {fmt_bytes(p.in_sync)}/s of its other new, in-sync "
                 "replicas in its follower quota")
    else:
        where = f"broker {p.broker} copies it between log dirs"
    return (f"written at {fmt_bytes(p.produce)}/s; {where}, so the new replica needs a throttle above "
            f"{fmt_bytes(p.needed)}/s to catch up, and the throttle there is {fmt_bytes(p.throttle)}/s: "
            "it would never finish")


def preflight(steps: Sequence[Any], state: ClusterState, throttle: int | None, rates: ProduceRates, *,
              log_dir_throttle: int | None = None,
              current_configs: Mapping[tuple[str, str], Mapping[str, str | None]] | None = None,
              per_step: bool = False) -> PreflightReport:
    """Check every copying step of a run against its brokers' throttles.

    :param steps: all StepMoves of the run (their throttles are set together)
    :param state: the cluster before the run, with ``bytes_in_per_sec`` set from ``rates``
    :param throttle: the run's replication throttle (None: nothing to check)
    :param rates: how the produce rates were obtained (already applied to ``state``)
    :param log_dir_throttle: KIP-113 throttle (None: ``throttle``)
    :param current_configs: dynamic broker configs read before the run (lower rates kept)
    :param per_step: the executor lists only the moves in flight as throttled replicas: each
        move is checked alone (``(k+1)P``), and brokers whose moves would stall if all were in
        flight together are warned about
    """
    loads = step_loads(steps, state)
    brokers = {ld.leader for ld in loads} | {b for ld in loads for b in ld.adding}
    kept = effective_rates(throttle, current_configs or {}, brokers)
    if throttle is None and log_dir_throttle is None:
        return PreflightReport(points=[], throttle=None, rates=rates, loads=loads)
    limits = Limits(rate=throttle, log_dir_rate=log_dir_throttle, broker_rates=kept)
    points = stall_points(loads, limits, quota_load(loads, per_step))
    if throttle is None:
        points = [p for p in points if p.side == "log_dir"]
    together: dict[int, float] = {}
    if per_step and throttle is not None:
        # Moves led by one broker and in flight at once share its leader quota.
        for ld in loads:
            if ld.adding and ld.produce > 0:
                together[ld.leader] = together.get(ld.leader, 0.0) + (ld.in_sync_followers + len(ld.adding)) * ld.produce
        together = {b: need for b, need in together.items() if need >= limits.throttle(b)}
    return PreflightReport(points=points, throttle=throttle, rates=rates, kept_lower=kept, together=together,
                           loads=loads)


def enforce(report: PreflightReport, allow_stalling_moves: bool) -> list[str]:
    """Raise :class:`PreflightError` when moves would stall, unless allowed; return warnings.

    :param allow_stalling_moves: start them anyway (each is named in a warning)
    """
    warnings = report.warnings()
    if not report.stalls:
        return warnings
    if not allow_stalling_moves:
        raise PreflightError(report.problems())
    named = ", ".join(sorted({p.name for p in report.stalls})[:NAMED])
    return [f"allow_stalling_moves is set: {len(report.stalls)} move(s) will not finish at this throttle "
            f"({named}); their new replicas stay out of sync until the throttle is raised above "
            f"{fmt_bytes(report.smallest_throttle or 0)}/s"] + warnings


class SnapshotView:
    """The read side of an admin client over a snapshot, for offline checks (``validate --snapshot``).

    :param snapshot: a snapshot dict; brokers' ``throttle_configs`` and topics' throttled-replica
        configs are what ``describe_configs`` returns
    """

    def __init__(self, snapshot: Mapping[str, Any]) -> None:
        self.snapshot = snapshot

    def cluster_state(self, include_log_dirs: bool = True, topics: list[str] | None = None) -> ClusterState:
        """The snapshot's cluster (it always holds sizes and log dirs; every topic of it)."""
        return ClusterState.from_snapshot(dict(self.snapshot))

    def describe_configs(self, broker_ids: Iterable[int] = (), topics: Iterable[str] = (),
                         keys: Iterable[str] | None = None) -> dict[tuple[str, str], dict[str, str | None]]:
        wanted = list(keys) if keys is not None else None
        brokers = {str(b["id"]): b.get("throttle_configs") or {} for b in self.snapshot.get("brokers", [])}
        configs = {t["name"]: t.get("configs") or {} for t in self.snapshot.get("topics", [])}
        out: dict[tuple[str, str], dict[str, str | None]] = {}
        for rtype, names, source in (("broker", [str(b) for b in broker_ids], brokers),
                                     ("topic", list(topics), configs)):
            for name in names:
                have = source.get(name, {})
                out[(rtype, name)] = {k: (None if have.get(k) is None else str(have[k]))
                                      for k in (wanted if wanted is not None else have)}
        return out

    def describe_sourced(self, broker_ids: Iterable[int] = (), topics: Iterable[str] = (),
                         keys: Iterable[str] | None = None) -> ConfigsRead:
        """:meth:`describe_configs` as a ConfigsRead: a snapshot holds no cluster-wide defaults."""
        return ConfigsRead(self.describe_configs(broker_ids, topics, keys), {})


_implements_reader: type[ClusterReader] = SnapshotView  # mypy proves it stands in for the read side

__all__ = ["SnapshotView", "ProduceRates", "PreflightReport", "measure_produce_rates", "preflight", "enforce",
           "effective_rates", "smallest_working_throttle"]
