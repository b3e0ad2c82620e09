"""Set a run's throttle rates: record the prior values durably, then write. Idempotent.

A second call for the same run reuses the recorded prior values (never records our own
values as "prior") and writes only what is missing. Unrestored records of earlier runs on
the same cluster (a run killed before its cleanup) are adopted: their prior values become
ours, so restoring this run also cleans up what they left.
"""
from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Iterable, Mapping, Protocol

from kafka_reassign.throttle.record import RecordStore, ThrottleRecord
from kafka_reassign.throttle.specs import (BROKER_KEYS, FOLLOWER_RATE, LEADER_RATE, TOPIC_KEYS, ConfigChange,
                                           InheritedConfigs, ThrottleSpec, throttle_changes)

if TYPE_CHECKING:
    from kafka_reassign.cluster.port import ClusterReader, KafkaAdminPort

log = logging.getLogger(__name__)

#: (resource type, name) -> config key -> value
ConfigValues = dict[tuple[str, str], dict[str, str | None]]
#: (broker ids, topic names)
Resources = tuple[list[int], list[str]]


class ThrottledRun(Protocol):
    """What setting the throttle needs of a prepared run (:class:`kafka_reassign.run.prepare.PreparedRun`)."""

    throttle_spec: ThrottleSpec
    cluster_id: str | None


def read_throttle_configs(admin: ClusterReader, spec_or_resources: ThrottleSpec | Resources
                          ) -> tuple[ConfigValues, InheritedConfigs]:
    """(per-resource throttle values, broker values inherited from the cluster default or static config)."""
    brokers, topics = spec_or_resources.resources() if isinstance(spec_or_resources, ThrottleSpec) \
        else spec_or_resources
    out: ConfigValues = {}
    inherited: InheritedConfigs = {}
    if brokers:
        read = admin.describe_sourced(broker_ids=brokers, topics=(), keys=BROKER_KEYS)
        out.update(read.values)
        inherited = read.inherited
    if topics:
        out.update(admin.describe_configs(broker_ids=(), topics=topics, keys=TOPIC_KEYS))
    return out, inherited


def apply_throttle(admin: KafkaAdminPort, prepared: ThrottledRun, store: RecordStore, run_id: str, *,
                   adopt_stale_records: bool = True) -> ThrottleRecord:
    """Record the prior values durably, then write the throttle. Idempotent (see the module).

    :param admin: KafkaAdmin
    :param prepared: from :func:`kafka_reassign.run.prepare.prepare`
    :param store: durable record store
    :param run_id: this run
    :param adopt_stale_records: take over unrestored records of other runs on this cluster
    :returns: the record (also in ``store``)
    """
    spec = prepared.throttle_spec
    record = store.get(run_id)
    if record is not None and record.restored:
        log.info("throttle record of %s was restored before; applying the throttle again", run_id)
        record = None
    if record is not None:
        current = _extend_record(admin, store, record, spec)
    else:
        adopted = _stale_records(store, run_id, prepared.cluster_id) if adopt_stale_records else []
        record, current = _new_record(admin, store, run_id, prepared.cluster_id, spec, adopted)
    _write_missing(admin, record, current, run_id)
    return record


def _resources(records: Iterable[ThrottleRecord], spec: ThrottleSpec) -> Resources:
    """The spec's brokers and topics and those the records changed."""
    records = list(records)
    brokers, topics = spec.resources()
    return (sorted(set(brokers) | {int(c.name) for r in records for c in r.changes if c.resource_type == "broker"}),
            sorted(set(topics) | {c.name for r in records for c in r.changes if c.resource_type == "topic"}))


def _extend_record(admin: ClusterReader, store: RecordStore, record: ThrottleRecord, spec: ThrottleSpec) -> ConfigValues:
    """Add what the spec needs beyond the run's record (not expected, but never lose a prior value)."""
    current, inherited = read_throttle_configs(admin, _resources([record], spec))
    recorded = {(c.resource_type, c.name, c.key) for c in record.changes}
    extra = [c for c in throttle_changes(spec, current, inherited=inherited)
             if (c.resource_type, c.name, c.key) not in recorded]
    if extra:
        record.changes.extend(extra)
        store.put(record)
    return current


def _stale_records(store: RecordStore, run_id: str, cluster_id: str | None) -> list[ThrottleRecord]:
    """Unrestored records of other runs on this cluster (runs killed before their cleanup)."""
    return [r for r in store.list_unrestored() if r.run_id != run_id and (
        r.cluster_id is None or cluster_id is None or r.cluster_id == cluster_id)]


def _new_record(admin: ClusterReader, store: RecordStore, run_id: str, cluster_id: str | None, spec: ThrottleSpec,
                adopted: list[ThrottleRecord]) -> tuple[ThrottleRecord, ConfigValues]:
    """The run's first record (stored before any write), taking over the ``adopted`` ones."""
    current, inherited = read_throttle_configs(admin, _resources(adopted, spec))
    record = ThrottleRecord.new(run_id, cluster_id, _changes_over_stale(spec, current, inherited, adopted))
    if adopted:
        record.notes.append("adopted unrestored throttle records of " + ", ".join(r.run_id for r in adopted))
    store.put(record)  # durable BEFORE the first write
    for r in adopted:
        r.notes.append(f"superseded by run {run_id}, which will restore these values")
        r.restored = True
        r.restored_at = time.time()
        store.put(r)
    return record, current


def _changes_over_stale(spec: ThrottleSpec, current: ConfigValues, inherited: InheritedConfigs,
                        adopted: list[ThrottleRecord]) -> list[ConfigChange]:
    """The spec's changes, with prior values as they were before the stale runs' writes still in place."""
    base: dict[tuple[str, str, str], str | None] = {}
    for r in adopted:  # oldest first: the oldest prior is the real original value
        for c in r.changes:
            if (current.get((c.resource_type, c.name)) or {}).get(c.key) == c.value:
                base.setdefault((c.resource_type, c.name, c.key), c.prior)
    virtual = {res: dict(vals) for res, vals in current.items()}
    for (rt, name, key), prior in base.items():
        virtual.setdefault((rt, name), {})[key] = prior
    changes = throttle_changes(spec, virtual, inherited=inherited)
    touched = {(c.resource_type, c.name, c.key) for c in changes}
    for (rt, name, key), prior in base.items():
        if (rt, name, key) not in touched:
            # Left by a stale run and not needed by us: restore it with ours.
            changes.append(ConfigChange(rt, name, key, prior, (current.get((rt, name)) or {}).get(key)))
    return changes


def _write_missing(admin: KafkaAdminPort, record: ThrottleRecord, current: ConfigValues, run_id: str) -> None:
    """Write the record's values the cluster does not have yet."""
    to_write = [c for c in record.changes
                if c.value is not None and (current.get((c.resource_type, c.name)) or {}).get(c.key) != c.value]
    if to_write:
        log.info("run %s: writing %d throttle config(s)", run_id, len(to_write))
        for c in to_write:
            log.info("  %s", c.describe())
        admin.alter_configs(to_write)


def set_broker_rates(admin: KafkaAdminPort, store: RecordStore, run_id: str, rates: Mapping[int, int]
                     ) -> list[ConfigChange]:
    """Change the run's leader and follower rates on some brokers (the adaptive throttle).

    Only brokers whose rates the run's record holds are changed (a lower rate of someone else's
    that the run kept stays theirs). The record's last change of each key takes the new value and
    keeps its prior, so the restore still puts back what was there before the run, and the guard
    defends the new value; the record is saved before the write.

    :param rates: broker -> new bytes/s
    :returns: the writes made
    """
    record = store.get(run_id)
    if record is None or record.restored or not rates:
        return []
    last: dict[tuple[str, str], int] = {}
    for i, c in enumerate(record.changes):
        if c.resource_type == "broker" and c.key in (LEADER_RATE, FOLLOWER_RATE):
            last[(c.name, c.key)] = i
    writes: list[ConfigChange] = []
    for b, rate in sorted(rates.items()):
        for key in (LEADER_RATE, FOLLOWER_RATE):
            at = last.get((str(b), key))
            if at is None or record.changes[at].value == str(rate):
                continue
            old = record.changes[at]
            record.changes[at] = replace(old, value=str(rate))
            writes.append(ConfigChange("broker", str(b), key, old.value, str(rate)))
    if writes:
        store.put(record)  # durable BEFORE the write
        admin.alter_configs(writes)
    return writes
