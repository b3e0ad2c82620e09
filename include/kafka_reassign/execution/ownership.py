"""Which reassignments in flight on the cluster are ours: the one rule, and the one reader of it.

A move in flight is this project's only when a durable throttle record
(:class:`~kafka_reassign.throttle.record.ThrottleRecord`, ``submitted``: written *before*
each submission) lists the replica list we submitted, and the cluster's in-flight target
still equals it. A move that merely goes where our plan goes may be another tool's:
adopting it would throttle it, and cancelling it would revert someone else's work.

Asked by validation (refuse a plan touching someone else's move), the cancel of a run's
moves (CLI, Airflow cancel task, a run's failure path), the restore (keep the throttle under
our moves still going) and the reconciler (leave a dead run's throttle while its moves go on).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from kafka_reassign.cluster.state import InFlight, TopicPartition

if TYPE_CHECKING:
    from kafka_reassign.cluster.port import KafkaAdminPort
    from kafka_reassign.throttle.record import RecordStore

#: (topic, partition) -> the replica lists our records say were submitted for it
SubmittedTargets = Mapping[TopicPartition, Sequence[Sequence[int]]]


def is_ours(key: TopicPartition, inflight: InFlight, submitted: SubmittedTargets | None) -> bool:
    """Whether the in-flight reassignment of ``key`` goes to a target our records say we submitted.

    :param key: the partition
    :param inflight: its reassignment in flight (ListPartitionReassignments)
    :param submitted: what our records list, e.g. :func:`kafka_reassign.throttle.record.submitted_targets`
    """
    target = tuple(inflight.target)
    return any(tuple(t) == target for t in (submitted or {}).get(key, ()))


def ours_among(in_flight: Mapping[TopicPartition, InFlight], submitted: SubmittedTargets | None
               ) -> dict[TopicPartition, InFlight]:
    """The reassignments of ``in_flight`` that are ours (see :func:`is_ours`), in partition order."""
    return {key: inf for key, inf in sorted(in_flight.items()) if is_ours(key, inf, submitted)}


def own_moves_in_flight(admin: KafkaAdminPort, submitted: SubmittedTargets | None) -> dict[TopicPartition, InFlight]:
    """Our reassignments still in flight on the cluster (one ListPartitionReassignments).

    :param admin: KafkaAdmin
    :param submitted: what our records list (a run's: :func:`run_submitted`)
    """
    if not submitted:
        return {}
    return ours_among(admin.list_partition_reassignments(sorted(submitted)), submitted)


def run_submitted(store: RecordStore, run_id: str) -> dict[TopicPartition, list[tuple[int, ...]]]:
    """What the durable record of ``run_id`` says it submitted (empty when it has no record)."""
    record = store.get(run_id)
    return {key: list(targets) for key, targets in record.submitted.items()} if record is not None else {}


def partition_names(keys: Iterable[TopicPartition]) -> list[str]:
    """``topic-partition`` names, for messages."""
    return [f"{t}-{p}" for t, p in keys]
