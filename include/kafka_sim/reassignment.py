"""Partition reassignment (KIP-455) as the KRaft controller runs it.
"""
from __future__ import annotations

from kafka_sim import errors as E
from kafka_sim.state import _locked
from kafka_sim.state import Partition



class Reassignment:
    """Mixin of ClusterModel: AlterPartitionReassignments and ListPartitionReassignments."""

    @_locked
    def list_reassignments(self, topics: list[tuple[str, list[int]]] | None = None
                           ) -> list[tuple[str, int, list[int], list[int], list[int]]]:
        """In-flight reassignments (ListPartitionReassignments).

        :param topics: (topic, partitions) to look at, None for all
        """
        if topics is None:
            items = sorted(self._inflight.items())
        else:
            items = [((t, i), self._inflight[(t, i)]) for t, parts in topics for i in parts
                     if (t, i) in self._inflight]
        return [(t, i, list(p.replicas), list(p.adding), list(p.removing)) for (t, i), p in items]


    # ------------------------------------------------------------ reassignment (KIP-455)
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

    @_locked
    def alter_reassignments(self, items: list[tuple[str, int, list[int] | None]]
                            ) -> list[tuple[str, int, int, str | None]]:
        """AlterPartitionReassignments: start, change or cancel (None) reassignments.

        During a move the replica set is target + original replicas not in target; a new
        target is relative to the original replicas; the move completes once every target
        replica is in the ISR.

        :param items: (topic, partition, target replicas or None to cancel)
        :returns: (topic, partition, code, message) per item
        """
        self._run(self.now())
        out = []
        cache: dict[int, dict[str, float]] = {}
        for topic, index, target in items:
            p = self._part(topic, index)
            if p is None:
                out.append((topic, index, E.UNKNOWN_TOPIC_OR_PARTITION,
                            f"Unable to find partition {topic}-{index}."))
                continue
            if target is None:
                if not p.in_flight:
                    out.append((topic, index, E.NO_REASSIGNMENT_IN_PROGRESS,
                                f"No ongoing reassignment for partition {topic}-{index}."))
                    continue
                self._cancel(p)
            else:
                target = [int(b) for b in target]
                msg = self._validate_assignment(target)
                if msg is not None:
                    out.append((topic, index, E.INVALID_REPLICA_ASSIGNMENT, msg))
                    continue
                self._reassign(p, target, cache)
            self.writes["AlterPartitionReassignments"] += 1
            out.append((topic, index, E.NONE, None))
        self._flush_dirty()
        return out

    def _reassign(self, p: Partition, target: list[int], cache: dict[int, dict[str, float]]) -> None:
        original = p.original_replicas()
        adding = [b for b in target if b not in original]
        removing = [b for b in original if b not in target]
        merged = target + removing
        dropped = [b for b in p.replicas if b not in merged]  # added by an earlier target, now unwanted
        if merged == p.replicas and adding == p.adding and removing == p.removing:
            return
        self._rebase(p)
        for b in dropped:
            self._remove_replica(p, b)
        for b in merged:
            if b not in p._reps:
                self._add_replica(p, b, cache)
        p.replicas = merged
        p.adding = adding
        p.removing = removing
        p.isr = [b for b in p.isr if b in merged]
        key = (p.topic, p.index)
        if p.in_flight:
            self._inflight[key] = p
        else:
            self._inflight.pop(key, None)
        if p.leader not in merged:
            self._change_leader(p, self._first_live_isr(p))
        self._touch(p)
        self._maybe_complete(p)

    def _maybe_complete(self, p: Partition) -> None:
        """Finish a reassignment once every target replica is in the ISR (controller behaviour)."""
        if not p.in_flight:
            return
        target = p.target_replicas()
        if not all(b in p.isr for b in target):
            return
        removed = list(p.removing)
        p.replicas = target
        p.adding = []
        p.removing = []
        p.isr = [b for b in p.isr if b in target]
        for b in removed:
            self._remove_replica(p, b)
        self._inflight.pop((p.topic, p.index), None)
        if p.leader not in target or not self.brokers[p.leader].alive:
            self._change_leader(p, self._first_live_isr(p, target))
        elif removed:
            p.leader_epoch += 1  # KRaft bumps the epoch when replicas leave so they stop fetching
        self._touch(p)

    def _cancel(self, p: Partition) -> None:
        """Revert to the original replicas; replicas being added are dropped with their data."""
        original = p.original_replicas()
        isr = [b for b in p.isr if b not in p.adding]
        if not isr:
            # Kafka's PartitionReassignmentRevert: keep the partition usable (unclean)
            isr = [original[0]]
        self._rebase(p)
        dropped = bool(p.adding)
        for b in list(p.adding):
            self._remove_replica(p, b)
        p.replicas = original
        p.adding = []
        p.removing = []
        p.isr = isr
        self._inflight.pop((p.topic, p.index), None)
        if p.leader not in original or p.leader < 0:
            self._change_leader(p, self._first_live_isr(p))
        elif dropped:
            p.leader_epoch += 1  # replicas left the assignment
        self._touch(p)

