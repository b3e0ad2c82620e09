"""Consumer fan-out measured from committed offsets: the bytes consumer groups read per partition.

A broker's network out is what it sends as leader: to its followers and to the consumers. The
admin API reports no consumer traffic, but every consumer group commits its position
(ListGroups, then OffsetFetch per group): read twice, ``seconds`` apart, a group's committed
offset of a partition advances by the records it consumed. At the partition's bytes per offset
(its leader's log size over the offsets the log holds, the conversion the produce-rate sampling
uses, :func:`bytes_per_offset`) that is bytes per second, summed over the groups.

What this cannot see: a group that commits less often than the interval reads nothing here
(its commits fall outside it), a consumer that commits nothing (``assign`` + no commit, or
offsets stored elsewhere) is missed, and a group that rewinds counts 0, not negative. The
snapshot therefore keeps the run parameter ``consumer_fanout`` for partitions it could not
measure (:mod:`kafka_reassign.planning.spark.loads`).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Iterable, Mapping, Protocol, runtime_checkable

from kafka_reassign.cluster.state import ClusterState, TopicPartition
from kafka_reassign.errors import KafkaAdminError

log = logging.getLogger(__name__)

#: Snapshot partition field: bytes per second consumer groups read from the partition, summed.
CONSUMER_BYTES = "consumer_bytes_per_sec"
#: group id -> (topic, partition) -> committed offset
GroupOffsets = Mapping[str, Mapping[TopicPartition, int]]


@runtime_checkable
class GroupReader(Protocol):
    """A live cluster's reads that measure consumption (a snapshot already holds the figure)."""

    def group_offsets(self) -> dict[str, dict[TopicPartition, int]]:
        """Every consumer group's committed offsets (ListGroups, OffsetFetch)."""
        ...

    def list_offsets(self, partitions: Iterable[TopicPartition], latest: bool = True) -> dict[TopicPartition, int]:
        """Log-end (or log-start) offsets; a partition whose leader errs is left out."""
        ...


def bytes_per_offset(size: float, log_start: int, log_end: int) -> float | None:
    """Mean bytes per offset of a log: its size over the offsets it holds (None: it holds none).

    :param size: the leader's log size, bytes
    :param log_start: its first offset
    :param log_end: its next offset
    """
    count = log_end - log_start
    return size / count if count > 0 and size >= 0 else None


def consumer_rates(before: GroupOffsets, after: GroupOffsets, per_offset: Mapping[TopicPartition, float | None],
                   seconds: float) -> dict[TopicPartition, float]:
    """Bytes per second consumer groups read from each partition, summed over the groups.

    A group's offset delta is ``after - before`` (0 when negative: a reset is not reading); a
    group or partition missing from either sample read nothing measurable. Every partition of
    ``per_offset`` gets a figure (0 when no group advanced on it), except one some group read
    from whose bytes per offset is unknown (None): it is left out, not measured.

    :param before: committed offsets at the start of the interval
    :param after: committed offsets at its end
    :param per_offset: (topic, partition) -> bytes per offset (:func:`bytes_per_offset`)
    :param seconds: the interval (> 0)
    """
    read: dict[TopicPartition, int] = {}
    for group, now in after.items():
        then = before.get(group, {})
        for key, offset in now.items():
            if key in then and offset > then[key] >= 0:
                read[key] = read.get(key, 0) + offset - then[key]
    out: dict[TopicPartition, float] = {}
    for key, scale in per_offset.items():
        if not read.get(key):
            out[key] = 0.0
        elif scale is not None:
            out[key] = read[key] * scale / max(seconds, 1e-6)
    return out


@dataclass(frozen=True)
class GroupSample:
    """Committed offsets and when they were read (monotonic seconds, the read's midpoint)."""

    offsets: GroupOffsets
    at: float


def sample_groups(admin: object) -> GroupSample | None:
    """The groups' committed offsets now; None, with one warning, when the cluster cannot answer
    (a reader without group reads, brokers without ListGroups, an error): not measured.

    :param admin: connected admin
    """
    if not isinstance(admin, GroupReader):
        return None
    start = time.monotonic()
    try:
        offsets = admin.group_offsets()
    except KafkaAdminError as exc:
        log.warning("consumer bytes not measured (the planner uses consumer_fanout): %s", exc)
        return None
    return GroupSample(offsets, (start + time.monotonic()) / 2)


def measure_consumption(admin: object, first: GroupSample | None,
                        state: ClusterState) -> dict[TopicPartition, float]:
    """Bytes per second the groups read from each partition of ``state`` since ``first``
    (:func:`consumer_rates`); empty when not measured.

    :param admin: connected admin (a :class:`GroupReader`)
    :param first: the sample at the start of the interval
    :param state: the cluster at its end (the leaders' log sizes)
    """
    second = sample_groups(admin) if first is not None else None
    if first is None or second is None or not isinstance(admin, GroupReader):
        return {}
    read = sorted({k for offsets in second.offsets.values() for k in offsets if state.partition(*k)})
    ends, starts = admin.list_offsets(read), admin.list_offsets(read, latest=False)
    per_offset: dict[TopicPartition, float | None] = {(p.topic, p.partition): None for p in state.partitions()}
    for key in read:
        part = state.partition(*key)
        if part is not None and key in ends and key in starts:
            per_offset[key] = bytes_per_offset(part.size_bytes, starts[key], ends[key])
    return consumer_rates(first.offsets, second.offsets, per_offset, second.at - first.at)


__all__ = ["GroupSample", "sample_groups", "measure_consumption", "CONSUMER_BYTES", "GroupOffsets", "GroupReader",
           "bytes_per_offset", "consumer_rates"]
