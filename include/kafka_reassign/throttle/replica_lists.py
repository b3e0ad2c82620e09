"""Throttled-replica lists that name only the moves in flight.

KIP-73's leader quota counts the bytes the leader sends to every *listed* replica that is
not in sync, so listing every partition of a plan from the start would make the first moves
share the quota with partitions that are not moving yet, and the topic configs would grow
with the plan. The executor instead calls :meth:`ReplicaThrottle.update` once per refill:
the entries of the steps submitted are added, those of the steps that completed are dropped,
in one IncrementalAlterConfigs for every topic touched.

Safety: the run's throttle record holds, per (topic, key), the value before the run first
touched it (``prior``) and that value plus this run's entries now (``value``); it is saved
*before* each write, so a restore after a crash at any point knows exactly what to undo. An
entry a write removes stays in ``value`` until the write has returned (then the record is
saved again without it): a write that fails leaves it on the topic, and the restore must still
take it out. A list left with nothing of ours is dropped from the record, which so names the
topics of the moves in flight, not every topic the run touched. Each update is
relative to the value read now: entries someone else added during the run are kept, and
only entries this run added (in ``value``, not in ``prior``) are ever dropped. A list set to
``*`` (everything throttled) is left alone.
"""
from __future__ import annotations

import logging
from typing import Any, Collection, Iterable

from kafka_reassign.cluster.port import KafkaAdminPort
from kafka_reassign.throttle.record import RecordStore, ThrottleRecord
from kafka_reassign.execution.steps import StepMove
from kafka_reassign.throttle.specs import (FOLLOWER_REPLICAS, LEADER_REPLICAS, ConfigChange,
                                           format_replica_list, our_entries, replica_set)

log = logging.getLogger(__name__)

Entries = set[tuple[int, int]] | frozenset[tuple[int, int]]
#: per list a write changes: (value recorded before it, value once it has landed, our entries it
#: removes). The entries are kept, not parsed back from the two values: parsing every list
#: written twice more was a third of a refill's own list work (20,000 moves, under cProfile).
Landing = tuple[str | None, str | None, Entries]


def _entries(value: str | None) -> Entries:
    """The entries of a list value (none for the wildcard or no value)."""
    parsed = replica_set(value)
    return set() if isinstance(parsed, str) else parsed


def _without(value: str | None, entries: Entries) -> str | None:
    """A list value with ``entries`` taken out (the wildcard stays)."""
    parsed = replica_set(value)
    if isinstance(parsed, str) or not parsed & entries:
        return value
    left = parsed - entries
    return format_replica_list(left) if left else None


def step_entries(step: StepMove) -> tuple[Entries, Entries]:
    """(leader entries, follower entries) a step needs: every replica it copies from, every new one.

    Made at each refill, not kept on the step: kept, every step of a 100,000-move plan would
    hold two sets for the whole run, for a saving too small to measure."""
    adding = step.adding
    if not adding:
        return set(), set()
    return {(step.partition, b) for b in step.current}, {(step.partition, b) for b in adding}


def wanted_entries(steps: Iterable[StepMove], topics: set[str]) -> dict[tuple[str, str], Entries]:
    """(topic, key) -> entries the given in-flight steps need, for ``topics``."""
    # one lookup per step of the topic's two sets, not two of their keys made anew
    both: dict[str, tuple[set[tuple[int, int]], set[tuple[int, int]]]] = {t: (set(), set()) for t in topics}
    for s in steps:
        sets = both.get(s.topic)
        if sets is not None:
            lead, follow = step_entries(s)
            sets[0].update(lead)
            sets[1].update(follow)
    out: dict[tuple[str, str], Entries] = {}
    for t, (lead, follow) in both.items():
        out[(t, LEADER_REPLICAS)], out[(t, FOLLOWER_REPLICAS)] = lead, follow
    return out


class ReplicaThrottle:
    """Keeps the topics' throttled-replica lists equal to what the steps in flight need.

    :param store: where the run's throttle record lives
    :param run_id: the run
    :param cluster_id: recorded with a new record
    """

    def __init__(self, store: RecordStore, run_id: str, cluster_id: str | None = None) -> None:
        self.store = store
        self.run_id = run_id
        self.cluster_id = cluster_id
        self.writes = 0

    def update(self, admin: KafkaAdminPort, in_flight: Collection[StepMove], topics: set[str],
               submitting: dict | None = None) -> list[ConfigChange]:
        """Bring the lists of ``topics`` to what ``in_flight`` needs; return the writes made.

        :param admin: KafkaAdmin (one DescribeConfigs, at most one IncrementalAlterConfigs)
        :param in_flight: every step in flight after this refill (only ``topics`` are looked at)
        :param topics: topics whose steps were submitted or completed since the last update
        :param submitting: partition -> target about to be submitted: noted in the same record
            write (``record.submitted``), before the submission
        """
        if not topics and not submitting:
            return []
        want = wanted_entries(in_flight, topics)
        current = admin.describe_configs(broker_ids=(), topics=sorted(topics),
                                         keys=(LEADER_REPLICAS, FOLLOWER_REPLICAS)) if topics else {}
        record = self.store.get(self.run_id)
        if record is None or record.restored:
            fresh = ThrottleRecord.new(self.run_id, self.cluster_id, [])
            fresh.submitted = record.submitted if record is not None else {}
            record = fresh
        noted = record.add_submitted(submitting, {s.key for s in in_flight}) if submitting else False
        writes, landing = self._list_writes(record, want, current)
        if not writes:
            if noted:
                self.store.put(record)
            return []
        self.store.put(record)  # durable BEFORE the write: a crash after it still restores
        admin.alter_configs(writes)
        self.writes += 1
        if self._landed(record, landing):
            self.store.put(record)  # only now: entries a failed write was removing stay recorded
        return writes

    def _list_writes(self, record: ThrottleRecord, want: dict[tuple[str, str], Entries],
                     current: dict) -> tuple[list[ConfigChange], dict[tuple[str, str], Landing]]:
        """The writes that bring each wanted list to its entries, recorded in ``record`` first.

        :returns: the writes, and per list (what the record holds now, what it may hold once the
            write has landed, our entries the write removes: the difference of the two)
        """
        # The first change of a key holds its value before the run; the last one what we wrote
        # last (a throttle guard may have appended a re-application in between).
        first: dict[tuple[str, str], int] = {}
        last: dict[tuple[str, str], int] = {}
        for i, c in enumerate(record.changes):
            if c.resource_type == "topic":
                first.setdefault((c.name, c.key), i)
                last[(c.name, c.key)] = i
        writes: list[ConfigChange] = []
        landing: dict[tuple[str, str], Landing] = {}
        for (topic, key), needed in sorted(want.items()):
            now = (current.get(("topic", topic)) or {}).get(key)
            at = last.get((topic, key))
            prior = record.changes[first[(topic, key)]].prior if at is not None else now
            before = record.changes[at].value if at is not None else None
            removing = self._removing(now, prior, before, needed)
            new, merged = self._merged(now, prior, needed, removing)
            if new == now:
                continue
            # Recorded: the prior value plus our entries only, so that a restore takes out ours and
            # leaves whatever others added meanwhile (what was written may hold theirs too). Ours
            # that this write removes stay recorded until it has landed: should it fail, a restore
            # still takes them out. A value equal to one at hand is not formatted again.
            known = ((merged, new), (_entries(now), now))
            ours = self._ours(prior, needed | removing, known)
            if at is None:
                record.changes.append(ConfigChange("topic", topic, key, prior, ours))
            else:
                record.changes[at] = ConfigChange("topic", topic, key, record.changes[at].prior, ours)
            landing[(topic, key)] = (ours, self._ours(prior, needed, known) if removing else ours, removing)
            writes.append(ConfigChange("topic", topic, key, now, new))
        return writes, landing

    @staticmethod
    def _landed(record: ThrottleRecord, landing: dict[tuple[str, str], Landing]) -> bool:
        """After a write: drop from the record the entries it removed, and the lists left with
        nothing of ours (the record stays as large as the moves in flight need). Whether it changed."""
        by_list: dict[tuple[str, str], list[int]] = {}
        for i, c in enumerate(record.changes):
            if c.resource_type == "topic" and (c.name, c.key) in landing:
                by_list.setdefault((c.name, c.key), []).append(i)
        drop: set[int] = set()
        for lst, at in by_list.items():
            recorded, landed, gone = landing[lst]
            if recorded == landed:
                continue
            # a list the guard wrote again has earlier changes naming the same entries: gone there too
            for i in at:
                c = record.changes[i]
                value = landed if i == at[-1] else _without(c.value, gone - _entries(c.prior))
                # made directly: dataclasses.replace looks the fields up again for every list landed
                record.changes[i] = ConfigChange(c.resource_type, c.name, c.key, c.prior, value, c.inherited)
            if not our_entries([record.changes[i] for i in at]):
                drop.update(at)
        if drop:  # a list is dropped only once its topic has no move in flight: not at most refills
            record.changes = [c for i, c in enumerate(record.changes) if i not in drop]
        return any(recorded != landed for recorded, landed, _gone in landing.values())

    @staticmethod
    def _removing(now: str | None, prior: str | None, last: str | None, needed: Entries) -> Entries:
        """Our entries in the list now that the write drops."""
        parsed_now, parsed_last = replica_set(now), replica_set(last)
        if isinstance(parsed_now, str) or isinstance(parsed_last, str):
            return set()
        return ((parsed_last - _entries(prior)) - needed) & parsed_now

    @staticmethod
    def _ours(prior: str | None, needed: Entries, known: tuple[tuple[Entries, str | None], ...] = ()) -> str | None:
        """The prior value with ``needed`` added (``known``: (entries, their value) already formatted)."""
        parsed = replica_set(prior)
        if isinstance(parsed, str) or needed <= parsed:  # str: the wildcard
            return prior
        entries = parsed | needed
        for have, value in known:
            if have == entries:
                return value
        return format_replica_list(entries)

    @staticmethod
    def _merged(now: str | None, prior: str | None, needed: Entries, removing: Entries
                ) -> tuple[str | None, Entries]:
        """The list value to write, and its entries: others' entries kept, ours = ``needed``
        (None = delete); ``removing``: ours now in the list that are no longer needed."""
        parsed_now, parsed_prior = replica_set(now), replica_set(prior)
        if isinstance(parsed_now, str):  # the wildcard
            return now, frozenset()  # everything is throttled already; not ours to narrow
        prior_set: Entries = set() if isinstance(parsed_prior, str) else parsed_prior
        merged = (parsed_now - removing) | needed
        if merged == prior_set:
            return prior, merged  # back to exactly what it was (including None = not set)
        if merged == parsed_now:
            return now, merged
        return (format_replica_list(merged) if merged else None), merged
