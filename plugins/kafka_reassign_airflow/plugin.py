"""Airflow 3 UI plugin: live progress of Kafka partition reassignments.

A FastAPI app mounted on the api-server under :data:`URL_PREFIX` serves

* ``/`` - a page (static files in ``ui/``) that refreshes itself every few seconds;
* ``/api/progress?dag_id=&run_id=&conn_id=`` - JSON: steps done / in flight / queued, per
  partition bytes moved and left, rate, ETA, throttles per broker, partitions under min ISR;
* ``/api/runs`` - recent runs of the reassignment DAGs, for the page's run picker.
* ``/api/fleet`` - one row per cluster of the fleet, from stored state only
  (:mod:`kafka_reassign_airflow.fleet_view`).

The page is registered in the Airflow UI as external views: one entry in the navigation
(cluster-wide: every reassignment in flight) and one tab on each DAG run (that run's
progress). A run's progress is what its execute task saved after its last poll (the
executor's :class:`~kafka_reassign.execution.progress.ProgressView`), made live for the steps in
flight (ListPartitionReassignments, DescribeLogDirs) and completed with the cluster's ISR and
throttles (DescribeConfigs through :class:`KafkaAdminHook`) by :func:`build_progress_view`,
which has no Airflow dependency.

Auth: the JSON endpoints require a user allowed to read the DAG's runs - the Airflow UI
session cookie inside the UI, or ``Authorization: Bearer <token>`` (from ``POST /auth/token``).
The page shell itself holds no data.
"""
from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

from airflow.plugins_manager import AirflowPlugin
# At module level: FastAPI resolves the (string) annotations of the routes from these globals.
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse

from kafka_reassign_airflow.conf_check import TriggerConfMiddleware, may_access_runs
from kafka_reassign_airflow.fleet_view import add_fleet_route
from kafka_reassign_airflow.links import PlanChartLink
from kafka_reassign_airflow.plan_view import load_plan_view, planned_files

log = logging.getLogger(__name__)

URL_PREFIX = "/kafka-reassign"
UI_DIR = Path(__file__).resolve().parent / "ui"
#: DAGs whose runs move replicas (their progress is shown per run).
REASSIGN_DAG_IDS = ("kafka_reassign", "kafka_rebalance")
DEFAULT_CONN_ID = "kafka_default"

_BROKER_THROTTLE_KEYS = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
)
_TOPIC_THROTTLE_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


# -- the view model (no Airflow) ---------------------------------------------------------

def _int_or_none(v: str | None) -> int | None:
    try:
        return int(float(v)) if v not in (None, "") else None
    except ValueError:
        return None


def throttles_view(configs: Mapping[tuple[str, str], Mapping[str, str | None]],
                   own_changes: Iterable[Any] | None = ()) -> list[dict[str, Any]]:
    """Rows of the per-broker throttle table.

    :param configs: DescribeConfigs result ((resource_type, name) -> {key: value})
    :param own_changes: ConfigChanges the shown run recorded (to say who set a value);
        None when no run is shown (then nobody is named)
    """
    no_run = own_changes is None
    own_changes = own_changes or ()
    ours = {(c.resource_type, c.name, c.key): c.value for c in own_changes}
    rows = []
    for (rtype, name), values in sorted(configs.items(), key=lambda kv: (kv[0][0], int(kv[0][1]) if kv[0][1].isdigit() else 0)):
        if rtype != "broker":
            continue
        set_keys = {k: values.get(k) for k in _BROKER_THROTTLE_KEYS if values.get(k) not in (None, "")}
        if not set_keys:
            continue
        mine = [k for k, v in set_keys.items() if ours.get(("broker", name, k)) == v]
        set_by = ("–" if no_run else "this run" if len(mine) == len(set_keys)
                  else "this run + others" if mine else "not this run")
        rows.append({
            "broker": int(name) if name.isdigit() else name,
            "leader_rate": _int_or_none(set_keys.get(_BROKER_THROTTLE_KEYS[0])),
            "follower_rate": _int_or_none(set_keys.get(_BROKER_THROTTLE_KEYS[1])),
            "log_dir_rate": _int_or_none(set_keys.get(_BROKER_THROTTLE_KEYS[2])),
            "set_by": set_by,
        })
    return rows


def under_min_isr_view(state: Any) -> list[dict[str, Any]]:
    """Every partition of the cluster with fewer in-sync replicas than min.insync.replicas."""
    out = []
    for p in state.partitions():
        min_isr = state.min_isr(p.topic)
        if len(p.isr) < min_isr:
            out.append({"topic": p.topic, "partition": p.partition, "isr": list(p.isr),
                        "replicas": list(p.replicas), "min_isr": min_isr, "leader": p.leader})
    return sorted(out, key=lambda r: (r["topic"], r["partition"]))


def in_flight_steps(in_flight: Mapping[tuple[str, int], Any], state: Any) -> list[Any]:
    """Every reassignment in flight as a step (cluster-wide view, no run given)."""
    from kafka_reassign.execution.steps import StepMove

    return [StepMove(topic=t, partition=p, current=tuple(f.original), target=tuple(f.target),
                     size_bytes=state.size_of(t, p)) for (t, p), f in sorted(in_flight.items())]


def _partition_row(step: Any, status: str, state: Any, live: Any, saved_row: Any = None) -> dict[str, Any]:
    """One row of the partitions table; bytes from the live read when the step is in flight."""
    p = state.partition(step.topic, step.partition)
    under = p is not None and len(p.isr) < state.min_isr(step.topic)
    total = live.bytes_total if live is not None else (saved_row.bytes_total if saved_row else step.bytes_to_copy)
    left = live.bytes_left if live is not None else (saved_row.bytes_left if saved_row else 0)
    replicas = [{"broker": b, "role": "adding", "status": f"Behind {n} bytes", "bytes_left": n}
                for b, n in (live.lagging if live is not None else [])]
    return {"topic": step.topic, "partition": step.partition, "step": f"{step.step_index + 1}/{step.step_count}",
            "status": status + (" · under min ISR" if under else ""), "current": list(step.current),
            "target": list(step.target), "isr": list(p.isr) if p is not None else [],
            "leader": p.leader if p is not None else -1, "min_isr": state.min_isr(step.topic), "under_min_isr": under,
            "in_flight": live is not None and live.in_flight, "bytes_total": total, "bytes_left": left,
            "bytes_moved": max(0, total - left), "replicas": replicas,
            "message": saved_row.message if saved_row is not None else ""}


def build_progress_view(*, state: Any, cluster: Any, configs: Mapping[tuple[str, str], Mapping[str, str | None]],
                        progress: Any = None, now: float | None = None,
                        own_changes: Iterable[Any] | None = None) -> dict[str, Any]:
    """Assemble what the page shows: a run's saved progress (or every move in flight), made live.

    :param state: ClusterState now (ISR, min ISR, sizes)
    :param cluster: :class:`kafka_reassign.execution.cluster_io.ClusterView` of the steps shown
    :param configs: DescribeConfigs of every broker (throttle keys)
    :param progress: the run's saved :class:`~kafka_reassign.execution.progress.ProgressView`, or None
        for the cluster-wide view
    :param own_changes: ConfigChanges recorded by the run (throttle "set by"); None = no run
    """
    from kafka_reassign.execution.cluster_io import observe
    from kafka_reassign.execution.steps import StepMove

    now = time.time() if now is None else now
    rows = []
    if progress is not None:
        for r in progress.rows:
            topic, _, part = r.name.rpartition("-")
            idx, count = (int(x) for x in r.step.split("/"))
            step = StepMove(topic, int(part), tuple(r.current), tuple(r.target), step_index=idx - 1, step_count=count)
            live = observe(step, cluster) if r.status == "in_flight" else None
            status = {"in_flight": "Moving", "done": "Done"}.get(r.status, r.status.replace("_", " ").capitalize())
            rows.append(_partition_row(step, status, state, live, r))
        summary = {"outcome": progress.outcome, "message": progress.message,
                   "steps_total": progress.steps_total, "steps_done": progress.steps_done,
                   "steps_in_flight": progress.steps_in_flight, "steps_queued": progress.steps_queued,
                   "partitions_total": progress.partitions_total, "partitions_done": progress.partitions_done,
                   "partitions_in_flight": progress.steps_in_flight, "bytes_total": progress.bytes_total,
                   "bytes_moved": progress.bytes_moved, "bytes_left": progress.bytes_left,
                   "rate_bytes_per_sec": progress.rate_bytes_per_sec, "eta_seconds": progress.eta_seconds,
                   "updated_at": progress.updated_at, "caps": progress.caps_line() if progress.cap_change else None,
                   "throttle": progress.throttle_line() if progress.throttle_change else None,
                   "held": progress.held if not progress.finished else ""}
    else:
        for step in in_flight_steps(cluster.in_flight, state):
            rows.append(_partition_row(step, "Moving", state, observe(step, cluster)))
        total, left = sum(r["bytes_total"] for r in rows), sum(r["bytes_left"] for r in rows)
        summary = {"partitions_total": len(rows), "partitions_in_flight": len(rows), "partitions_done": 0,
                   "bytes_total": total, "bytes_moved": total - left, "bytes_left": left,
                   "rate_bytes_per_sec": None, "eta_seconds": None}
    summary["in_flight_cluster_wide"] = len(cluster.in_flight)
    return {"generated_at": datetime.fromtimestamp(now, tz=timezone.utc).isoformat(), "cluster_id": state.cluster_id,
            "summary": summary, "partitions": rows, "throttles": throttles_view(configs, own_changes),
            "under_min_isr": under_min_isr_view(state), "warnings": []}


# -- Airflow glue (api-server side) ------------------------------------------------------

class _LastLeft:
    """The cluster-wide view's previous bytes left per connection, for a rate between refreshes
    (a run's rate comes from its saved progress)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, tuple[float, int]] = {}

    def rate(self, conn_id: str, summary: dict[str, Any]) -> None:
        now, left = time.time(), int(summary["bytes_left"])
        with self._lock:
            before = self._last.get(conn_id)
            self._last[conn_id] = (now, left)
        if before is not None and now > before[0] and before[1] > left:
            summary["rate_bytes_per_sec"] = (before[1] - left) / (now - before[0])
            summary["eta_seconds"] = left / summary["rate_bytes_per_sec"]


_LAST_LEFT = _LastLeft()


def _run_info(dag_id: str, run_id: str) -> dict[str, Any] | None:
    """The DagRun (state, conf) and its XCom values, read from the metadata DB."""
    from sqlalchemy import select

    from airflow.models.dagrun import DagRun
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        dr = session.scalars(select(DagRun).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id)).first()
        if dr is None:
            return None
        rows = session.scalars(select(XComModel).where(XComModel.dag_id == dag_id, XComModel.run_id == run_id)
                               .order_by(XComModel.timestamp.desc())).all()
        values = []
        for row in rows:
            try:
                values.append(XComModel.deserialize_value(row))
            except Exception:  # a value we cannot read is not ours to show
                continue
        state = dr.state.value if hasattr(dr.state, "value") else str(dr.state)
        return {"dag_id": dag_id, "run_id": run_id, "state": state, "conf": dict(dr.conf or {}),
                "start_date": dr.start_date.isoformat() if dr.start_date else None, "xcoms": values}


def _recent_runs(limit: int = 20) -> list[dict[str, Any]]:
    from sqlalchemy import select

    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        # The fleet's rebalance DAGs are kafka_rebalance__<conn_id>, one per cluster.
        moving = DagRun.dag_id.in_(REASSIGN_DAG_IDS) | DagRun.dag_id.startswith("kafka_rebalance__")
        rows = session.scalars(select(DagRun).where(moving)
                               .order_by(DagRun.run_after.desc()).limit(limit)).all()
        return [{"dag_id": r.dag_id, "run_id": r.run_id,
                 "state": r.state.value if hasattr(r.state, "value") else str(r.state)} for r in rows]


def _kafka_connections() -> list[str]:
    """Ids of the Kafka connections in the metadata DB (the page's cluster picker)."""
    from sqlalchemy import select

    from airflow.models.connection import Connection
    from airflow.utils.session import create_session

    import json
    import os

    with create_session() as session:
        ids = set(session.scalars(select(Connection.conn_id).where(
            Connection.conn_type.in_(("kafka", "kafka_reassign")))).all())
    for key, value in os.environ.items():  # connections defined as AIRFLOW_CONN_<ID> (JSON form)
        if key.startswith("AIRFLOW_CONN_") and value.lstrip().startswith("{"):
            try:
                if json.loads(value).get("conn_type") in ("kafka", "kafka_reassign"):
                    ids.add(key[len("AIRFLOW_CONN_"):].lower())
            except ValueError:
                continue
    return sorted(ids | {DEFAULT_CONN_ID})


def _own_changes(run_id: str) -> list[Any]:
    try:
        from kafka_reassign_airflow.record_store import VariableRecordStore

        rec = VariableRecordStore().get(run_id)
        return list(rec.changes) if rec is not None else []
    except Exception as exc:  # the record only labels throttles; never fail the view for it
        log.warning("cannot read the throttle record of %s: %s", run_id, exc)
        return []


def collect_progress(conn_id: str, dag_id: str | None, run_id: str | None) -> dict[str, Any]:
    """Read the run's saved progress and the cluster, and build the view. Blocking: call it in a thread.

    :param conn_id: Kafka connection id (the run's kafka_conn_id when a run is given)
    :param dag_id: DAG of the run to show, or None for the cluster-wide view
    :param run_id: run to show, or None
    """
    from kafka_reassign.execution.cluster_io import read_cluster
    from kafka_reassign.execution.progress import ProgressView
    from kafka_reassign.rehearsal.report import estimate_view
    from kafka_reassign.execution.steps import StepMove

    from kafka_reassign_airflow.hooks.kafka_admin import KafkaAdminHook
    from kafka_reassign_airflow.record_store import VariableExecutionStore

    run = _run_info(dag_id, run_id) if dag_id and run_id else None
    if dag_id and run_id and run is None:
        raise LookupError(f"no run {run_id!r} of DAG {dag_id!r}")
    saved = VariableExecutionStore().load(run_id) if run else None
    progress = ProgressView.from_json(saved["progress"]) if saved and saved.get("progress") else None
    admin = KafkaAdminHook(kafka_config_id=conn_id).get_admin()
    try:
        state = admin.cluster_state(include_log_dirs=False)
        if progress is not None:
            shown = [StepMove(r.name.rpartition("-")[0], int(r.name.rpartition("-")[2]), tuple(r.current),
                              tuple(r.target)) for r in progress.rows if r.status == "in_flight"]
        else:
            shown = in_flight_steps(state.in_flight, state) if not run else []
        cluster = read_cluster(admin, shown)
        configs = admin.describe_configs(sorted(state.alive_brokers), [], keys=_BROKER_THROTTLE_KEYS)
    finally:
        admin.close()
    view = build_progress_view(state=state, cluster=cluster, configs=configs, progress=progress,
                               own_changes=_own_changes(run_id) if run_id else None)
    if progress is None:
        _LAST_LEFT.rate(conn_id, view["summary"])
    view["conn_id"] = conn_id
    view["run"] = {k: v for k, v in run.items() if k not in ("xcoms", "conf")} if run else None
    if run and run_id:
        from kafka_reassign_airflow.pause import is_paused

        view["run"]["paused"] = is_paused(run_id)
    view["plan"] = load_plan_view(planned_files(run["xcoms"])) if run else None
    view["estimate"] = estimate_view(run["xcoms"]) if run else None
    if run and progress is None:
        finished = run.get("state") in ("success", "failed")
        view["warnings"].append("This run moved nothing: it stopped before the reassignment or was a dry run."
                                if finished else "This run has not started moving yet: nothing to show.")
    if not run and dag_id is None and state.in_flight:
        view["warnings"].append("Cluster-wide view: every reassignment in flight, whoever started it.")
    return view


async def _authorize(request: Request, dag_id: str | None) -> None:
    """Allow users who may read this DAG's runs (cookie in the UI, bearer token elsewhere)."""
    if not await may_access_runs(request, dag_id, "GET"):
        raise HTTPException(status_code=403, detail="not allowed to read this DAG's runs")


def _add_plan_and_cluster_routes(app: FastAPI) -> None:
    """``/api/chart`` (the run's before/after chart) and ``/api/connections`` (cluster picker)."""
    import asyncio

    @app.get("/api/chart")
    async def chart(request: Request, dag_id: str, run_id: str) -> FileResponse:
        await _authorize(request, dag_id)
        info = await asyncio.to_thread(_run_info, dag_id, run_id.replace(" ", "+"))
        files = planned_files(info["xcoms"]) if info else None
        path = Path(files["chart_file"]) if files and files.get("chart_file") else None
        # Only the chart the run's plan task named, and only a PNG of the planner's naming.
        if path is None or not path.name.endswith(".chart.png") or not path.is_file():
            raise HTTPException(status_code=404, detail="this run has no plan chart")
        return FileResponse(path, media_type="image/png", headers={"Cache-Control": "no-store"})

    @app.get("/api/connections")
    async def connections(request: Request) -> JSONResponse:
        await _authorize(request, None)
        return JSONResponse({"connections": await asyncio.to_thread(_kafka_connections)})


def _add_pause_routes(app: FastAPI) -> None:
    """``POST /api/pause`` and ``/api/resume`` (the page's buttons): set or delete the run's pause
    Variable (:mod:`kafka_reassign_airflow.pause`), for users who may edit the DAG's runs."""
    import asyncio

    from kafka_reassign_airflow import pause as run_pause

    async def act(request: Request, dag_id: str, run_id: str, paused: bool) -> JSONResponse:
        if not await may_access_runs(request, dag_id, "PUT"):
            raise HTTPException(status_code=403, detail="not allowed to change this DAG's runs")
        if await asyncio.to_thread(_run_info, dag_id, run_id) is None:
            raise HTTPException(status_code=404, detail=f"no run {run_id!r} of DAG {dag_id!r}")
        if paused:
            await asyncio.to_thread(run_pause.pause, run_id, "progress page")
        else:
            await asyncio.to_thread(run_pause.resume, run_id)
        return JSONResponse({"dag_id": dag_id, "run_id": run_id, "paused": paused,
                             "variable": run_pause.pause_key(run_id)})

    @app.post("/api/pause")
    async def pause(request: Request, dag_id: str, run_id: str) -> JSONResponse:
        return await act(request, dag_id, run_id, True)

    @app.post("/api/resume")
    async def resume(request: Request, dag_id: str, run_id: str) -> JSONResponse:
        return await act(request, dag_id, run_id, False)


def create_app() -> FastAPI:
    """The FastAPI app the plugin mounts under :data:`URL_PREFIX`."""
    import asyncio

    from fastapi.staticfiles import StaticFiles

    app = FastAPI(title="Kafka reassignment progress", docs_url=None, redoc_url=None, openapi_url=None)
    app.mount("/static", StaticFiles(directory=str(UI_DIR)), name="kafka-reassign-static")

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(UI_DIR / "index.html", media_type="text/html",
                            headers={"Cache-Control": "no-store"})

    @app.get("/index.html", include_in_schema=False)
    async def page_alias(request: Request) -> RedirectResponse:
        return RedirectResponse(url=str(request.url).replace("/index.html", "/"))

    @app.get("/api/progress")
    async def progress(request: Request, dag_id: str | None = None, run_id: str | None = None,
                       conn_id: str | None = None) -> JSONResponse:
        if bool(dag_id) != bool(run_id):
            raise HTTPException(status_code=400, detail="give both dag_id and run_id, or neither")
        await _authorize(request, dag_id)
        if dag_id and run_id:
            info = await asyncio.to_thread(_run_info, dag_id, run_id)
            if info is None and " " in run_id:
                # A run id substituted unencoded into a URL ({RUN_ID} in the UI's link) turns its
                # '+' (from the timezone, e.g. manual__...+00:00) into a space.
                run_id = run_id.replace(" ", "+")
                info = await asyncio.to_thread(_run_info, dag_id, run_id)
            if info is None:
                raise HTTPException(status_code=404, detail=f"no run {run_id!r} of DAG {dag_id!r}")
        if conn_id is None and dag_id and run_id:
            from kafka_reassign_airflow.fleet import fleet_conn_id

            conn_id = str(info["conf"].get("kafka_conn_id")  # type: ignore[index]
                          or fleet_conn_id(dag_id) or DEFAULT_CONN_ID)
        try:
            view = await asyncio.to_thread(collect_progress, conn_id or DEFAULT_CONN_ID, dag_id, run_id)
        except LookupError as exc:
            raise HTTPException(status_code=404, detail=str(exc))
        except Exception as exc:  # Kafka unreachable, bad connection: say so, keep the page alive
            log.warning("progress for %s/%s failed: %s", dag_id, run_id, exc)
            raise HTTPException(status_code=502, detail=f"cannot read the Kafka cluster: {exc}")
        return JSONResponse(view, headers={"Cache-Control": "no-store"})

    _add_plan_and_cluster_routes(app)
    _add_pause_routes(app)
    add_fleet_route(app, _authorize)

    @app.get("/api/runs")
    async def runs(request: Request) -> JSONResponse:
        await _authorize(request, None)
        return JSONResponse({"runs": await asyncio.to_thread(_recent_runs)})

    return app


class KafkaReassignPlugin(AirflowPlugin):
    """Registers the progress page with the api-server and the Airflow UI."""

    name = "kafka_reassign"
    operator_extra_links = [PlanChartLink()]

    @classmethod
    def on_load(cls, *args: Any, **kwargs: Any) -> None:
        """Create the planning pool if missing: the scheduler never queues a task of a missing pool."""
        from kafka_reassign_airflow.fleet import ensure_planning_pool_quietly

        ensure_planning_pool_quietly()
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Kafka reassignment progress"}]
    # Checks a reassignment DAG's whole conf when a run is triggered (REST API and UI form).
    fastapi_root_middlewares = [{"middleware": TriggerConfMiddleware, "args": [], "kwargs": {},
                                 "name": "Kafka reassignment conf check"}]
    external_views = [
        {
            "name": "Kafka reassignment",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "category": "browse",
            "url_route": "kafka-reassignment",
        },
        {
            "name": "Kafka progress",
            "href": f"{URL_PREFIX}/?dag_id={{DAG_ID}}&run_id={{RUN_ID}}",
            "destination": "dag_run",
            "url_route": "kafka-reassignment-run",
        },
    ]
