"""Cancel (revert) a run's in-flight moves, and only ours: someone else's are left alone.

Which moves are ours is :mod:`kafka_reassign.execution.ownership`'s rule (our durable record
lists the target and the cluster still moves there). Kafka reverts a cancelled partition to
``replicas - adding``, which loses the original order (so the preferred leader can change):
where we know the order the step started from, it is put back with a reorder-only
reassignment (no data moves).
"""
from __future__ import annotations

import logging
import time
from typing import Mapping, Sequence, TypedDict

from kafka_reassign.cluster.port import KafkaAdminPort
from kafka_reassign.cluster.state import InFlight, TopicPartition
from kafka_reassign.execution.ownership import SubmittedTargets, ours_among, partition_names
from kafka_reassign.execution.steps import StepMove
from kafka_reassign.planning.plan import ReassignmentPlan
from kafka_reassign.run.prepare import PreparedRun

log = logging.getLogger(__name__)


class CancelReport(TypedDict):
    """What :func:`cancel_in_flight` did (plain JSON, an XCom value as it is).

    :param cancelled: ``topic-partition`` (and ``topic-partition@broker`` for log-dir moves) reverted
    :param left: partitions of the plan in flight that are not ours (left alone)
    :param reordered: partitions whose replica order before the move was put back
    :param errors: ``topic-partition`` -> the error of a cancel Kafka refused
    """

    cancelled: list[str]
    left: list[str]
    reordered: list[str]
    errors: dict[str, str]


def cancel_in_flight(admin: KafkaAdminPort, what: PreparedRun | ReassignmentPlan, *,
                     submitted: SubmittedTargets | None,
                     original: Mapping[TopicPartition, Sequence[int]] | None = None) -> CancelReport:
    """Cancel (revert) the in-flight reassignments that are ours; leave everyone else's alone.

    :param what: a prepared run (its steps: the order each started from, its log-dir moves)
        or a plan (its partitions in flight that are not ours are reported as ``left``)
    :param submitted: what our durable record lists as submitted
        (:func:`kafka_reassign.execution.ownership.run_submitted`): only those moves are ours
    :param original: replica lists to put back in this order (where the steps are not known)
    """
    steps = what.steps if isinstance(what, PreparedRun) else []
    plan = what.plan if isinstance(what, PreparedRun) else what
    in_flight = admin.list_partition_reassignments(sorted(set(submitted or {}) | {m.key for m in plan.moves}))
    ours = ours_among(in_flight, submitted)
    left = partition_names(key for key in in_flight if key not in ours)
    out: CancelReport = {"cancelled": [], "left": left, "reordered": [], "errors": {}}
    if ours:
        _cancel_reassignments(admin, ours, _start_order(steps, ours, original or {}), out)
    dir_steps = [s for s in steps if s.is_log_dir_only]
    if dir_steps:
        _cancel_dir_moves(admin, dir_steps, out)
    if left:
        log.warning("not cancelling reassignments that are not ours: %s", ", ".join(left))
    return out


def _start_order(steps: list[StepMove], ours: Mapping[TopicPartition, InFlight],
                 original: Mapping[TopicPartition, Sequence[int]]) -> dict[TopicPartition, tuple[int, ...]]:
    """The replica order each of our moves started from: its step's, else ``original``'s, else Kafka's."""
    origin = {(s.key, tuple(s.target)): tuple(s.current) for s in steps}
    return {key: origin.get((key, tuple(inf.target)), tuple(original.get(key, inf.original)))
            for key, inf in ours.items()}


def _cancel_reassignments(admin: KafkaAdminPort, ours: Mapping[TopicPartition, InFlight],
                          restore_order: dict[TopicPartition, tuple[int, ...]], out: CancelReport) -> None:
    """Cancel ``ours``, then put back the replica order of those cancelled (fills ``out``)."""
    for key, err in admin.alter_partition_reassignments(dict.fromkeys(ours)).items():
        name = f"{key[0]}-{key[1]}"
        if err is None or err == "NO_REASSIGNMENT_IN_PROGRESS":
            out["cancelled"].append(name)
        else:
            out["errors"][name] = err
            restore_order.pop(key, None)
    reorder: dict[TopicPartition, list[int]] = {}
    for key, now in _replicas_after_cancel(admin, restore_order).items():
        want = restore_order[key]
        if now != want and set(now) == set(want):
            reorder[key] = list(want)
    for key, err in admin.alter_partition_reassignments(reorder).items():
        if err is None:
            out["reordered"].append(f"{key[0]}-{key[1]}")
        else:
            log.warning("could not restore the replica order of %s-%s: %s", key[0], key[1], err)


def _cancel_dir_moves(admin: KafkaAdminPort, dir_steps: list[StepMove], out: CancelReport) -> None:
    """Cancel our intra-broker moves: ask for the dir each replica is in now (fills ``out``)."""
    wanted = {(s.topic, s.partition, b): d for s in dir_steps for b, d in s.wanted_dirs().items()}
    rows = admin.describe_log_dirs(sorted({k[2] for k in wanted}), sorted({k[:2] for k in wanted}))
    home = {(r.topic, r.partition, r.broker): r.path for r in rows if not r.is_future}
    # Ours only: a future replica heading to the dir our step asked for.
    back = {k: home[k] for r in rows if r.is_future
            for k in [(r.topic, r.partition, r.broker)] if wanted.get(k) == r.path and k in home}
    for (t, p, b), err in admin.alter_replica_log_dirs(back).items():
        name = f"{t}-{p}@{b}"
        if err is None:
            out["cancelled"].append(name)
        else:
            out["errors"][name] = err


def _replicas_after_cancel(admin: KafkaAdminPort, want: Mapping[TopicPartition, Sequence[int]],
                           timeout: float = 10.0) -> dict[TopicPartition, tuple[int, ...]]:
    """Replicas of cancelled partitions, once Metadata shows the revert (or ``timeout`` passed).

    Real Kafka answers Metadata from a broker's copy of the cluster metadata, a moment behind
    the controller: read at once after a cancel, it may still list the replicas being added,
    and the original order would not be put back.
    """
    deadline = time.monotonic() + timeout
    while want:
        now: dict[TopicPartition, tuple[int, ...]] = {}
        for t in admin.topic_metadata(sorted({k[0] for k in want})):
            now.update({(t.name, p.partition): tuple(p.replicas) for p in t.partitions if (t.name, p.partition) in want})
        if all(set(now.get(k, ())) == set(v) for k, v in want.items()) or time.monotonic() >= deadline:
            return now
        time.sleep(0.2)
    return {}
