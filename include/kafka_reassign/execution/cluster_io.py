"""The executor's reads and writes against Kafka, sized by what is in flight, never by the plan.

A poll reads ListPartitionReassignments and the live brokers (one request each) and
DescribeLogDirs of the brokers in flight for the partitions in flight (one per broker). No
Metadata: Kafka answers it per topic, so its size would follow the plan, and KIP-435 already
says what a poll needs: a reassignment leaves the listing only once every added replica has
joined the ISR. A refill submits with one AlterPartitionReassignments (and one
AlterReplicaLogDirs for log-dir steps); only the first refill of a run (or of a resumed run)
reads the candidates' metadata, to skip steps already done and refuse partitions that moved.
So the number of requests per poll stays flat however large the plan is.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from kafka_reassign.cluster.metadata import PartitionMetadata
from kafka_reassign.cluster.port import KafkaAdminPort
from kafka_reassign.errors import KafkaAdminError
from kafka_reassign.execution.outcome import StepObservation
from kafka_reassign.cluster.state import InFlight, TopicPartition
from kafka_reassign.execution.steps import StepMove

log = logging.getLogger(__name__)


@dataclass
class ClusterView:
    """One read of the cluster for the partitions in flight."""

    in_flight: dict[TopicPartition, InFlight]
    alive: set[int]
    sizes: dict[tuple[str, int, int], int] = field(default_factory=dict)
    dirs: dict[tuple[str, int, int], str] = field(default_factory=dict)
    futures: set[tuple[str, int, int]] = field(default_factory=set)


def read_cluster(admin: KafkaAdminPort, steps: Sequence[StepMove], whole_brokers: bool = False) -> ClusterView:
    """Read what the steps in flight need: reassignments, live brokers, replica sizes and dirs.

    :param whole_brokers: ask the brokers in flight about every replica they host (the adaptive
        throttle measures their client traffic from it): the same requests, larger answers
    """
    listing = admin.list_partition_reassignments(None)
    alive = {b.id for b in admin.describe_cluster().brokers if not b.fenced}
    view = ClusterView(in_flight=listing, alive=alive)
    asks: dict[int, set[TopicPartition]] = {}
    for s in steps:
        for b in {*s.current, *s.target} & alive:
            asks.setdefault(b, set()).add(s.key)
    if asks:
        # Each broker is asked about its own replicas only: requests stay as small as the window.
        wanted = None if whole_brokers else {b: sorted(k) for b, k in asks.items()}
        for r in admin.describe_log_dirs(sorted(asks), wanted):
            k = (r.topic, r.partition, r.broker)
            if r.is_future:
                view.futures.add(k)
                view.sizes[k] = r.size
            else:
                view.sizes.setdefault(k, r.size)
                view.dirs[k] = r.path
    return view


def left_listing(steps: Mapping[int, StepMove], listing: Mapping[TopicPartition, InFlight]) -> list[int]:
    """Steps whose partition is no longer listed as moving to their target (finished, or changed
    by someone): a full poll judges them. Log-dir steps are not listed; the full poll reads them."""
    return [i for i, s in steps.items() if not s.is_log_dir_only
            and (s.key not in listing or tuple(listing[s.key].target) != tuple(s.target))]


def observe(step: StepMove, view: ClusterView) -> StepObservation:
    """What ``view`` says about one step.

    Bytes left: the source's log size (the largest copy among the step's current replicas)
    minus each new replica's size. A partition that left the listing finished its step
    (KIP-435 drops it only when the new replicas are in sync); one listed with another target
    was changed by someone else (its replicas are reported as that target).
    """
    inf = view.in_flight.get(step.key)
    offline = tuple(b for b in step.target if b not in view.alive)
    source = max((view.sizes.get((step.topic, step.partition, b), -1) for b in step.current
                  if (step.topic, step.partition, b) not in view.futures), default=-1)
    base = source if source >= 0 else step.size_bytes
    lagging: list[tuple[int, int]] = []
    total = left = 0
    if step.is_log_dir_only:
        dirs_ok = True
        for b, d in sorted(step.wanted_dirs().items()):
            k = (step.topic, step.partition, b)
            done = view.dirs.get(k) == d and k not in view.futures
            dirs_ok &= done
            total += base
            if not done:
                behind = max(0, base - view.sizes.get(k, 0)) if k in view.futures else base
                left += behind
                lagging.append((b, behind))
        return StepObservation(in_flight=False, replicas=step.target, isr=step.target, offline=offline,
                               bytes_left=left, bytes_total=total, leader_size=source if source >= 0 else None,
                               lagging=lagging, dirs_ok=dirs_ok)
    if inf is None:
        return StepObservation(in_flight=False, replicas=step.target, isr=step.target, offline=offline,
                               bytes_total=base * len(step.adding), leader_size=source if source >= 0 else None)
    for b in step.adding:
        total += base
        behind = max(0, base - view.sizes.get((step.topic, step.partition, b), 0))
        if behind:
            left += behind
            lagging.append((b, behind))
    replicas = step.current if tuple(inf.target) == tuple(step.target) else tuple(inf.target)
    return StepObservation(in_flight=tuple(inf.target) == tuple(step.target), replicas=tuple(replicas),
                           offline=offline, bytes_left=left, bytes_total=total,
                           leader_size=source if source >= 0 else None, lagging=lagging)


@dataclass
class Admission:
    """What a refill does with its candidates (step indices)."""

    submit: list[int] = field(default_factory=list)
    adopted: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    refused: dict[int, str] = field(default_factory=dict)
    #: log-dir steps to submit: step index -> {(topic, partition, broker): dir} not in place yet
    dir_moves: dict[int, dict[tuple[str, int, int], str]] = field(default_factory=dict)


def _classify_dir_steps(admin: KafkaAdminPort, steps: Mapping[int, StepMove], out: Admission) -> None:
    """Log-dir steps: skip those already in their dirs, adopt those already moving there."""
    brokers = sorted({b for s in steps.values() for b in s.wanted_dirs()})
    rows = admin.describe_log_dirs(brokers, sorted({s.key for s in steps.values()})) if brokers else []
    where = {(r.topic, r.partition, r.broker): r.path for r in rows if not r.is_future}
    future = {(r.topic, r.partition, r.broker): r.path for r in rows if r.is_future}
    for i, s in steps.items():
        wanted = {(s.topic, s.partition, b): d for b, d in s.wanted_dirs().items()}
        todo = {k: d for k, d in wanted.items() if where.get(k) != d and future.get(k) != d}
        if todo:
            out.submit.append(i)
            out.dir_moves[i] = todo
        elif any(future.get(k) == d for k, d in wanted.items()):
            out.adopted.append(i)
        else:
            out.skipped.append(i)


def classify(candidates: Mapping[int, StepMove], listing: Mapping[TopicPartition, InFlight],
             admin: KafkaAdminPort, verify: bool) -> Admission:
    """Sort candidates into submit / adopt (already moving there) / skip (already there) / refuse.

    With ``verify`` (the first refill of a run or of a resumed run) the candidates' replicas are
    read: re-running after a crash never submits a step that completed, and adopts one whose
    submission happened but was not saved. Later refills trust the executor's own record.
    """
    out = Admission()
    parts = admin.partition_metadata([s.key for s in candidates.values() if not s.is_log_dir_only]) if verify else {}
    _classify_dir_steps(admin, {i: s for i, s in candidates.items() if s.is_log_dir_only}, out)
    for i, s in candidates.items():
        if s.is_log_dir_only:
            continue
        p = parts.get(s.key)
        inf = listing.get(s.key)
        cur = tuple(p.replicas) if p is not None else None
        if not verify:
            cur = tuple(s.current)
        if cur is None:
            out.refused[i] = f"{s.name}: UNKNOWN_TOPIC_OR_PARTITION (the partition no longer exists)"
        elif inf is not None:
            if tuple(inf.target) == tuple(s.target):
                out.adopted.append(i)
            else:
                out.refused[i] = (f"{s.name} is being reassigned to {list(inf.target)} by someone else; "
                                  "not touched")
        elif cur == tuple(s.target):
            out.skipped.append(i)
        elif set(cur) != set(s.current):
            out.refused[i] = (f"{s.name} replicas are {list(cur)}, not {list(s.current)} as planned; "
                              "prepare the run again")
        else:
            out.submit.append(i)
    return out


def submit(admin: KafkaAdminPort, steps: Mapping[int, StepMove],
           dir_moves: Mapping[int, Mapping[tuple[str, int, int], str]]) -> dict[int, str]:
    """Submit steps: one AlterPartitionReassignments, one AlterReplicaLogDirs; errors by index.

    :param dir_moves: for log-dir steps, the replicas to move (see :class:`Admission`)
    """
    errors: dict[int, str] = {}
    moves = {i: s for i, s in steps.items() if not s.is_log_dir_only}
    _preset_log_dirs(admin, moves.values())
    by_key = {s.key: i for i, s in moves.items()}
    for key, err in admin.alter_partition_reassignments({s.key: list(s.target) for s in moves.values()}).items():
        if err is not None and key in by_key:
            errors[by_key[key]] = f"{key[0]}-{key[1]}: AlterPartitionReassignments refused it: {err}"
    dirs = {k: d for i, s in steps.items() if s.is_log_dir_only for k, d in dir_moves.get(i, {}).items()}
    if dirs:
        owner = {(s.topic, s.partition): i for i, s in steps.items() if s.is_log_dir_only}
        for (t, p, b), err in admin.alter_replica_log_dirs(dirs).items():
            if err is not None:
                errors[owner[(t, p)]] = f"{t}-{p}: AlterReplicaLogDirs to broker {b} refused: {err}"
    return errors


def _preset_log_dirs(admin: KafkaAdminPort, steps: Iterable[StepMove]) -> None:
    """Tell brokers the wanted dir of a new replica before it exists (as kafka-reassign-partitions does)."""
    preferred = {(s.topic, s.partition, b): d for s in steps if s.log_dirs
                 for b, d in s.wanted_dirs().items() if b in s.adding}
    if not preferred:
        return
    try:
        answers = admin.alter_replica_log_dirs(preferred)
    except KafkaAdminError as exc:  # best effort: the log-dir step that follows moves them anyway
        log.warning("could not pre-set log dirs of new replicas (%s); a log-dir step follows", exc)
        return
    for k, err in answers.items():
        if err not in (None, "REPLICA_NOT_AVAILABLE"):
            log.warning("could not pre-set log dir %s for %s-%s on broker %s: %s", preferred[k], *k, err)


def elect_leaders(admin: KafkaAdminPort, partitions: Sequence[TopicPartition]) -> int:
    """Preferred leader election (one request); returns how many partitions changed leader."""
    if not partitions:
        return 0
    changed = 0
    for (t, p), err in admin.elect_preferred_leaders(list(partitions)).items():
        if err:
            log.warning("preferred leader election for %s-%s: %s", t, p, err)
        else:
            changed += 1
    return changed
