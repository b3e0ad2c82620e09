"""The fleet page's rows: one per cluster, from stored state only (``GET /api/fleet``).

What a platform team asks of a fleet at a glance: which clusters are moving, carrying a
throttle, unbalanced. Everything here is read from the Airflow metadata DB - the fleet
Variable, the throttle records, cluster locks and execution progress (Variables), the
rebalance DAGs' summaries and the reconciler's reports (XCom), the runs (DagRuns) - and never
from Kafka, so an unreachable cluster shows as such and never blocks the page. Each request
reads per-run summaries and progress figures, never a plan's step list, so its cost follows
the number of clusters and runs, not the size of the plans.

:func:`fleet_row` and :func:`status_word` hold the judgement (no Airflow, unit-tested);
:func:`collect_fleet` does the reading.
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Mapping
from urllib.parse import urlencode

# At module level: FastAPI resolves the (string) annotations of the route from these globals.
from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse

from kafka_reassign.fleet import FleetChecks, FleetConfigError, FleetEntry, parse_fleet

log = logging.getLogger(__name__)

RECONCILER_DAG_ID = "kafka_throttle_reconciler"
RECONCILE_TASK_ID = "reconcile_throttles"
#: XCom key of the rebalance DAG's should_rebalance task: the plan summary's scalar figures.
SUMMARY_XCOM_KEY = "summary"
#: The rebalance DAG's balance threshold when the fleet entry sets none (dags/kafka_rebalance.py).
DEFAULT_BALANCE_THRESHOLD = 1.10
#: Runs read per request to tie runs to connections (most recent first).
RECENT_RUNS = 300
ACTIVE_STATES = ("queued", "running")

MOVING, THROTTLE_LEFT, BALANCED, UNBALANCED, UNKNOWN = "moving", "throttle left", "balanced", "unbalanced", "unknown"


@dataclass
class ClusterFacts:
    """What the metadata DB holds about one cluster of the fleet.

    :param conn_id: its Airflow connection
    :param rebalance_dag_id: its scheduled rebalance DAG
    :param balance_threshold: disk max/mean above which its rebalance acts
    :param cluster_id: Kafka cluster id, from a record, lock or reconciler report (None: never seen)
    :param summary: the last rebalance plan's scalar summary (balance_before/after, leader balance...)
    :param summary_run: {dag_id, run_id, state} of the rebalance run that stored ``summary``
    :param last_rebalance: {dag_id, run_id, state, start_date, end_date} of the latest rebalance run
    :param in_flight: {dag_id, run_id, state} of a queued or running run that moves replicas
    :param progress: the saved progress of ``in_flight`` (a ProgressView's JSON), when saved
    :param throttles: unrestored throttle records of the cluster: {run_id, since, settings, run_active}
    :param reconciler: the last sweep's report for this cluster (ReconcileReport JSON + run_id),
        or {"run_id", "state", "missing": True} when the sweep could not reconcile it
    """

    conn_id: str
    rebalance_dag_id: str
    balance_threshold: float = DEFAULT_BALANCE_THRESHOLD
    cluster_id: str | None = None
    summary: dict[str, Any] | None = None
    summary_run: dict[str, Any] | None = None
    last_rebalance: dict[str, Any] | None = None
    in_flight: dict[str, Any] | None = None
    progress: dict[str, Any] | None = None
    throttles: list[dict[str, Any]] = field(default_factory=list)
    reconciler: dict[str, Any] | None = None


def current_balance(facts: ClusterFacts) -> float | None:
    """Disk max/mean as last stored: after the plan when its run moved it (over the threshold and
    succeeded), else as the plan found it; None when no plan summary is stored."""
    s = facts.summary or {}
    before, after = s.get("balance_before"), s.get("balance_after")
    if before is None:
        return None
    moved = (facts.summary_run or {}).get("state") == "success" and float(before) > facts.balance_threshold
    return float(after) if moved and after is not None else float(before)


def _leftover_settings(report: Mapping[str, Any] | None) -> int:
    """Throttle settings the last sweep found and left: foreign ones and restores still pending."""
    if not report or report.get("missing"):
        return 0
    pending = sum(len(r.get("pending") or {}) for r in report.get("restored") or [])
    return len(report.get("foreign") or []) + pending


def status_word(facts: ClusterFacts) -> str:
    """moving / throttle left / unbalanced / balanced / unknown, in that order of precedence."""
    if facts.in_flight is not None:
        return MOVING
    if any(not t.get("run_active") for t in facts.throttles) or _leftover_settings(facts.reconciler):
        return THROTTLE_LEFT
    balance = current_balance(facts)
    if balance is None:
        return UNKNOWN
    return UNBALANCED if balance > facts.balance_threshold else BALANCED


def run_page(dag_id: str, run_id: str) -> str:
    """The progress page of a run, relative to the plugin's page (it is served next to it)."""
    return "./?" + urlencode({"dag_id": dag_id, "run_id": run_id})


def _in_flight_view(facts: ClusterFacts) -> dict[str, Any] | None:
    if facts.in_flight is None:
        return None
    p = facts.progress or {}
    total, moved = p.get("bytes_total"), p.get("bytes_moved")
    percent = round(100.0 * float(moved) / float(total), 1) if total and moved is not None else None
    return {**facts.in_flight, "link": run_page(facts.in_flight["dag_id"], facts.in_flight["run_id"]),
            "percent": percent, "eta_seconds": p.get("eta_seconds"), "outcome": p.get("outcome"),
            "steps_done": p.get("steps_done"), "steps_total": p.get("steps_total"),
            "bytes_left": p.get("bytes_left"), "updated_at": p.get("updated_at")}


def _reconciler_view(report: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if report is None:
        return None
    if report.get("missing"):
        return {"run_id": report.get("run_id"), "state": report.get("state"), "reconciled": False,
                "text": "not reconciled in the last sweep (unreachable or failed)"}
    restored = [r.get("run_id") for r in report.get("restored") or []]
    foreign = len(report.get("foreign") or [])
    parts = [f"restored the throttle of {', '.join(map(str, restored))}" if restored else "nothing to restore",
             f"{foreign} foreign throttle setting(s) left" if foreign else "",
             f"skipped: {report['skipped_reason']}" if report.get("skipped_reason") else ""]
    return {"run_id": report.get("run_id"), "reconciled": True, "restored": restored, "foreign": foreign,
            "leftovers": _leftover_settings(report), "text": "; ".join(p for p in parts if p)}


def fleet_row(facts: ClusterFacts) -> dict[str, Any]:
    """One row of the fleet page (JSON)."""
    s = facts.summary or {}
    last = facts.last_rebalance
    return {
        "conn_id": facts.conn_id, "cluster_id": facts.cluster_id, "status": status_word(facts),
        "balance": {"disk": current_balance(facts), "threshold": facts.balance_threshold,
                    "disk_before": s.get("balance_before"), "disk_after": s.get("balance_after"),
                    "leaders": s.get("leader_balance_before"), "replicas": s.get("replica_count_balance_before"),
                    "from_run": (facts.summary_run or {}).get("run_id")} if s else None,
        "in_flight": _in_flight_view(facts),
        "throttles": [{**t, "link": run_page(t["dag_id"], t["run_id"]) if t.get("dag_id") else None}
                      for t in facts.throttles],
        "reconciler": _reconciler_view(facts.reconciler),
        "last_rebalance": {**last, "link": run_page(last["dag_id"], last["run_id"])} if last else None,
        "rebalance_dag_id": facts.rebalance_dag_id,
    }


def record_facts(record: Mapping[str, Any], dag_id: str | None, run_active: bool) -> dict[str, Any]:
    """A throttle record as the page lists it: who set it, since when, how many settings.

    :param record: the record's JSON (``kafka_reassign.throttle.<run id>``)
    :param dag_id: the DAG of its run, when the run is among those read
    :param run_active: its run is still queued or running (its throttle is in use)
    """
    return {"run_id": record.get("run_id"), "dag_id": dag_id, "since": record.get("created_at"),
            "settings": len(record.get("changes") or []), "run_active": run_active,
            "pending": sorted((record.get("pending") or {}).keys())}


# -- reading the metadata DB (api-server side) ------------------------------------------

def fleet_entries() -> tuple[list[FleetEntry], bool]:
    """The fleet's entries (and whether a fleet is configured), read as the DAG files read it.

    The DAG files check every entry against Airflow when they parse (and show a bad config as
    an import error); the page only lists the clusters, so nothing is asked of Airflow here.
    """
    from airflow.configuration import conf
    from airflow.models.variable import Variable as VariableModel

    from kafka_reassign_airflow.fleet import DEFAULT_CONN_ID, FLEET_VARIABLE

    text = VariableModel.get(FLEET_VARIABLE, default_var=None)
    if text is None or not str(text).strip():
        text = conf.get("kafka_reassign", "fleet", fallback="").strip()
    if not text:
        return [FleetEntry(DEFAULT_CONN_ID)], False
    listing = FleetChecks(connection_exists=lambda _c: True, schedule_problem=lambda _s: None,
                          bootstrap_of=lambda _c: None)
    return parse_fleet(str(text), listing, source="fleet config"), True


def _decode_key(text: str) -> str:
    """Undo the Variable keys' escaping of unsafe characters (``~3A`` for ``:``)."""
    return re.sub(r"~([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)), text)


def _json_or_none(raw: Any) -> Any:
    if raw is None or not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return None


def unrestored_records(session: Any) -> list[dict[str, Any]]:
    """Every unrestored throttle record (cordon records are held on purpose: not listed)."""
    from sqlalchemy import select

    from airflow.models.variable import Variable as VariableModel
    from kafka_reassign.throttle.record import CORDON_RECORD_PREFIX

    from kafka_reassign_airflow.record_store import THROTTLE_PREFIX

    rows = session.scalars(select(VariableModel).where(VariableModel.key.startswith(THROTTLE_PREFIX))).all()
    records = [_json_or_none(r.val) for r in rows]
    return [r for r in records if isinstance(r, dict) and not r.get("restored")
            and not str(r.get("run_id", "")).startswith(CORDON_RECORD_PREFIX)]


def cluster_locks(session: Any) -> list[dict[str, Any]]:
    """Every cluster lock: {cluster_id, dag_id, run_id, since}."""
    from sqlalchemy import select

    from airflow.models.variable import Variable as VariableModel

    from kafka_reassign_airflow.record_store import LOCK_PREFIX

    rows = session.scalars(select(VariableModel).where(VariableModel.key.startswith(LOCK_PREFIX))).all()
    out = []
    for row in rows:
        value = _json_or_none(row.val)
        if isinstance(value, dict):
            out.append({"cluster_id": _decode_key(row.key[len(LOCK_PREFIX):]), **value})
    return out


def saved_progress(run_id: str) -> dict[str, Any] | None:
    """The run's saved progress figures without its per-step rows."""
    from kafka_reassign_airflow.record_store import VariableExecutionStore

    saved = VariableExecutionStore().load(run_id)
    progress = _json_or_none(saved.get("progress")) if isinstance(saved, dict) else None
    if not isinstance(progress, dict):
        return None
    return {k: v for k, v in progress.items() if not isinstance(v, (list, dict))}


def runs_by_conn(runs: Iterable[Mapping[str, Any]], default_conn_id: str) -> dict[str, list[dict[str, Any]]]:
    """Runs grouped by the connection they act on (their conf's kafka_conn_id, a fleet rebalance
    DAG's own connection, else the default), most recent first."""
    from kafka_reassign_airflow.fleet import fleet_conn_id

    grouped: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        conn = run.get("conn_id") or fleet_conn_id(str(run["dag_id"])) or default_conn_id
        grouped.setdefault(str(conn), []).append(dict(run))
    return grouped


def _run_dict(row: Any) -> dict[str, Any]:
    state = row.state.value if hasattr(row.state, "value") else str(row.state)
    return {"dag_id": row.dag_id, "run_id": row.run_id, "state": state, "conn_id": row.conn_id,
            "start_date": row.start_date.isoformat() if row.start_date else None,
            "end_date": row.end_date.isoformat() if row.end_date else None}


def read_runs(session: Any, moving_dag_ids: list[str], rebalance_dag_ids: list[str],
              run_ids: Iterable[str]) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """(the runs that matter, the latest run of each rebalance DAG).

    The runs that matter: every queued or running run of the DAGs that move replicas, and the
    runs named by throttle records and locks. Only the conf's ``kafka_conn_id`` is read, not the
    conf (a kafka_reassign run's conf holds its whole plan).
    """
    from sqlalchemy import func, or_, select

    from airflow.models.dagrun import DagRun

    cols = (DagRun.dag_id, DagRun.run_id, DagRun.state, DagRun.start_date, DagRun.end_date,
            DagRun.conf["kafka_conn_id"].as_string().label("conn_id"))
    named = sorted(set(run_ids))
    wanted = [DagRun.state.in_(ACTIVE_STATES), *([DagRun.run_id.in_(named)] if named else [])]
    runs = [_run_dict(r) for r in session.execute(
        select(*cols).where(DagRun.dag_id.in_(moving_dag_ids), or_(*wanted)).order_by(DagRun.run_after.desc()))]
    latest = (select(DagRun.dag_id, func.max(DagRun.run_after).label("at"))
              .where(DagRun.dag_id.in_(rebalance_dag_ids)).group_by(DagRun.dag_id).subquery())
    last = session.execute(select(*cols).join(latest, (DagRun.dag_id == latest.c.dag_id)
                                              & (DagRun.run_after == latest.c.at)))
    return runs, {r.dag_id: _run_dict(r) for r in last}


def read_summaries(session: Any, rebalance_dag_ids: list[str]) -> dict[str, tuple[dict[str, Any], str]]:
    """The latest plan summary each rebalance DAG stored: dag_id -> (summary, run_id)."""
    from sqlalchemy import func, select

    from airflow.models.xcom import XComModel

    latest = (select(XComModel.dag_id, func.max(XComModel.timestamp).label("at"))
              .where(XComModel.dag_id.in_(rebalance_dag_ids), XComModel.key == SUMMARY_XCOM_KEY)
              .group_by(XComModel.dag_id).subquery())
    rows = session.scalars(select(XComModel).join(latest, (XComModel.dag_id == latest.c.dag_id)
                                                  & (XComModel.timestamp == latest.c.at))
                           .where(XComModel.key == SUMMARY_XCOM_KEY)).all()
    out: dict[str, tuple[dict[str, Any], str]] = {}
    for row in rows:
        value = _json_or_none(XComModel.deserialize_value(row))
        if isinstance(value, dict):
            out[row.dag_id] = (value, row.run_id)
    return out


def read_reconciler(session: Any) -> dict[str, dict[str, Any]]:
    """The last finished sweep's report per connection; a connection it swept without a report
    (its task instance failed: unreachable) gets ``{"missing": True}``."""
    from sqlalchemy import select

    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel

    run = session.scalars(select(DagRun).where(DagRun.dag_id == RECONCILER_DAG_ID,
                                               DagRun.state.in_(("success", "failed")))
                          .order_by(DagRun.run_after.desc()).limit(1)).first()
    if run is None:
        return {}
    state = run.state.value if hasattr(run.state, "value") else str(run.state)
    where = (XComModel.dag_id == RECONCILER_DAG_ID, XComModel.run_id == run.run_id,
             XComModel.task_id == RECONCILE_TASK_ID)
    out: dict[str, dict[str, Any]] = {}
    for row in session.scalars(select(XComModel).where(*where)).all():
        value = _json_or_none(XComModel.deserialize_value(row))
        if isinstance(value, dict) and value.get("kafka_conn_id"):
            out[str(value["kafka_conn_id"])] = {**value, "run_id": run.run_id, "state": state}
    swept = session.scalars(select(TaskInstance).where(
        TaskInstance.dag_id == RECONCILER_DAG_ID, TaskInstance.run_id == run.run_id,
        TaskInstance.task_id == RECONCILE_TASK_ID)).all()
    for ti in swept:
        conn = ti.rendered_map_index
        if conn and conn not in out:
            out[conn] = {"missing": True, "run_id": run.run_id, "state": state}
    return out


@dataclass
class StoredState:
    """Everything one request reads, fleet-wide (then split per cluster by :func:`cluster_facts`)."""

    runs: list[dict[str, Any]]
    last_rebalance: dict[str, dict[str, Any]]
    summaries: dict[str, tuple[dict[str, Any], str]]
    reconciler: dict[str, dict[str, Any]]
    records: list[dict[str, Any]]
    locks: list[dict[str, Any]]


def cluster_facts(entry: FleetEntry, dag_id: str, runs: list[dict[str, Any]], stored: StoredState) -> ClusterFacts:
    """Tie the stored state to one cluster: by its runs (conf / DAG id), then by its cluster id.

    :param entry: the fleet entry
    :param dag_id: its rebalance DAG
    :param runs: the runs acting on its connection, most recent first
    """
    dag_of = {r["run_id"]: r["dag_id"] for r in runs}
    active = {r["run_id"] for r in runs if r["state"] in ACTIVE_STATES}
    report = stored.reconciler.get(entry.conn_id)
    ids = [report.get("cluster_id") if report else None,
           *(r.get("cluster_id") for r in stored.records if r.get("run_id") in dag_of),
           *(lk["cluster_id"] for lk in stored.locks if lk.get("run_id") in dag_of)]
    cluster_id = next((str(c) for c in ids if c), None)
    facts = ClusterFacts(conn_id=entry.conn_id, rebalance_dag_id=dag_id, cluster_id=cluster_id,
                         balance_threshold=entry.balance_threshold or DEFAULT_BALANCE_THRESHOLD,
                         last_rebalance=stored.last_rebalance.get(dag_id), reconciler=report)
    # The lock holder first: two queued runs of one cluster, only one of them moves.
    holders = {lk.get("run_id") for lk in stored.locks}
    moving = sorted((r for r in runs if r["run_id"] in active), key=lambda r: r["run_id"] not in holders)
    if moving:
        facts.in_flight = {k: moving[0][k] for k in ("dag_id", "run_id", "state", "start_date")}
        facts.progress = saved_progress(moving[0]["run_id"])
    summary = stored.summaries.get(dag_id)
    if summary is not None:
        facts.summary = summary[0]
        facts.summary_run = next((r for r in runs if r["run_id"] == summary[1]), {"run_id": summary[1]})
        if facts.last_rebalance and facts.last_rebalance["run_id"] == summary[1]:
            facts.summary_run = facts.last_rebalance
    facts.throttles = [record_facts(r, dag_of.get(r.get("run_id")), r.get("run_id") in active)
                       for r in stored.records
                       if r.get("run_id") in dag_of or (cluster_id and r.get("cluster_id") == cluster_id)]
    return facts


def collect_fleet() -> dict[str, Any]:
    """The fleet page's JSON: one row per cluster of the fleet, from the metadata DB only."""
    from airflow.utils.session import create_session

    from kafka_reassign_airflow.fleet import DEFAULT_CONN_ID, Fleet, rebalance_dag_id

    entries, configured = fleet_entries()
    fleet = Fleet(entries=tuple(entries), configured=configured)
    dag_ids = {e.conn_id: rebalance_dag_id(fleet, e) for e in entries}
    moving_dag_ids = sorted({"kafka_reassign", *dag_ids.values()})
    with create_session() as session:
        records, locks = unrestored_records(session), cluster_locks(session)
        runs, last = read_runs(session, moving_dag_ids, sorted(set(dag_ids.values())),
                               [str(r.get("run_id")) for r in records] + [str(lk.get("run_id")) for lk in locks])
        stored = StoredState(runs=runs, last_rebalance=last, records=records, locks=locks,
                             summaries=read_summaries(session, sorted(set(dag_ids.values()))),
                             reconciler=read_reconciler(session))
    by_conn = runs_by_conn(stored.runs, DEFAULT_CONN_ID)
    rows = [fleet_row(cluster_facts(e, dag_ids[e.conn_id], by_conn.get(e.conn_id, []), stored)) for e in entries]
    shown = {t["run_id"] for r in rows for t in r["throttles"]}
    # A record whose run and cluster id match no listed cluster (a cluster dropped from the fleet,
    # a run purged from the DB) is still a throttle on some brokers: listed apart, never hidden.
    elsewhere = [record_facts(r, None, False) | {"cluster_id": r.get("cluster_id")}
                 for r in records if r.get("run_id") not in shown]
    return {"configured": configured, "clusters": rows, "other_throttles": elsewhere,
            "counts": {w: sum(1 for r in rows if r["status"] == w)
                       for w in (MOVING, THROTTLE_LEFT, UNBALANCED, BALANCED, UNKNOWN)}}


def add_fleet_route(app: Any, authorize: Callable[[Any, str | None], Awaitable[None]]) -> None:
    """``GET /api/fleet`` on the plugin's FastAPI app.

    :param app: the plugin's FastAPI app
    :param authorize: (request, dag_id) -> raises unless the user may read the DAG's runs
    """
    import asyncio

    async def fleet(request: Request) -> JSONResponse:
        await authorize(request, None)
        try:
            view = await asyncio.to_thread(collect_fleet)
        except FleetConfigError as exc:  # the DAG files show the same error as an import error
            raise HTTPException(status_code=422, detail=f"the fleet config is invalid: {exc}")
        except Exception as exc:
            log.exception("fleet view failed")
            raise HTTPException(status_code=500, detail=f"cannot read the fleet's stored state: {exc}")
        return JSONResponse(view, headers={"Cache-Control": "no-store"})

    app.add_api_route("/api/fleet", fleet, methods=["GET"])
