"""Keep a run's throttle in place while its moves are in flight.

A throttle is set once, before the first move; anyone (a person, another tool) can delete
or raise it while the run goes on, and then the moves that follow copy data at full speed,
hurting producers and consumers. The execute loop calls :meth:`ThrottleGuard.check` every
poll (or every ``every`` polls): it reads the configs the run's record wrote and, where ours
is gone or weakened, writes it again, recording the write first (so the restore knows the
value found, and gives it back to whoever set it), with a warning in the log.

What counts as still in place:

* a rate at or below ours (someone lowered it: more throttled, fine), judged by what the
  broker enforces: its own value, else the one it inherits (a cluster-wide default). When our
  per-broker value is deleted and a default at or below ours is in force, the broker is
  throttled at least as much as the run asked; with a higher default (or none), ours is put back;
* a replica list holding every entry we need, or ``*`` (every replica throttled).

A broker that cannot be read is skipped (its moves cannot progress anyway). When the write
fails, :class:`ThrottleGuardError` is raised and the run must fail: it never ends in success
while its moves ran unthrottled.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka_reassign.cluster.config_source import Inherited
from kafka_reassign.cluster.port import KafkaAdminPort
from kafka_reassign.errors import ReassignError
from kafka_reassign.throttle.record import RecordStore, ThrottleRecord
from kafka_reassign.throttle.specs import (BROKER_KEYS, LIST_KEYS, TOPIC_KEYS, WILDCARD, ConfigChange,
                                     format_replica_list, parse_replica_list)

log = logging.getLogger(__name__)


class ThrottleGuardError(ReassignError):
    """The run's throttle was removed or weakened and could not be put back."""


@dataclass
class GuardResult:
    """One check: what was re-applied and why.

    :param reapplied: writes made to put our throttle back (each recorded before)
    :param warnings: one line per re-applied value
    :param unreadable: resources that could not be read (skipped this time)
    """

    reapplied: list[ConfigChange] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return not self.reapplied


def _latest(record: ThrottleRecord) -> dict[tuple[str, str, str], ConfigChange]:
    """The run's latest write per key (what should be in place now); deletions need nothing."""
    out: dict[tuple[str, str, str], ConfigChange] = {}
    for c in record.changes:
        out[(c.resource_type, c.name, c.key)] = c
    return {k: c for k, c in out.items() if c.value is not None}


def _missing(change: ConfigChange, now: str | None) -> str | None:
    """The value to write when ours is not in place (None when it is)."""
    if change.key in LIST_KEYS:
        now_set, ours = parse_replica_list(now), parse_replica_list(change.value)
        if now_set == WILDCARD or ours == WILDCARD:
            return None
        if ours <= now_set:  # type: ignore[operator]
            return None
        return format_replica_list(now_set | ours)  # type: ignore[operator]
    if now is not None:
        try:
            if float(now) <= float(change.value or "inf"):
                return None
        except ValueError:
            pass
    return change.value


def _enforced(read: Any, rtype: str, name: str, key: str) -> tuple[str | None, Inherited | None]:
    """(the resource's own value, the inherited value the broker enforces when it has none)."""
    now = (read.values.get((rtype, name)) or {}).get(key)
    if now is not None:
        return now, None
    return None, (getattr(read, "inherited", {}).get((rtype, name)) or {}).get(key)


def _shown(now: str | None, inherited: Inherited | None) -> str:
    """A value for a warning: ours deleted reads "None (cluster default '...' in force)"."""
    if now is None and inherited is not None:
        return f"None ({inherited.label} {inherited.value!r} in force)"
    return repr(now)


def guard_throttle(admin: KafkaAdminPort, store: RecordStore, run_id: str) -> GuardResult:
    """Check the run's throttle once and put back what is missing (recorded first).

    :param admin: KafkaAdmin (read_configs, alter_configs)
    :param store: the run's record store
    :param run_id: the run
    :raises ThrottleGuardError: when a missing throttle could not be written back
    """
    result = GuardResult()
    record = store.get(run_id)
    if record is None or record.restored:
        return result
    latest = _latest(record)
    if not latest:
        return result
    brokers = sorted({int(n) for t, n, _ in latest if t == "broker"})
    topics = sorted({n for t, n, _ in latest if t == "topic"})
    read = admin.read_configs(brokers, topics, keys=[*BROKER_KEYS, *TOPIC_KEYS])
    result.unreadable = [f"{t} {n}" for t, n in sorted(read.unreachable)]
    fixes: list[ConfigChange] = []
    for (rtype, name, key), change in latest.items():
        if (rtype, name) in read.unreachable:
            continue
        now, inherited = _enforced(read, rtype, name, key)
        # Judged by the value in force; the prior recorded stays the per-broker one (None when
        # only a default is in force), so the restore deletes the override again.
        value = _missing(change, now if inherited is None else inherited.value)
        if value is not None:
            fixes.append(ConfigChange(rtype, name, key, now, value, inherited=inherited))
            result.warnings.append(f"throttle of run {run_id} was changed by someone else: {rtype} {name} {key} "
                                   f"is {_shown(now, inherited)}, ours is {change.value!r}; writing {value!r} again")
    if not fixes:
        return result
    record.changes.extend(fixes)
    record.notes.append(f"throttle guard re-applied {len(fixes)} value(s) changed by someone else during the run")
    store.put(record)  # recorded before written, like every throttle write
    for w in result.warnings:
        log.warning("%s", w)
    try:
        admin.alter_configs(fixes)
    except Exception as exc:  # noqa: BLE001 - any failure means moves run unthrottled
        raise ThrottleGuardError(
            f"the throttle of run {run_id} was removed or raised by someone else and could not be put back "
            f"({exc}); the run stops rather than move data unthrottled. Changed: "
            + "; ".join(f"{c.resource_type} {c.name} {c.key}={c.prior!r}" for c in fixes)) from exc
    result.reapplied = fixes
    return result


#: The names of an :func:`expected_throttle` entry (earlier releases wrote them as a list, in this order).
EXPECTED_FIELDS = ("resource_type", "name", "key", "value")


def expected_throttle(record: ThrottleRecord | None) -> list[dict[str, str]]:
    """What must stay in place while the run's moves fly, as plain JSON for a trigger's spec.

    :returns: one ``{resource_type, name, key, value}`` per key (the run's latest write)
    """
    if record is None or record.restored:
        return []
    return [dict(zip(EXPECTED_FIELDS, (c.resource_type, c.name, c.key, c.value or "")))
            for c in _latest(record).values()]


def _expected_entry(entry: Mapping[str, str] | Sequence[str]) -> tuple[str, str, str, str]:
    """(resource_type, name, key, value) of an entry; the positional list of earlier releases too."""
    named = entry if isinstance(entry, Mapping) else dict(zip(EXPECTED_FIELDS, entry))
    return named["resource_type"], named["name"], named["key"], named["value"]


def throttle_drift(admin: KafkaAdminPort, expected: Sequence[Mapping[str, str] | Sequence[str]]) -> list[str]:
    """Read-only check of :func:`expected_throttle`: one line per value removed or weakened.

    For a watcher that must not write (the triggerer): it reports, and the worker woken by
    the report runs :func:`guard_throttle`, which records and re-applies.
    """
    if not expected:
        return []
    entries = [_expected_entry(e) for e in expected]
    brokers = sorted({int(n) for t, n, _, _ in entries if t == "broker"})
    topics = sorted({n for t, n, _, _ in entries if t == "topic"})
    read = admin.read_configs(brokers, topics, keys=[*BROKER_KEYS, *TOPIC_KEYS])
    out = []
    for rtype, name, key, value in entries:
        if (rtype, name) in read.unreachable:
            continue
        now, inherited = _enforced(read, rtype, name, key)
        if _missing(ConfigChange(rtype, name, key, None, value),
                    now if inherited is None else inherited.value) is not None:
            out.append(f"throttle changed by someone else: {rtype} {name} {key} is {_shown(now, inherited)}, "
                       f"ours is {value!r}")
    return out


class ThrottleGuard:
    """Calls :func:`guard_throttle` every ``every`` polls of a run and keeps the count.

    :param admin: KafkaAdmin
    :param store: the record store
    :param run_id: the run
    :param every: check on every ``every``-th call (1 = every poll, 0 = never)
    """

    def __init__(self, admin: KafkaAdminPort, store: RecordStore, run_id: str, every: int = 1) -> None:
        self.admin, self.store, self.run_id = admin, store, run_id
        self.every = max(0, int(every))
        self.polls = 0
        self.reapplied: list[ConfigChange] = []

    def check(self, force: bool = False) -> GuardResult:
        """Check now when due (or when ``force``: e.g. right before declaring the run done)."""
        self.polls += 1
        if not force and (not self.every or (self.polls - 1) % self.every):
            return GuardResult()
        result = guard_throttle(self.admin, self.store, self.run_id)
        self.reapplied.extend(result.reapplied)
        return result

    def summary(self) -> str | None:
        """A line for the run's report when the throttle had to be re-applied, else None."""
        if not self.reapplied:
            return None
        keys = sorted({f"{c.resource_type} {c.name} {c.key}" for c in self.reapplied})
        return (f"the throttle was removed or raised by someone else during the run and re-applied "
                f"{len(self.reapplied)} time(s): {', '.join(keys[:10])}{' ...' if len(keys) > 10 else ''}")
