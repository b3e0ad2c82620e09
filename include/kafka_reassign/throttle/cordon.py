"""Cordon and uncordon brokers (KIP-1066), recorded like a throttle so the prior value comes back exactly.

A cordon is one ``cordoned.log.dirs`` write per broker. Before it, the broker's own value (or
"not set", with the inherited value and its source) goes to a :class:`ThrottleRecord` named
``cordon-broker-<id>`` (an operator's) or ``cordon-broker-<id>@<run id>`` (a run's) in the same
record store the throttle uses; ``uncordon`` is :func:`~kafka_reassign.throttle.restore.restore_throttle`
of those records, so the value comes back the same way a throttle does (only while it still
holds ours; read back after the write).

A cordon is *held*: the stores' :meth:`list_unrestored` leaves these records out, so neither
the throttle reconciler, nor a run adopting stale records, nor ``kafka-reassign restore`` undoes
a cordon an operator (or a remove-brokers run that succeeded) wants kept. Only uncordon does.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Iterable

from kafka_reassign.cluster.config_source import Inherited
from kafka_reassign.cluster.cordons import CORDONED_LOG_DIRS, cordon_support, cordon_value, cordoned_dirs
from kafka_reassign.cluster.port import KafkaAdminPort
from kafka_reassign.cluster.state import ClusterState
from kafka_reassign.errors import ParamError, Problem
from kafka_reassign.throttle.record import CORDON_RECORD_PREFIX, RecordStore, RecordStoreBase, ThrottleRecord
from kafka_reassign.throttle.restore import RestoreResult, _read_back, restore_throttle
from kafka_reassign.throttle.specs import ConfigChange

log = logging.getLogger(__name__)

def cordon_record_id(broker: int, run_id: str | None = None) -> str:
    """The record of broker ``broker``'s cordon: one for the operator's (CLI) cordons, and one per
    run that cordons it (``cordon-broker-7@<run id>``), so a failed run undoes only its own."""
    return f"{CORDON_RECORD_PREFIX}{broker}" + (f"@{run_id}" if run_id else "")


def _broker_of(record_id: str) -> int | None:
    """The broker a cordon record id names, None for another record."""
    if not record_id.startswith(CORDON_RECORD_PREFIX):
        return None
    head = record_id[len(CORDON_RECORD_PREFIX):].split("@", 1)[0]
    return int(head) if head.isdigit() else None


class CordonError(ParamError):
    """A cordon or uncordon refused before any write."""

    headline = "cordon refused, nothing was written"


@dataclass
class CordonResult:
    """What :func:`cordon_brokers` did.

    :param changes: the writes made (each with the prior value it recorded)
    :param unchanged: brokers already cordoned as asked (nothing written, nothing recorded)
    :param not_read_back: brokers whose value did not read back after the write, and why
    """

    changes: list[ConfigChange] = field(default_factory=list)
    unchanged: list[int] = field(default_factory=list)
    not_read_back: dict[str, str] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = [c.describe() for c in self.changes]
        out += [f"broker {b}: already cordoned as asked, nothing written" for b in self.unchanged]
        out += [f"NOT READ BACK {res}: {why}" for res, why in sorted(self.not_read_back.items())]
        return out


def sole_isr_partitions(state: ClusterState, brokers: Iterable[int]) -> list[str]:
    """Partitions whose in-sync replicas all sit on ``brokers`` (sorted names)."""
    chosen = set(brokers)
    return sorted(f"{p.topic}-{p.partition}" for p in state.partitions() if p.isr and set(p.isr) <= chosen)


def cordon_problems(state: ClusterState, brokers: list[int], log_dirs: list[str] | None,
                    allow_sole_isr: bool = False) -> list[Problem]:
    """Every reason to refuse cordoning ``log_dirs`` (None = all) of ``brokers``, read from ``state``.

    :param allow_sole_isr: cordon even brokers holding the only in-sync replicas of partitions
    """
    problems: list[Problem] = []
    if not brokers:
        problems.append(Problem("brokers", "name at least one broker", "missing_option"))
    for b in brokers:
        info = state.brokers.get(b)
        if info is None or not info.alive:
            problems.append(Problem("brokers", f"broker {b} is {'not alive' if info else 'unknown'} "
                                               f"(live brokers: {sorted(state.alive_brokers)})", "unknown_broker"))
        elif log_dirs is not None and not set(log_dirs) <= set(info.log_dirs):
            problems.append(Problem("log_dirs", f"{sorted(set(log_dirs) - set(info.log_dirs))} are not log dirs "
                                                f"of broker {b} (it has {', '.join(info.log_dirs) or 'none known'})",
                                    "unknown_log_dir"))
    sole = sole_isr_partitions(state, brokers) if log_dirs is None and not allow_sole_isr else []
    if sole:
        shown = ", ".join(sole[:20]) + (f" and {len(sole) - 20} more" if len(sole) > 20 else "")
        problems.append(Problem("brokers", f"brokers {brokers} hold the only in-sync replicas of {len(sole)} "
                                           f"partition(s): {shown}. A cordon does not move them, but these "
                                           "partitions have no other copy to lead or recover from; fix their ISR "
                                           "first, or pass allow_sole_isr to cordon anyway", "sole_isr"))
    return problems


def _planned_changes(admin: KafkaAdminPort, state: ClusterState, brokers: list[int],
                     log_dirs: list[str] | None) -> CordonResult:
    """The writes that cordon ``log_dirs`` of each broker, each with the value it replaces."""
    read = admin.describe_sourced(broker_ids=brokers, keys=[CORDONED_LOG_DIRS])
    planned = CordonResult()
    for b in brokers:
        dirs = state.brokers[b].log_dirs
        own = (read.values.get(("broker", str(b))) or {}).get(CORDONED_LOG_DIRS)
        inherited: Inherited | None = (read.inherited.get(("broker", str(b))) or {}).get(CORDONED_LOG_DIRS)
        current = own if own is not None else (inherited.value if inherited else None)
        value = cordon_value(current, dirs, log_dirs)
        if value == current or (dirs and cordoned_dirs(value, dirs) == cordoned_dirs(current, dirs)):
            planned.unchanged.append(b)
            continue
        planned.changes.append(ConfigChange("broker", str(b), CORDONED_LOG_DIRS, own, value,
                                            inherited=inherited if own is None else None))
    return planned


def cordon_brokers(admin: KafkaAdminPort, store: RecordStore, state: ClusterState, brokers: Iterable[int],
                   log_dirs: Iterable[str] | None = None, *, by: str, run_id: str | None = None,
                   allow_sole_isr: bool = False) -> CordonResult:
    """Cordon ``log_dirs`` (None = every dir) of ``brokers``: check, record the prior values, write.

    Refusals come before any write: unknown or dead brokers, dirs the broker does not have,
    brokers holding the only in-sync replicas of partitions, a cluster without cordons, and
    whatever Kafka refuses in a ``validate_only`` pass (metadata.version below 4.3-IV0).

    :param state: the cluster now, with log dirs (``cluster_state()``)
    :param by: who cordons: noted in the record
    :param run_id: the run cordoning (its own records, see :func:`release_run_cordons`); None = an operator
    :raises CordonError: nothing written
    """
    broker_list = sorted(set(brokers))
    dirs = sorted(set(log_dirs)) if log_dirs is not None else None
    problems = cordon_problems(state, broker_list, dirs, allow_sole_isr)
    support = cordon_support(admin)
    if support.supported is False:
        problems.append(Problem("cluster", support.note, "cordon_unsupported"))
    if problems:
        raise CordonError(problems)
    planned = _planned_changes(admin, state, broker_list, dirs)
    if not planned.changes:
        return planned
    try:
        admin.alter_configs(planned.changes, validate_only=True)
    except Exception as exc:  # noqa: BLE001 - Kafka's own refusal, reported as one
        raise CordonError([Problem("cluster", f"Kafka refused the cordon ({exc}); cordons need Kafka 4.3+ "
                                              "and metadata.version 4.3-IV0 or later", "cordon_refused")]) from exc
    for c in planned.changes:  # durable BEFORE the write, as for a throttle
        rid = cordon_record_id(int(c.name), run_id)
        record = store.get(rid)
        if record is None or record.restored:
            record = ThrottleRecord.new(rid, state.cluster_id, [])
        record.notes.append(f"cordoned by {by}: {c.describe()}")
        record.changes.append(c)
        store.put(record)
    log.info("cordoning %d broker(s): %s", len(planned.changes), "; ".join(c.describe() for c in planned.changes))
    admin.alter_configs(planned.changes)
    # Read back, as a restore does: when cordon returns, the brokers enforce it.
    stale = _read_back(admin, planned.changes, time.sleep)
    planned.not_read_back = {f"{kind} {name}": why for (kind, name), why in stale.items()}
    return planned


def held_cordons(store: RecordStoreBase, brokers: Iterable[int]) -> dict[int, list[ThrottleRecord]]:
    """The unrestored cordon records of ``brokers`` (operator's and runs'), newest first."""
    wanted = set(brokers)
    out: dict[int, list[ThrottleRecord]] = {}
    for rec in reversed(store.list_all()):  # oldest first -> newest first
        b = _broker_of(rec.run_id)
        if b in wanted and not rec.restored:
            out.setdefault(b, []).append(rec)
    return out


def uncordon_brokers(admin: KafkaAdminPort, store: RecordStoreBase, brokers: Iterable[int]
                     ) -> dict[str, RestoreResult]:
    """Put back the ``cordoned.log.dirs`` each broker had before our cordons, exactly: every cordon
    record of the broker is restored, newest first (so the oldest prior value is what stays).

    :returns: record id -> what its restore did
    :raises CordonError: a broker has no cordon recorded (nothing written for any broker)
    """
    broker_list = sorted(set(brokers))
    held = held_cordons(store, broker_list)
    missing = [b for b in broker_list if b not in held]
    if missing:
        raise CordonError([Problem("brokers", f"no cordon of broker {b} is recorded in {store} (cordoned by "
                                              "hand, or already uncordoned): nothing to put back",
                                   "no_cordon_record") for b in missing])
    return {rec.run_id: restore_throttle(admin, store, rec.run_id) for b in broker_list for rec in held[b]}


def release_run_cordons(admin: KafkaAdminPort, store: RecordStoreBase, run_id: str) -> dict[str, RestoreResult]:
    """Undo the cordons ``run_id`` made (a run that failed or was cancelled): only its own writes,
    and only while they still hold (a value someone set since is kept, as for a throttle)."""
    return {rid: restore_throttle(admin, store, rid) for rid in run_cordon_ids(store, run_id)}


def run_cordon_ids(store: RecordStoreBase, run_id: str) -> list[str]:
    """The unrestored cordon records ``run_id`` made, newest first."""
    return [r.run_id for r in reversed(store.list_all())
            if not r.restored and _broker_of(r.run_id) is not None and r.run_id.endswith(f"@{run_id}")]
