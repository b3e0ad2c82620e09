"""Log dir capacities an operator gives (run parameter ``log_dir_capacity_bytes``), over the ones
brokers report (KIP-827: DescribeLogDirs v4+ carries each log dir's total and usable bytes).

A broker reports the size of the filesystem a log dir is on. That is not always what the planner
should fill: several log dirs can share one volume, a quota can cap a dir below its volume, or
the operator wants headroom kept for something else. Each entry of the parameter is one of::

    2TB                      every log dir no other entry names
    3=500GB                  every log dir of broker 3
    3:/var/kafka/d1=500GB    that one log dir of broker 3

The most specific entry wins. Sizes take the units of the throttle flags (``500GB``, ``2TiB``,
bytes). The snapshot records where each capacity came from (``capacity_source``: ``broker`` or
``user``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from kafka_reassign.errors import ParamError, Problem

#: The run parameter's name (errors name it).
PARAM = "log_dir_capacity_bytes"
#: ``capacity_source`` values of a snapshot's log dir.
FROM_BROKER, FROM_USER = "broker", "user"


@dataclass(frozen=True)
class CapacityOverrides:
    """Parsed ``log_dir_capacity_bytes`` entries.

    :param every_dir: bytes of every log dir no other entry names; None = as reported
    :param per_broker: broker id -> bytes of each of its log dirs
    :param per_dir: (broker id, log dir) -> bytes
    """

    every_dir: int | None = None
    per_broker: dict[int, int] = field(default_factory=dict)
    per_dir: dict[tuple[int, str], int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.every_dir is not None or bool(self.per_broker) or bool(self.per_dir)

    def for_dir(self, broker: int, path: str) -> int | None:
        """The capacity given for one log dir (the most specific entry), None when none is."""
        return self.per_dir.get((broker, path), self.per_broker.get(broker, self.every_dir))


#: One entry: (broker or None = every broker, log dir or None = each of its dirs, bytes).
_Entry = tuple[int | None, str | None, int]


def _parse_entry(entry: Any, where: str, problems: list[Problem]) -> _Entry | None:
    """One entry, or None after adding the problem with it (named ``where``)."""
    from kafka_reassign.units import parse_bytes

    if not isinstance(entry, str) or not entry.strip():
        problems.append(Problem(where, f"must be a string such as '2TB', '3=500GB' or '3:/data/d1=500GB', "
                                       f"got {entry!r}", "bad_param"))
        return None
    target, _, size_text = entry.strip().rpartition("=")
    broker_text, colon, path = target.partition(":")
    try:
        size = parse_bytes(size_text, what="capacity")
    except ValueError as exc:
        problems.append(Problem(where, str(exc), "bad_param"))
        return None
    if size <= 0:
        problems.append(Problem(where, f"capacity must be positive, got {entry!r}", "bad_param"))
        return None
    if target and (not broker_text.strip().isdigit() or (colon and not path.strip())):
        problems.append(Problem(where, f"{entry!r}: write SIZE, BROKER=SIZE or BROKER:LOG_DIR=SIZE "
                                       "(a broker id, then optionally ':' and a log dir path)", "bad_param"))
        return None
    return (int(broker_text) if target else None, path.strip() or None, size)


def parse_capacities(entries: Iterable[Any] | None, key: str = PARAM) -> CapacityOverrides:
    """The entries of ``log_dir_capacity_bytes``; raise :class:`ParamError` naming every bad one.

    :param entries: the parameter's strings (None or empty: no override)
    :param key: the name the value was given as
    """
    if entries is None:
        return CapacityOverrides()
    if isinstance(entries, str) or not isinstance(entries, (list, tuple)):
        raise ParamError([Problem(key, f"must be a list of strings, got {entries!r}", "bad_param")])
    problems: list[Problem] = []
    given: dict[tuple[int | None, str | None], int] = {}
    for i, entry in enumerate(entries):
        parsed = _parse_entry(entry, f"{key}[{i}]", problems)
        if parsed is None:
            continue
        broker, path, size = parsed
        if (broker, path) in given:
            problems.append(Problem(f"{key}[{i}]", f"{entry!r} gives a capacity an earlier entry already "
                                                   "gives", "bad_param"))
        given[(broker, path)] = size
    if problems:
        raise ParamError(problems)
    return CapacityOverrides(every_dir=given.get((None, None)),
                             per_broker={b: n for (b, d), n in given.items() if b is not None and d is None},
                             per_dir={(b, d): n for (b, d), n in given.items() if b is not None and d is not None})


def apply_capacities(snapshot: dict[str, Any], overrides: CapacityOverrides) -> None:
    """Set the given capacities on a snapshot's log dirs (``capacity_source: user``), in place.

    Checked against the snapshot first: an entry naming a broker it does not hold, or a log dir
    that broker does not have, raises :class:`ParamError` (nothing is changed then).

    :param snapshot: a snapshot (:func:`~kafka_reassign.cluster.snapshot.read_cluster_snapshot`)
    :param overrides: parsed by :func:`parse_capacities`
    """
    dirs = {b["id"]: [d["path"] for d in b.get("log_dirs", [])] for b in snapshot.get("brokers", [])}
    known = ", ".join(str(b) for b in sorted(dirs))
    problems = [Problem(PARAM, f"broker {b} is not in the cluster (brokers: {known})", "unknown_broker")
                for b in sorted(set(overrides.per_broker) - set(dirs))]
    for b, path in sorted(overrides.per_dir):
        if b not in dirs:
            problems.append(Problem(PARAM, f"broker {b} is not in the cluster (brokers: {known})", "unknown_broker"))
        elif path not in dirs[b]:
            problems.append(Problem(PARAM, f"{path!r} is not a log dir of broker {b} "
                                           f"({', '.join(dirs[b]) or 'none known'})", "unknown_log_dir"))
    if problems:
        raise ParamError(problems)
    for b in snapshot.get("brokers", []):
        for d in b.get("log_dirs", []):
            given = overrides.for_dir(b["id"], d["path"])
            if given is not None:
                d["capacity_bytes"], d["capacity_source"] = given, FROM_USER
