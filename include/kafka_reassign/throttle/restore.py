"""Undo a run's throttle, broker by broker and topic by topic, and say exactly what is left.

One unreachable broker must not keep the throttle on every other one: each resource (a
broker's configs, a topic's configs) is read, restored and read back on its own. What could
not be restored is kept in the run's record as *pending* (``record.pending``), the record
stays unrestored, and :meth:`RestoreResult.message` names what is left and how to finish:
``kafka-reassign restore --run-id ...`` or the ``kafka_throttle_reconciler`` DAG, which
retries pending restores until they are done.

Restores are relative (:func:`kafka_reassign.throttle.restore_changes`): only the run's own
entries and values are undone; a value someone else set during the run is kept.

With ``keep_while_moving`` (:func:`restore_after_run`, the end of a run), nothing is undone
while a move of the run (:mod:`kafka_reassign.execution.ownership`) is still in flight: the
throttle is what keeps that move from hurting clients. The record stays pending and the
reconciler restores it once the moves are done.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from kafka_reassign.cluster.port import KafkaAdminPort
from kafka_reassign.execution.ownership import own_moves_in_flight, partition_names
from kafka_reassign.throttle.record import CORDON_RECORD_PREFIX, RecordStore, ThrottleRecord
from kafka_reassign.throttle.specs import BROKER_KEYS, TOPIC_KEYS, ConfigChange, restore_changes

log = logging.getLogger(__name__)

ConfigKey = tuple[str, str]
RECONCILER_DAG = "kafka_throttle_reconciler"
MOVES_PENDING = "moves in flight"
#: How long a restore re-reads a value that does not read back yet (metadata propagation).
READ_BACK_SECONDS = 5.0


def finish_hint(run_id: str) -> str:
    """How an operator finishes a pending restore of ``run_id``."""
    return (f"it is retried by the {RECONCILER_DAG} DAG (every 15 minutes, or trigger it now), or run "
            f"`kafka-reassign restore --run-id {run_id}` with the run's record directory")


def restored_subject(record_id: str) -> tuple[str, str]:
    """Who a record belongs to and what restoring it puts back, for logs: cordons share this
    restore path, and "throttle restored" would misname an uncordon.

    :param record_id: a run id, or a cordon record id (``cordon-broker-<id>[@<run id>]``)
    """
    if record_id.startswith(CORDON_RECORD_PREFIX):
        return record_id, "cordon"
    return f"run {record_id}", "throttle"


@dataclass
class RestoreResult:
    """What :func:`restore_throttle` did.

    :param changes: config writes made
    :param warnings: values someone else changed during the run (kept), and other notes
    :param pending: resources left as they are, "broker 5" -> why
    :param already_restored: the record was restored before: nothing done
    :param no_record: the run wrote nothing
    """

    run_id: str
    changes: list[ConfigChange] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    pending: dict[str, str] = field(default_factory=dict)
    already_restored: bool = False
    no_record: bool = False

    @property
    def done(self) -> bool:
        return not self.pending

    def message(self) -> str:
        """One paragraph for logs and failure messages: what is left and what to do next."""
        who, what = restored_subject(self.run_id)
        if self.done:
            return f"{who}: {what} restored ({len(self.changes)} config write(s))"
        left = "; ".join(f"{res}: {why}" for res, why in sorted(self.pending.items()))
        return (f"{who}: {what} NOT fully restored ({len(self.changes)} config write(s) made). "
                f"Left: {left}. The record keeps them pending: {finish_hint(self.run_id)}.")

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "changes": [c.to_json() for c in self.changes],
                "warnings": list(self.warnings), "pending": dict(self.pending),
                "already_restored": self.already_restored, "no_record": self.no_record}


def _label(res: ConfigKey) -> str:
    return f"{res[0]} {res[1]}"


def _keys(changes: list[ConfigChange]) -> list[str]:
    """The throttle keys, and any other key a record changed (a cordon's ``cordoned.log.dirs``)."""
    return [*BROKER_KEYS, *TOPIC_KEYS, *sorted({c.key for c in changes} - {*BROKER_KEYS, *TOPIC_KEYS})]


def _read_back(admin: KafkaAdminPort, written: list[ConfigChange], sleep: Callable[[float], None]) -> dict[ConfigKey, str]:
    """Resources whose written values do not read back: unreachable ones at once, stale ones
    after :data:`READ_BACK_SECONDS` of re-reading.

    A broker answers DescribeConfigs from its own copy of the cluster metadata, which catches
    up with a write the controller has committed a moment later (real Kafka, KRaft): read at
    once, a broker config written a millisecond ago may still show the value before.
    """
    deadline = time.monotonic() + READ_BACK_SECONDS
    todo = list(written)
    while todo:
        check = admin.read_configs(sorted({int(c.name) for c in todo if c.resource_type == "broker"}),
                                   sorted({c.name for c in todo if c.resource_type == "topic"}),
                                   keys=_keys(todo))
        failed: dict[ConfigKey, str] = {}
        for c in todo:
            now = (check.values.get(c.resource) or {}).get(c.key)
            if c.resource in check.unreachable:
                failed[c.resource] = f"unreachable after the write ({check.unreachable[c.resource]})"
            elif now != c.value:
                failed[c.resource] = f"{c.key} is {now!r} after writing {c.value!r}"
        stale = {res for res, why in failed.items() if not why.startswith("unreachable")}
        if not stale or time.monotonic() >= deadline:
            return failed
        todo = [c for c in todo if c.resource in stale]
        sleep(0.2)
    return {}


def _settled_read(admin: KafkaAdminPort, changes: list[ConfigChange], sleep: Callable[[float], None]) -> Any:
    """The values now of the resources ``changes`` touch, re-read while one still differs from
    the last value the run wrote, for up to :data:`READ_BACK_SECONDS`.

    A write of ours shortly before (the guard putting back a throttle someone deleted, just as
    the run ends) may not show on the broker yet (see :func:`_read_back`). Taken at once, its
    stale value would read as "someone else changed it": nothing would be restored, and our
    write would land afterwards and stay. A value that still differs after the wait is theirs.
    """
    last = {(c.resource_type, c.name, c.key): c.value for c in changes}  # oldest first: the last write wins
    brokers = sorted({int(n) for t, n, _ in last if t == "broker"})
    topics = sorted({n for t, n, _ in last if t == "topic"})
    deadline = time.monotonic() + READ_BACK_SECONDS
    while True:
        read = admin.read_configs(brokers, topics, keys=_keys(changes))
        differ = [k for k, v in last.items() if (k[0], k[1]) not in read.unreachable
                  and (read.values.get((k[0], k[1])) or {}).get(k[2]) != v]
        if not differ or time.monotonic() >= deadline:
            return read
        sleep(0.2)


def _restore_pass(admin: KafkaAdminPort, record: ThrottleRecord, resources: set[ConfigKey],
                  result: RestoreResult, sleep: Callable[[float], None] = time.sleep) -> dict[ConfigKey, str]:
    """Restore ``resources`` once; return the ones that failed, with the error."""
    read = _settled_read(admin, [c for c in record.changes if c.resource in resources], sleep)
    failed: dict[ConfigKey, str] = {res: f"unreachable ({err})" for res, err in read.unreachable.items()}
    readable = [c for c in record.changes if c.resource in resources and c.resource not in failed]
    warnings: list[str] = []
    changes = restore_changes(readable, read.values, warnings)
    by_res: dict[ConfigKey, list[ConfigChange]] = {}
    for c in changes:
        by_res.setdefault(c.resource, []).append(c)
    try:
        # One request per broker and one for every topic; only when that fails, resource by resource.
        admin.alter_configs(changes)
    except Exception:  # noqa: BLE001 - retried per resource just below
        for res, group in by_res.items():
            try:
                admin.alter_configs(group)
            except Exception as exc:  # noqa: BLE001 - any failure leaves this resource pending
                failed[res] = f"write failed ({exc})"
    written = [c for c in changes if c.resource not in failed]
    failed.update(_read_back(admin, written, sleep))
    result.changes.extend(c for c in written if c.resource not in failed)
    result.warnings.extend(w for w in warnings if w not in result.warnings)
    return failed


def _kept_for_moves(admin: KafkaAdminPort, store: RecordStore, record: ThrottleRecord,
                    result: RestoreResult) -> bool:
    """Whether moves of the run are still in flight; then the record is left pending for them."""
    moving = partition_names(own_moves_in_flight(admin, record.submitted))
    if not moving:
        return False
    result.pending = {MOVES_PENDING: f"{len(moving)} move(s) of this run still in flight "
                                     f"({', '.join(moving[:10])}{' ...' if len(moving) > 10 else ''}); "
                                     "the throttle stays until they finish"}
    record.pending = dict(result.pending)
    store.put(record)
    log.warning("%s", result.message())
    return True


def restore_throttle(admin: KafkaAdminPort, store: RecordStore, run_id: str, *, attempts: int = 3,
                     wait_max_seconds: float = 10.0, keep_while_moving: bool = False,
                     sleep: Callable[[float], None] = time.sleep) -> RestoreResult:
    """Undo the run's throttle per resource; keep what could not be undone pending in its record.

    Idempotent: a restored record is a no-op, writes that change nothing are skipped, and a
    second call only retries what is pending.

    :param admin: KafkaAdmin
    :param store: where the run's record is
    :param run_id: the run to undo
    :param attempts: passes over the resources still failing
    :param wait_max_seconds: longest wait between passes
    :param keep_while_moving: leave everything while a move the record lists is in flight
    """
    record = store.get(run_id)
    who, what = restored_subject(run_id)
    if record is None:
        log.info("%s has no %s record: nothing was written, nothing to restore", who, what)
        return RestoreResult(run_id, no_record=True)
    if record.restored:
        log.info("%s of %s already restored", what, who)
        return RestoreResult(run_id, already_restored=True)
    result = RestoreResult(run_id)
    if keep_while_moving and _kept_for_moves(admin, store, record, result):
        return result
    remaining: set[ConfigKey] = {c.resource for c in record.changes}
    if record.pending and MOVES_PENDING not in record.pending:
        # An earlier pass restored the rest: retry only what it left (no false "changed" warnings).
        remaining = {r for r in remaining if _label(r) in record.pending}
    failed: dict[ConfigKey, str] = {}
    for attempt in range(max(1, attempts)):
        failed = _restore_pass(admin, record, remaining, result, sleep)
        remaining = set(failed)
        if not remaining:
            break
        if attempt + 1 < attempts:
            sleep(min(wait_max_seconds, 0.5 * 2 ** attempt))
    result.pending = {_label(res): why for res, why in sorted(failed.items())}
    record.pending = dict(result.pending)
    if result.pending:
        store.put(record)
        log.error("%s", result.message())
        return result
    record.restored, record.restored_at = True, time.time()
    store.put(record)
    log.info("%s", result.message())
    return result


def restore_after_run(admin: KafkaAdminPort, store: RecordStore, run_id: str) -> RestoreResult:
    """Restore a run's throttle at its end, but never from under its moves: the one rule of a
    run's ``finally`` (:func:`kafka_reassign.run.reassign.run_reassignment`) and of the DAG's
    teardown task.

    Whatever happened before (the run finished, failed with its moves left going because
    ``cancel_on_failure`` is off, or a cancel that did not take), while a move the run's
    record lists is still in flight the throttle is what keeps it from hurting clients: it
    stays, the record is left pending (:data:`MOVES_PENDING`) and the reconciler restores it
    once the moves are done. With none in flight the throttle is restored at once.
    """
    return restore_throttle(admin, store, run_id, keep_while_moving=True)
