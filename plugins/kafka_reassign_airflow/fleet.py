"""The fleet as Airflow sees it: read, checked against Airflow's connections, at DAG parse time.

The list comes from the Variable :data:`FLEET_VARIABLE` (JSON) when it is set, else from
``[kafka_reassign] fleet``; with neither, the fleet is one cluster, ``kafka_default`` (the
DAGs then look exactly as before). Parsing (``kafka_reassign.fleet``) raises naming every bad
entry, so a bad fleet shows in the DAG files' import errors and no DAG of the file loads.

Also here: the fleet-wide settings the DAG files read at parse time (``max_active_runs``, the
planning pool) and the creation of the planning pool when the api-server starts.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from kafka_reassign.fleet import FleetChecks, FleetEntry, parse_fleet

log = logging.getLogger(__name__)

FLEET_VARIABLE = "kafka_reassign_fleet"
DEFAULT_CONN_ID = "kafka_default"
DEFAULT_MAX_ACTIVE_RUNS = 16
DEFAULT_PLANNING_POOL = "kafka_reassign_planning"
DEFAULT_PLANNING_POOL_SLOTS = 4


@dataclass(frozen=True)
class Fleet:
    """The clusters of the scheduled DAGs.

    :param entries: one per cluster, in the config's order
    :param configured: False when no fleet is configured (one cluster, kafka_default)
    """

    entries: tuple[FleetEntry, ...]
    configured: bool

    @property
    def conn_ids(self) -> list[str]:
        return [e.conn_id for e in self.entries]


REBALANCE_DAG_ID = "kafka_rebalance"


def rebalance_dag_id(fleet: Fleet, entry: FleetEntry) -> str:
    """The scheduled rebalance DAG of a cluster: ``kafka_rebalance__<conn_id>`` in a configured
    fleet, plain ``kafka_rebalance`` without one (as before fleets existed)."""
    return f"{REBALANCE_DAG_ID}__{entry.conn_id}" if fleet.configured else REBALANCE_DAG_ID


def fleet_conn_id(dag_id: str) -> str | None:
    """The connection a fleet rebalance DAG is for (``kafka_rebalance__<conn_id>``), else None.

    Its scheduled runs have no conf, so the connection is read from the DAG id.
    """
    prefix = f"{REBALANCE_DAG_ID}__"
    return (dag_id[len(prefix):] or None) if dag_id.startswith(prefix) else None


def _fleet_text() -> tuple[str | None, str]:
    """(JSON text, where it came from); text None when no fleet is configured."""
    from airflow.configuration import conf
    from airflow.sdk import Variable

    # A failed read raises (an import error) rather than falling back: a fleet that silently
    # became kafka_default alone would drop every cluster's DAG until the next parse.
    text = Variable.get(FLEET_VARIABLE, default=None)
    if text is not None and str(text).strip():
        return str(text), f"Variable {FLEET_VARIABLE}"
    text = conf.get("kafka_reassign", "fleet", fallback="").strip()
    return (text or None), "[kafka_reassign] fleet"


def _connection_exists(conn_id: str) -> bool:
    from airflow.sdk import BaseHook

    try:
        BaseHook.get_connection(conn_id)
    except Exception:
        return False
    return True


def _bootstrap_of(conn_id: str) -> str | None:
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception:
        return None
    extra = conn.extra_dejson or {}
    servers = extra.get("bootstrap.servers") or extra.get("bootstrap_servers") or conn.host
    return str(servers) if servers else None


def schedule_problem(schedule: str) -> str | None:
    """What Airflow finds wrong with a cron schedule or preset, None when it is valid."""
    from airflow.sdk.definitions.timetables.trigger import CronTriggerTimetable

    try:
        CronTriggerTimetable(schedule, timezone="UTC").validate()
    except Exception as exc:
        return str(exc)
    return None


CHECKS = FleetChecks(connection_exists=_connection_exists, schedule_problem=schedule_problem,
                     bootstrap_of=_bootstrap_of)


def load_fleet() -> Fleet:
    """The fleet, checked (unknown connection, a cluster twice, a bad schedule raise naming the entry).

    :raises kafka_reassign.fleet.FleetConfigError: the config is wrong
    """
    text, source = _fleet_text()
    if text is None:
        return Fleet(entries=(FleetEntry(DEFAULT_CONN_ID),), configured=False)
    return Fleet(entries=tuple(parse_fleet(text, CHECKS, source=source)), configured=True)


def max_active_runs() -> int:
    """``[kafka_reassign] max_active_runs`` (runs of kafka_reassign at once across the fleet)."""
    from airflow.configuration import conf

    value = conf.getint("kafka_reassign", "max_active_runs", fallback=DEFAULT_MAX_ACTIVE_RUNS)
    if value < 1:
        raise ValueError(f"[kafka_reassign] max_active_runs must be at least 1, not {value}")
    return value


def planning_pool() -> str:
    """The pool of the planning tasks: ``[kafka_reassign] planning_pool``, empty = default_pool."""
    from airflow.configuration import conf

    name = conf.get("kafka_reassign", "planning_pool", fallback=DEFAULT_PLANNING_POOL).strip()
    return name or "default_pool"


def ensure_planning_pool() -> bool:
    """Create the planning pool when it is missing (the scheduler never queues a task of a missing
    pool); an existing pool is left as its operator sized it. Returns whether it created it.

    Needs the metadata DB: called where the ORM is available (the api-server loading the plugin).
    Plugins load lazily, e.g. in the middle of Airflow's own DAG sync: a session of its own
    (not Airflow's thread-scoped one, which closing would detach the caller's objects).
    """
    from airflow import settings
    from airflow.configuration import conf
    from airflow.models.pool import Pool
    from sqlalchemy.orm import Session

    name = planning_pool()
    with Session(settings.engine) as session:
        if Pool.get_pool(name, session=session) is not None:
            return False
        slots = conf.getint("kafka_reassign", "planning_pool_slots", fallback=DEFAULT_PLANNING_POOL_SLOTS)
        Pool.create_or_update_pool(name=name, slots=slots, include_deferred=False, session=session,
                                   description="kafka-reassign planning jobs (Spark) at once; created by the provider")
        session.commit()
    log.info("created Airflow pool %s with %d slots for the planning tasks", name, slots)
    return True


def ensure_planning_pool_quietly() -> None:
    """:func:`ensure_planning_pool` where the metadata DB is at hand (api-server, scheduler); never raises.

    Task processes load the plugin too; they have no DB access in Airflow 3 and skip this.
    """
    from airflow import settings

    from kafka_reassign_airflow.record_store import in_task_context

    if in_task_context() or getattr(settings, "engine", None) is None:
        return
    try:
        ensure_planning_pool()
    except Exception as exc:  # a missing pool is reported by Airflow as a DAG warning
        log.warning("could not create the planning pool %s: %s; create it with `airflow pools set`",
                    planning_pool(), exc)
