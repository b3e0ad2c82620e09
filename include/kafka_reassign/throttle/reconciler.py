"""Throttle reconciliation: undo throttles our runs left behind, report everybody else's.

A run sets KIP-73 throttles and records their prior values (:mod:`kafka_reassign.throttle.record`)
before the first write; its teardown restores them. When the worker is killed mid-batch,
or the teardown cannot reach Kafka, the record stays *unrestored*. :func:`reconcile` (run
by the ``kafka_throttle_reconciler`` DAG every 15 minutes) finds those records and writes
the prior values back with the teardown's own restore function, so there is one restore
implementation.

Rules:

1. A record of another cluster is left alone; so is the record of a run still active
   (between two batches nothing is in flight, yet its throttle is in use).
2. A record some of whose submitted moves (``record.submitted``) are still in flight is
   left alone: the run failed without cancelling them (cancel_on_failure off) and the
   throttle is what keeps them from hurting clients. It is restored once they finish.
   Moves nobody of ours submitted do not hold anything back: a restore only removes our
   own entries and values, never theirs.
3. Every other unrestored record is restored with
   :func:`kafka_reassign.throttle.restore.restore_throttle` (what the teardown task runs), newest
   first - an undo stack: when two dead runs touched one key, the oldest prior value is the
   one that ends up set. A resource that cannot be reached (a broker down) stays *pending*
   in the record and is retried on the next reconciliation, until done.
4. Throttle configs still set afterwards are labelled with the run of ours that set them
   (active, moves in flight or restore pending) and otherwise *foreign* (a person or
   another tool). Foreign ones are reported, and only removed when the caller says so;
   the removal is recorded first (a restored record holding the values removed) so it can
   be undone by hand.

Nothing here imports Airflow; the DAG passes the admin client, the record store and the
ids of runs that are still active.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Collection, Mapping

from kafka_reassign.cluster.port import KafkaAdminPort
from kafka_reassign.cluster.state import ClusterState
from kafka_reassign.execution.ownership import ours_among, partition_names
from kafka_reassign.throttle.restore import restore_throttle
from kafka_reassign.throttle.record import RecordStore, ThrottleRecord
from kafka_reassign.throttle.specs import (
    BROKER_KEYS,
    LIST_KEYS,
    TOPIC_KEYS,
    ConfigChange,
    CurrentConfigs,
    parse_replica_list,
    restore_changes,
)

log = logging.getLogger(__name__)

THROTTLE_KEYS = (*BROKER_KEYS, *TOPIC_KEYS)

ConfigKey = tuple[str, str]


@dataclass(frozen=True)
class ThrottleSetting:
    """One throttle config currently set on the cluster.

    :param resource_type: "broker" or "topic"
    :param name: broker id as a string, or topic name
    :param key: the throttle config key
    :param value: its current value
    :param owner: run id of the run of ours that set it (active, or dead with its restore
        pending or its moves still in flight), None when foreign
    """

    resource_type: str
    name: str
    key: str
    value: str
    owner: str | None = None

    def describe(self) -> str:
        who = f"set by run {self.owner} of this project" if self.owner else "not set by this project"
        return f"{self.resource_type} {self.name}: {self.key}={self.value!r} ({who})"

    def to_json(self) -> dict[str, Any]:
        return {"resource_type": self.resource_type, "name": self.name, "key": self.key,
                "value": self.value, "owner": self.owner}


@dataclass
class RunRestore:
    """What the reconciler did (or would do, in a dry run) for one unrestored record.

    :param run_id: the run that left the throttle
    :param changes: writes that bring the configs back to their prior values
    :param warnings: values someone else changed while the run held them
    :param dropped: changes that no longer apply (their topic was deleted)
    :param pending: resources still not restored ("broker 5" -> why); retried on the next run
    """

    run_id: str
    changes: list[ConfigChange] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    dropped: list[ConfigChange] = field(default_factory=list)
    pending: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "changes": [c.to_json() for c in self.changes],
                "warnings": list(self.warnings), "dropped": [c.to_json() for c in self.dropped],
                "pending": dict(self.pending)}


@dataclass
class ReconcileReport:
    """Outcome of one reconciliation.

    :param skipped_reason: set when nothing was examined (a reassignment is in flight)
    :param restored: records restored (or to restore, in a dry run)
    :param left_alone: (run_id, reason) of unrestored records not touched
    :param foreign: throttle settings not owned by this project's active runs
    :param in_use: throttle settings owned by runs of ours still holding them (active, moves
        in flight, or restore pending)
    :param foreign_removed: writes that removed foreign throttles (only when asked)
    """

    cluster_id: str | None = None
    dry_run: bool = False
    skipped_reason: str | None = None
    restored: list[RunRestore] = field(default_factory=list)
    left_alone: list[tuple[str, str]] = field(default_factory=list)
    foreign: list[ThrottleSetting] = field(default_factory=list)
    in_use: list[ThrottleSetting] = field(default_factory=list)
    foreign_removed: list[ConfigChange] = field(default_factory=list)

    @property
    def writes(self) -> int:
        """Config writes made (0 in a dry run)."""
        if self.dry_run:
            return 0
        return sum(len(r.changes) for r in self.restored) + len(self.foreign_removed)

    def summary(self) -> str:
        """Human-readable report for the task log."""
        verb = "would restore" if self.dry_run else "restored"
        if self.skipped_reason:
            return f"reconciler skipped: {self.skipped_reason}"
        lines = [f"cluster {self.cluster_id}: {verb} {len(self.restored)} run(s), "
                 f"{len(self.foreign)} foreign throttle setting(s), {len(self.in_use)} in use by active runs"]
        for r in self.restored:
            lines.append(f"  {verb} throttles of run {r.run_id}:")
            lines += [f"    {c.describe()}" for c in r.changes] or ["    (already at prior values)"]
            lines += [f"    warning: {w}" for w in r.warnings]
            lines += [f"    dropped (topic gone): {c.describe()}" for c in r.dropped]
            lines += [f"    PENDING {res}: {why} (retried on the next reconciliation)" for res, why in
                      sorted(r.pending.items())]
        for run_id, reason in self.left_alone:
            lines.append(f"  left alone: run {run_id}: {reason}")
        for s in self.foreign:
            lines.append(f"  foreign: {s.describe()}")
        for c in self.foreign_removed:
            lines.append(f"  {'would remove' if self.dry_run else 'removed'} foreign: {c.describe()}")
        for s in self.in_use:
            lines.append(f"  in use: {s.describe()}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"cluster_id": self.cluster_id, "dry_run": self.dry_run, "skipped_reason": self.skipped_reason,
                "restored": [r.to_json() for r in self.restored],
                "left_alone": [{"run_id": r, "reason": why} for r, why in self.left_alone],
                "foreign": [s.to_json() for s in self.foreign], "in_use": [s.to_json() for s in self.in_use],
                "foreign_removed": [c.to_json() for c in self.foreign_removed], "writes": self.writes}


def throttle_settings(configs: CurrentConfigs) -> list[tuple[str, str, str, str]]:
    """Every throttle key with a value in ``configs``: (resource_type, name, key, value), sorted.

    :param configs: (resource_type, name) -> {key: dynamic value or None}
    """
    out = []
    for (rtype, name), values in configs.items():
        keys = BROKER_KEYS if rtype == "broker" else TOPIC_KEYS if rtype == "topic" else ()
        for key in keys:
            value = values.get(key)
            if value is not None and value != "":
                out.append((rtype, name, key, value))
    return sorted(out, key=lambda s: (s[0], _natural(s[1]), s[2]))


def _natural(name: str) -> tuple[int, Any]:
    return (0, int(name)) if name.isdigit() else (1, name)


def _apply(configs: dict[ConfigKey, dict[str, str | None]], changes: list[ConfigChange]) -> None:
    """Update an in-memory copy of the configs as if ``changes`` had been written."""
    for c in changes:
        configs.setdefault((c.resource_type, c.name), {})[c.key] = c.value


def _owned_by(setting: tuple[str, str, str, str], active: list[ThrottleRecord]) -> str | None:
    """Run id of the record (of a run still holding its throttle) that wrote this value or these entries."""
    rtype, name, key, value = setting
    for rec in active:
        for c in rec.changes:
            if (c.resource_type, c.name, c.key) != (rtype, name, key) or c.value is None:
                continue
            if c.value == value:
                return rec.run_id
            if key in LIST_KEYS:
                ours, now = parse_replica_list(c.value), parse_replica_list(value)
                if isinstance(ours, set) and isinstance(now, set) and ours and ours <= now:
                    return rec.run_id
    return None


def _dead_record_changes(rec: ThrottleRecord, state: ClusterState, rr: RunRestore) -> list[ConfigChange]:
    """The record's changes that still apply; the others (topic deleted, broker gone) go to ``rr.dropped``."""
    applicable: list[ConfigChange] = []
    for c in rec.changes:
        if c.resource_type == "topic" and c.name not in state.topics:
            rr.dropped.append(c)   # a topic's configs are deleted with the topic
        elif c.resource_type == "broker" and int(c.name) not in state.brokers:
            rr.dropped.append(c)   # a decommissioned broker: nothing left to restore
        else:
            applicable.append(c)
    return applicable


def _restore_record(admin: KafkaAdminPort, store: RecordStore, rec: ThrottleRecord, state: ClusterState,
                    configs: dict[ConfigKey, dict[str, str | None]], dry_run: bool) -> RunRestore:
    """Restore one dead run's record (what is reachable); the rest stays pending in the record."""
    rr = RunRestore(run_id=rec.run_id)
    applicable = _dead_record_changes(rec, state, rr)
    if dry_run:
        rr.changes = restore_changes(applicable, configs, rr.warnings)
        return rr
    if rr.dropped:
        # Keep the record truthful before restoring the rest from it.
        rec.changes = applicable
        rec.notes.append("reconciler dropped changes whose resource no longer exists: "
                         + "; ".join(c.describe() for c in rr.dropped))
        store.put(rec)
    # The same restore the teardown task runs (per resource: read, write, read back).
    result = restore_throttle(admin, store, rec.run_id, attempts=1)
    rr.changes, rr.warnings, rr.pending = list(result.changes), list(result.warnings), dict(result.pending)
    return rr


def reconcile(admin: KafkaAdminPort, store: RecordStore, *, active_run_ids: Collection[str] = (),
              remove_foreign: bool = False, dry_run: bool = False,
              reconciler_run_id: str | None = None) -> ReconcileReport:
    """Restore throttles left by dead runs; report (and optionally remove) foreign ones.

    :param admin: a :class:`kafka_reassign.cluster.admin.KafkaAdmin` (cluster_state, read_configs,
        alter_configs, list_partition_reassignments)
    :param store: the durable throttle records
    :param active_run_ids: run ids still queued or running (their throttles are in use)
    :param remove_foreign: also delete throttles this project did not set
    :param dry_run: compute and report, write nothing
    :param reconciler_run_id: id under which a foreign removal is recorded
    """
    report = ReconcileReport(dry_run=dry_run)
    # Log-dir sizes are not needed here and cost one request per broker on big clusters.
    state = admin.cluster_state(include_log_dirs=False)
    report.cluster_id = state.cluster_id
    read = admin.read_configs(sorted(state.alive_brokers), sorted(state.topics), keys=THROTTLE_KEYS)
    configs: dict[ConfigKey, dict[str, str | None]] = {k: dict(v) for k, v in read.values.items()}
    kept, to_restore = _sort_records(store.list_unrestored(), state, set(active_run_ids), report)
    # Newest first: undoing in reverse order of application leaves the oldest prior value.
    for rec in sorted(to_restore, key=lambda r: r.created_at, reverse=True):
        rr = _restore_record(admin, store, rec, state, configs, dry_run)
        _apply(configs, rr.changes)
        report.restored.append(rr)
        if rr.pending:
            kept.append(rec)
        log.info("%s throttles of run %s (%d writes, %d pending)", "would restore" if dry_run else "restored",
                 rec.run_id, len(rr.changes), len(rr.pending))
    for setting in throttle_settings(configs):
        owner = _owned_by(setting, kept)
        item = ThrottleSetting(*setting, owner=owner)
        (report.in_use if owner else report.foreign).append(item)
    if remove_foreign and report.foreign:
        _remove_foreign(admin, store, report, state.cluster_id, reconciler_run_id)
    return report


def _sort_records(unrestored: list[ThrottleRecord], state: ClusterState, active_ids: set[str],
                  report: ReconcileReport) -> tuple[list[ThrottleRecord], list[ThrottleRecord]]:
    """(records whose throttle is still in use, records to restore); the reasons go to ``report``."""
    kept: list[ThrottleRecord] = []
    to_restore: list[ThrottleRecord] = []
    for rec in unrestored:
        moving = sorted(partition_names(ours_among(state.in_flight, rec.submitted)))
        if rec.cluster_id and state.cluster_id and rec.cluster_id != state.cluster_id:
            report.left_alone.append((rec.run_id, f"belongs to cluster {rec.cluster_id}"))
        elif rec.run_id in active_ids:
            kept.append(rec)
            report.left_alone.append((rec.run_id, "run still active; its throttle is in use"))
        elif moving:
            # A failed run whose moves go on (cancel_on_failure off): the throttle protects them.
            kept.append(rec)
            report.left_alone.append((rec.run_id, f"{len(moving)} of its moves still in flight "
                                                  f"({', '.join(moving[:5])}); restored once they finish"))
        else:
            to_restore.append(rec)
    return kept, to_restore


def _remove_foreign(admin: KafkaAdminPort, store: RecordStore, report: ReconcileReport, cluster_id: str | None,
                    reconciler_run_id: str | None) -> None:
    """Remove the throttles nobody of ours set (recorded first, so a person can put them back)."""
    removal = [ConfigChange(s.resource_type, s.name, s.key, s.value, None) for s in report.foreign]
    report.foreign_removed = removal
    if report.dry_run:
        return
    rec = ThrottleRecord.new(reconciler_run_id or f"reconciler-{int(time.time())}", cluster_id, removal)
    rec.restored, rec.restored_at = True, time.time()
    rec.notes.append("foreign throttles removed by kafka_throttle_reconciler (remove_foreign=True); "
                     "each change's prior is the value removed")
    store.put(rec)
    admin.alter_configs(removal)
    _verify(admin, removal)


def _verify(admin: KafkaAdminPort, changes: list[ConfigChange]) -> None:
    """Read the configs back; raise if a write did not take (the record stays unrestored)."""
    brokers = sorted({int(c.name) for c in changes if c.resource_type == "broker"})
    topics = sorted({c.name for c in changes if c.resource_type == "topic"})
    now: Mapping[ConfigKey, Mapping[str, str | None]] = admin.describe_configs(brokers, topics, keys=THROTTLE_KEYS)
    wrong = [c for c in changes if (now.get((c.resource_type, c.name)) or {}).get(c.key) != c.value]
    if wrong:
        raise RuntimeError("config writes did not take effect: " + "; ".join(
            f"{c.resource_type} {c.name} {c.key} is {(now.get((c.resource_type, c.name)) or {}).get(c.key)!r}, "
            f"expected {c.value!r}" for c in wrong))
