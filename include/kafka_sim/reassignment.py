"""Partition reassignment (KIP-455) as the KRaft controller runs it.

Pure replica-list arithmetic first (what the controller writes in its
PartitionChangeRecord), then the mixin that applies it to the model's partitions.
Sources followed (apache/kafka, metadata module):

- ``PartitionReassignmentReplicas(currentAssignment, targetAssignment)``: adding and
  removing are sorted sets (TreeSet) computed against the partition's *current full*
  replica list, and replicas = target + removing. A new target on an ongoing
  reassignment is therefore merged: replicas the first target was adding stay.
- ``ReplicationControlManager.changePartitionReassignment`` hands the PartitionChangeBuilder
  only non-empty adding/removing lists, so re-submitting the target of an ongoing
  reassignment keeps its adding list.
- ``PartitionReassignmentReplicas.maybeCompleteReassignment`` (Kafka 4.3.1's jar): done once
  the ISR minus removing holds every *adding* replica, and, when fewer replicas are added
  than removed, every replica that stays. A replica both adding and removing (a new target
  that drops a replica the first target was adding) can therefore never complete: the
  reassignment waits until cancelled (seen on 4.3.1: [1,2,3] -> [4,2,3] -> [1,2,3] stays
  at replicas [1,2,3,4], adding [4], removing [4] with 4 in the ISR).
- ``PartitionReassignmentRevert``: a cancel keeps replicas - adding and ISR - adding;
  if that ISR is empty the revert is unclean, and
  ``ReplicationControlManager.cancelPartitionReassignment`` refuses it with
  INVALID_REPLICA_ASSIGNMENT unless unclean.leader.election.enable is on for the topic.
"""
from __future__ import annotations

from typing import NamedTuple

from kafka_sim import errors as E
from kafka_sim.model_base import locked
from kafka_sim.state import Partition


class ReassignmentReplicas(NamedTuple):
    """Replica lists of an ongoing reassignment."""

    replicas: list[int]
    adding: list[int]
    removing: list[int]


def merge_target(current: list[int], target: list[int]) -> ReassignmentReplicas:
    """Replicas, adding, removing for ``target`` against the current full replica list.

    :param current: the partition's current replicas (including any being added or removed)
    :param target: the requested target replicas
    """
    removing = sorted(set(current) - set(target))
    adding = sorted(set(target) - set(current))
    return ReassignmentReplicas(list(target) + removing, adding, removing)


def change_reassignment(replicas: list[int], adding: list[int], removing: list[int],
                        target: list[int]) -> ReassignmentReplicas:
    """What changePartitionReassignment writes: the merged lists, except that an empty
    adding or removing list leaves the partition's current one in place (the
    PartitionChangeBuilder starts from the current lists and is only given non-empty ones).

    :param replicas: current full replica list
    :param adding: replicas currently being added
    :param removing: replicas currently being removed
    :param target: the requested target replicas
    """
    merged = merge_target(replicas, target)
    return ReassignmentReplicas(merged.replicas, merged.adding or list(adding), merged.removing or list(removing))


def revert(replicas: list[int], adding: list[int], isr: list[int]) -> tuple[list[int], list[int], bool]:
    """(replicas, isr, unclean) after cancelling: what PartitionReassignmentRevert computes.

    :param replicas: current full replica list
    :param adding: replicas being added
    :param isr: current ISR
    """
    original = [b for b in replicas if b not in adding]
    new_isr = [b for b in isr if b not in adding]
    if new_isr:
        return original, new_isr, False
    return original, original[:1], True


def completed(replicas: list[int], adding: list[int], removing: list[int], isr: list[int]
              ) -> tuple[list[int], list[int]] | None:
    """(replicas, isr) once the reassignment can complete, else None (maybeCompleteReassignment).

    :param replicas: current full replica list
    :param adding: replicas being added
    :param removing: replicas being removed
    :param isr: current ISR
    """
    new_isr = [b for b in isr if b not in removing]
    new_replicas = [b for b in replicas if b not in removing]
    if not new_isr or not new_replicas or not set(adding) <= set(new_isr):
        return None
    # only a reassignment that shrinks the replica count waits for every staying replica
    if len(adding) < len(removing) and not set(new_replicas) <= set(new_isr):
        return None
    return new_replicas, new_isr


class Reassignment:
    """Mixin of ClusterModel: AlterPartitionReassignments and ListPartitionReassignments."""

    @locked
    def list_reassignments(self, topics: list[tuple[str, list[int]]] | None = None
                           ) -> list[tuple[str, int, list[int], list[int], list[int]]]:
        """In-flight reassignments (ListPartitionReassignments).

        :param topics: (topic, partitions) to look at, None for all
        """
        return [(p.topic, p.index, list(p.replicas), list(p.adding), list(p.removing)) for p in self.reassigning(topics)]

    def reassigning(self, topics: list[tuple[str, list[int]]] | None = None) -> list[Partition]:
        """The partitions with a reassignment in flight, by topic and index (the caller holds the lock).

        :param topics: (topic, partitions) to look at, None for all
        """
        if topics is None:
            return [p for _key, p in sorted(self._inflight.items())]
        return [self._inflight[(t, i)] for t, parts in topics for i in parts if (t, i) in self._inflight]

    def _validate_assignment(self, replicas: list[int]) -> str | None:
        if not replicas:
            return "The manual partition assignment includes an empty replica list."
        seen: set[int] = set()
        for b in replicas:
            if b in seen:
                return f"The manual partition assignment includes the broker {b} more than once."
            seen.add(b)
            if b not in self.brokers:
                return f"The manual partition assignment includes broker {b}, but no such broker is registered."
        return None

    @locked
    def alter_reassignments(self, items: list[tuple[str, int, list[int] | None]]
                            ) -> list[tuple[str, int, int, str | None]]:
        """AlterPartitionReassignments: start, change or cancel (None) reassignments.

        :param items: (topic, partition, target replicas or None to cancel)
        :returns: (topic, partition, code, message) per item
        """
        self._run(self.now())
        out = []
        for topic, index, target in items:
            p = self._part(topic, index)
            if p is None:
                out.append((topic, index, E.UNKNOWN_TOPIC_OR_PARTITION,
                            f"Unable to find partition {topic}-{index}."))
                continue
            if target is None:
                if not p.in_flight:
                    out.append((topic, index, E.NO_REASSIGNMENT_IN_PROGRESS,
                                "No partition reassignment is in progress."))
                    continue
                msg = self._cancel(p)
                if msg is not None:
                    out.append((topic, index, E.INVALID_REPLICA_ASSIGNMENT, msg))
                    continue
            else:
                target = [int(b) for b in target]
                msg = self._validate_assignment(target)
                if msg is not None:
                    out.append((topic, index, E.INVALID_REPLICA_ASSIGNMENT, msg))
                    continue
                self._reassign(p, target)
            self.writes["AlterPartitionReassignments"] += 1
            out.append((topic, index, E.NONE, None))
        self._flush_dirty()
        return out

    def _reassign(self, p: Partition, target: list[int]) -> None:
        """ReplicationControlManager.changePartitionReassignment: merge against the current replicas."""
        merged = change_reassignment(p.replicas, p.adding, p.removing, target)
        if merged.replicas == p.replicas and merged.adding == p.adding and merged.removing == p.removing:
            return
        self._rebase(p)
        for b in merged.replicas:
            if b not in p._reps:
                self._add_replica(p, b)
        p.replicas = merged.replicas
        p.adding = merged.adding
        p.removing = merged.removing
        self._track_inflight(p)
        self._touch(p)
        self._maybe_complete(p)

    def _track_inflight(self, p: Partition) -> None:
        key = (p.topic, p.index)
        if p.in_flight:
            self._inflight[key] = p
        else:
            self._inflight.pop(key, None)

    def _maybe_complete(self, p: Partition) -> None:
        """PartitionChangeBuilder.completeReassignmentIfNeeded, then elect if the leader left."""
        if not p.in_flight:
            return
        done = completed(p.replicas, p.adding, p.removing, p.isr)
        if done is None:
            return
        removed = list(p.removing)
        p.replicas, p.isr = done
        p.adding = []
        p.removing = []
        for b in removed:
            self._remove_replica(p, b)
        self._inflight.pop((p.topic, p.index), None)
        if p.leader not in p.replicas or not self.brokers[p.leader].alive:
            self._change_leader(p, self._first_live_isr(p))
        elif removed:
            # triggerLeaderEpochBumpForReplicaReassignmentIfNeeded: replicas left, so they stop fetching
            p.leader_epoch += 1
        self._touch(p)

    def _cancel(self, p: Partition) -> str | None:
        """cancelPartitionReassignment; returns the refusal message, None when reverted."""
        original, isr, unclean = revert(p.replicas, p.adding, p.isr)
        if unclean and not self._unclean_election_enabled(p.topic):
            return (f"Unable to revert partition assignment for {p.topic}:{p.index} because it would "
                    "require an unclean leader election.")
        self._rebase(p)
        for b in list(p.adding):
            self._remove_replica(p, b)
        dropped = bool(p.adding)
        p.replicas = original
        p.adding = []
        p.removing = []
        p.isr = isr
        self._inflight.pop((p.topic, p.index), None)
        if p.leader not in isr or p.leader < 0 or not self.brokers[p.leader].alive:
            # electAnyLeader: the first target replica in the (reverted) ISR that is alive
            self._change_leader(p, self._first_live_isr(p))
        elif dropped:
            p.leader_epoch += 1  # replicas left the assignment
        self._touch(p)
        return None
