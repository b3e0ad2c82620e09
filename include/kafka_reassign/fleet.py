"""The fleet: the Kafka clusters one Airflow looks after, with per-cluster overrides.

A fleet config is a JSON list; each entry names a cluster by its Airflow connection id and may
override what the scheduled DAGs do on it::

    [{"conn_id": "kafka_eu1", "schedule": "0 2 * * *", "balance_threshold": 1.15},
     {"conn_id": "kafka_us1", "throttle_bytes_per_sec": 50000000, "require_approval": true,
      "maintenance_windows": ["Mon-Fri 01:00-05:00 America/New_York"]},
     "kafka_ap1"]

A bare string is an entry with only a connection id. Parsing checks the shape here (no
Airflow); what needs Airflow (does the connection exist, is the schedule valid, which bootstrap
servers a connection points at) is passed in as callables, so every problem of every entry
is reported at once, each naming its entry.
"""
from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from typing import Callable, Iterable

from kafka_reassign.errors import ReassignError
from kafka_reassign.planning.goal_order import goal_names, order_problems

#: Connection ids become part of DAG ids (``kafka_rebalance__<conn_id>``): same alphabet.
_CONN_ID = re.compile(r"^[A-Za-z0-9_.-]+$")
#: Entry keys and the types they take (bool is not an int here).
_KEYS: dict[str, tuple[type, ...]] = {"conn_id": (str,), "schedule": (str, type(None)),
                                      "balance_threshold": (int, float), "throttle_bytes_per_sec": (int,),
                                      "require_approval": (bool,), "maintenance_windows": (list,),
                                      "balance_goals": (list,)}


class FleetConfigError(ReassignError):
    """The fleet config is wrong; the message names every bad entry and what is wrong with it."""


@dataclass(frozen=True)
class FleetEntry:
    """One cluster of the fleet; None = the DAG's own default applies.

    :param conn_id: Airflow connection id of the cluster
    :param schedule: cron expression or preset of its scheduled rebalance; "none" = only when triggered
    :param balance_threshold: act when a balanced resource's fullest broker is over this times the
        mean (disk, and each other distribution goal of ``balance_goals``)
    :param throttle_bytes_per_sec: replication throttle of its rebalance moves
    :param require_approval: wait for a person's approval before moving
    :param maintenance_windows: when its rebalance may start new moves (``maintenance_windows`` param)
    :param balance_goals: its rebalance's goals, highest priority first (``balance_goals`` param)
    """

    conn_id: str
    schedule: str | None = None
    balance_threshold: float | None = None
    throttle_bytes_per_sec: int | None = None
    require_approval: bool | None = None
    maintenance_windows: tuple[str, ...] | None = None
    balance_goals: tuple[str, ...] | None = None

    @property
    def schedule_off(self) -> bool:
        """The entry turns its scheduled rebalance off (triggered runs only)."""
        return self.schedule is not None and self.schedule.strip().lower() in ("", "none")


@dataclass(frozen=True)
class FleetChecks:
    """What parsing asks Airflow about an entry.

    :param connection_exists: conn_id -> whether Airflow knows the connection
    :param schedule_problem: schedule -> what is wrong with it, None when valid
    :param bootstrap_of: conn_id -> its bootstrap servers (two entries on the same servers are one cluster)
    """

    connection_exists: Callable[[str], bool]
    schedule_problem: Callable[[str], str | None]
    bootstrap_of: Callable[[str], str | None]


def _label(index: int, raw: object) -> str:
    name = raw if isinstance(raw, str) else raw.get("conn_id") if isinstance(raw, dict) else None
    return f"fleet entry {index + 1}" + (f" ({name})" if isinstance(name, str) and name else "")


def _shape_problems(raw: object) -> list[str]:
    """What is wrong with one entry's keys and types (no Airflow)."""
    if isinstance(raw, str):
        raw = {"conn_id": raw}
    if not isinstance(raw, dict):
        return [f"must be an object with conn_id, or a connection id string, not {type(raw).__name__}"]
    problems = []
    for key in sorted(set(raw) - set(_KEYS)):
        close = difflib.get_close_matches(key, list(_KEYS), n=1)
        problems.append(f"unknown key {key!r}" + (f" - did you mean {close[0]!r}?" if close else "")
                        + f" (an entry takes: {', '.join(_KEYS)})")
    for key, kinds in _KEYS.items():
        value = raw.get(key)
        if (value is not None or key == "conn_id") and (isinstance(value, bool) and bool not in kinds
                                                         or not isinstance(value, kinds)):
            problems.append(f"{key} must be {' or '.join(k.__name__ for k in kinds if k is not type(None))}, "
                            f"not {value!r}")
    conn_id = raw.get("conn_id")
    if isinstance(conn_id, str) and not _CONN_ID.match(conn_id):
        problems.append(f"conn_id {conn_id!r} may hold only letters, digits, '_', '.' and '-' "
                        "(it becomes part of a DAG id)")
    threshold = raw.get("balance_threshold")
    if isinstance(threshold, (int, float)) and not isinstance(threshold, bool) and threshold < 1.0:
        problems.append(f"balance_threshold must be at least 1.0 (1.0 = perfectly even), not {threshold}")
    rate = raw.get("throttle_bytes_per_sec")
    if isinstance(rate, int) and not isinstance(rate, bool) and rate <= 0:
        problems.append(f"throttle_bytes_per_sec must be over 0, not {rate}")
    goals = raw.get("balance_goals")
    goal_problems = order_problems(goal_names(goals)) if isinstance(goals, list) else []
    return problems + _window_problems(raw.get("maintenance_windows")) + [str(p) for p in goal_problems]


def _window_problems(windows: object) -> list[str]:
    """The run parameter's own checks (form, zone, overlaps), named as fleet problems."""
    from kafka_reassign.errors import ParamError
    from kafka_reassign.execution.windows import parse_windows

    if not isinstance(windows, list):
        return []
    try:
        parse_windows(windows)
    except ParamError as exc:
        return [f"maintenance_windows: {p.reason}" for p in exc.problems]
    return []


def _entry(raw: str | dict[str, object]) -> FleetEntry:
    """The entry of a well-shaped raw entry (:func:`_shape_problems` found nothing)."""
    data: dict[str, object] = {"conn_id": raw} if isinstance(raw, str) else raw
    threshold, rate, approval = data.get("balance_threshold"), data.get("throttle_bytes_per_sec"), \
        data.get("require_approval")
    schedule, windows = data.get("schedule"), data.get("maintenance_windows")
    return FleetEntry(conn_id=str(data["conn_id"]), schedule=schedule if isinstance(schedule, str) else None,
                      balance_threshold=float(threshold) if isinstance(threshold, (int, float)) else None,
                      throttle_bytes_per_sec=rate if isinstance(rate, int) else None,
                      require_approval=approval if isinstance(approval, bool) else None,
                      maintenance_windows=tuple(str(w) for w in windows) if isinstance(windows, list) else None,
                      balance_goals=goal_names(goals) if isinstance(goals := data.get("balance_goals"), list) else None)


def _airflow_problems(entry: FleetEntry, checks: FleetChecks) -> list[str]:
    """What Airflow says is wrong with a well-shaped entry."""
    problems = []
    if not checks.connection_exists(entry.conn_id):
        problems.append(f"unknown connection {entry.conn_id!r}: create it (Admin -> Connections, or "
                        f"AIRFLOW_CONN_{entry.conn_id.upper()}) or remove the entry")
    problem = None if entry.schedule is None or entry.schedule_off else checks.schedule_problem(entry.schedule)
    if problem:
        problems.append(f"invalid schedule {entry.schedule!r}: {problem} (a cron expression such as "
                        "'0 3 * * *', a preset such as '@daily', or 'none')")
    return problems


def _same_cluster_problems(entries: Iterable[tuple[str, FleetEntry]], checks: FleetChecks) -> list[str]:
    """Two entries naming one connection, or two connections on the same bootstrap servers."""
    problems: list[str] = []
    seen_conn: dict[str, str] = {}
    seen_servers: dict[str, str] = {}
    for label, entry in entries:
        if entry.conn_id in seen_conn:
            problems.append(f"{label}: the same cluster as {seen_conn[entry.conn_id]} "
                            f"(connection {entry.conn_id!r} is listed twice); list each cluster once")
            continue
        seen_conn[entry.conn_id] = label
        servers = checks.bootstrap_of(entry.conn_id)
        key = ",".join(sorted(s.strip() for s in servers.split(","))) if servers else None
        if key and key in seen_servers:
            problems.append(f"{label}: the same cluster as {seen_servers[key]} (both connect to {servers}); "
                            "list each cluster once")
        elif key:
            seen_servers[key] = label
    return problems


def parse_fleet(text: str, checks: FleetChecks, source: str = "fleet config") -> list[FleetEntry]:
    """The fleet's entries from its JSON text; raise naming every bad entry.

    :param text: a JSON list of entries
    :param checks: what Airflow answers about connections and schedules
    :param source: where the text came from, for messages
    :raises FleetConfigError: bad JSON, not a list, an empty list or any bad entry
    """
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise FleetConfigError(f"{source} is not valid JSON: {exc}") from exc
    if not isinstance(raw, list) or not raw:
        raise FleetConfigError(f"{source} must be a non-empty JSON list of clusters, e.g. "
                               '[{"conn_id": "kafka_eu1", "schedule": "0 2 * * *"}], not ' + text[:80])
    problems: list[str] = []
    good: list[tuple[str, FleetEntry]] = []
    for index, item in enumerate(raw):
        label = _label(index, item)
        shape = _shape_problems(item)
        if shape or not isinstance(item, (str, dict)):
            problems += [f"{label}: {p}" for p in shape]
            continue
        entry = _entry(item)
        problems += [f"{label}: {p}" for p in _airflow_problems(entry, checks)]
        good.append((label, entry))
    problems += _same_cluster_problems(good, checks)
    if problems:
        raise FleetConfigError(f"{source} has {len(problems)} problem(s): " + "; ".join(problems))
    return [entry for _, entry in good]
