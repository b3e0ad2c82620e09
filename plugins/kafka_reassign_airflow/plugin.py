"""Airflow 3 UI plugin: live progress of Kafka partition reassignments.

A FastAPI app mounted on the api-server under :data:`URL_PREFIX` serves

* ``/`` - a page (static files in ``ui/``) that refreshes itself every few seconds;
* ``/api/progress?dag_id=&run_id=&conn_id=`` - JSON: per batch and per partition bytes moved
  and left, rate, ETA, throttles per broker, partitions under min ISR;
* ``/api/runs`` - recent runs of the reassignment DAGs, for the page's run picker.

The page is registered in the Airflow UI as external views: one entry in the navigation
(cluster-wide: every reassignment in flight) and one tab on each DAG run (that run's
batches). Data come live from the cluster (ListPartitionReassignments, metadata ISR,
DescribeLogDirs, DescribeConfigs through :class:`KafkaAdminHook`) combined with the run's
batches (its XComs) by :func:`build_progress_view`, which has no Airflow dependency.

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
from kafka_reassign_airflow.links import PlanChartLink
from kafka_reassign_airflow.plan_view import load_plan_view, planned_files

log = logging.getLogger(__name__)

URL_PREFIX = "/kafka-reassign"
UI_DIR = Path(__file__).resolve().parent / "ui"
#: DAGs whose runs move replicas (their batches are shown per run).
REASSIGN_DAG_IDS = ("kafka_reassign", "kafka_rebalance")
DEFAULT_CONN_ID = "kafka_default"
#: XCom key under which the prepare task publishes the run's batches.
BATCHES_XCOM_KEY = "batches"

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


def in_flight_batch(in_flight: Mapping[tuple[str, int], Any], state: Any) -> Any:
    """A pseudo batch of every reassignment in flight (cluster-wide view, no run given)."""
    from kafka_reassign.steps import Batch, StepMove

    steps = []
    for (topic, partition), f in sorted(in_flight.items()):
        steps.append(StepMove(topic=topic, partition=partition, current=tuple(f.original),
                              target=tuple(f.target), size_bytes=state.size_of(topic, partition)))
    return Batch(index=0, steps=steps)


def build_progress_view(*, state: Any, in_flight: Mapping[tuple[str, int], Any], log_dirs: list[Any],
                        configs: Mapping[tuple[str, str], Mapping[str, str | None]],
                        batches: list[Any] | None, previous: Mapping[int, Any] | None = None,
                        now: float | None = None, own_changes: Iterable[Any] = ()) -> tuple[dict[str, Any], dict[int, Any]]:
    """Assemble what the page shows from one consistent read of the cluster.

    :param state: ClusterState now
    :param in_flight: ListPartitionReassignments now
    :param log_dirs: DescribeLogDirs rows of the partitions shown
    :param configs: DescribeConfigs of every broker (throttle keys)
    :param batches: the run's batches, or None for the cluster-wide view (in-flight moves)
    :param previous: BatchProgress by batch index from the previous call (for rates)
    :param now: poll time in seconds (default time.time())
    :param own_changes: ConfigChanges recorded by the run (throttle "set by")
    :returns: (JSON view, BatchProgress by batch index to pass as ``previous`` next time)
    """
    from kafka_reassign.progress import BatchProgress

    now = time.time() if now is None else now
    previous = previous or {}
    run_batches = list(batches) if batches is not None else [in_flight_batch(in_flight, state)]
    progress = {b.index: BatchProgress.build(b, in_flight, state, log_dirs, previous=previous.get(b.index), now=now)
                for b in run_batches}

    # Batch state. Kafka only tells us about the present, so order decides: every batch
    # before the one in flight is done (later batches may have moved its partitions on).
    flying = [b.index for b in run_batches if any(s.key in in_flight for s in b.steps)]
    current = max(flying) if flying else None
    finished_upto = max([b.index for b in run_batches if progress[b.index].done] or [-1])
    batch_rows, partition_rows = [], []
    total_bytes = moved_bytes = left_bytes = 0
    rate = 0.0
    rate_known = False
    for b in run_batches:
        prog = progress[b.index]
        if current is not None:
            bstate = "done" if b.index < current else "running" if b.index == current else "pending"
        else:
            bstate = "done" if b.index <= finished_upto else "pending"
        if batches is None:
            bstate = "running" if flying else "done"
        b_total = max(prog.bytes_total, sum(s.bytes_to_copy for s in b.steps))
        b_left = 0 if bstate == "done" else (prog.bytes_left if bstate == "running" else b_total)
        b_moved = max(0, b_total - b_left)
        total_bytes += b_total
        moved_bytes += b_moved
        left_bytes += b_left
        if bstate == "running" and prog.rate_bytes_per_sec is not None:
            rate += prog.rate_bytes_per_sec
            rate_known = True
        batch_rows.append({"index": b.index, "state": bstate, "partitions": len(b.steps),
                           "bytes_total": b_total, "bytes_moved": b_moved, "bytes_left": b_left,
                           "rate_bytes_per_sec": prog.rate_bytes_per_sec if bstate == "running" else None,
                           "eta_seconds": prog.eta_seconds if bstate == "running" else None})
        rows_by_tp: dict[tuple[str, int], list[Any]] = {}
        for r in prog.rows:
            rows_by_tp.setdefault((r.topic, r.partition), []).append(r)
        for s in b.steps:
            p = state.partition(s.topic, s.partition)
            rows = rows_by_tp.get(s.key, [])
            moving = [r for r in rows if r.role in ("adding", "log-dir", "removing")]
            p_total = max(sum(r.bytes_total for r in rows), s.bytes_to_copy)
            p_left = sum(r.bytes_behind for r in rows)
            under = p is not None and len(p.isr) < state.min_isr(s.topic)
            if bstate == "done":
                status, p_left = "Done", 0
            elif bstate == "pending":
                status, p_left = f"Waiting for batch {b.index}", p_total
            elif s.name in prog.done_partitions:
                status, p_left = "Done", 0
            elif s.key in in_flight:
                status = "Moving"
            else:
                status = "Starting"
            if under:
                status += " · under min ISR"
            partition_rows.append({
                "topic": s.topic, "partition": s.partition, "batch": b.index if batches is not None else None,
                "step": f"{s.step_index + 1}/{s.step_count}", "status": status,
                "current": list(s.current), "target": list(s.target),
                "isr": list(p.isr) if p is not None else [], "leader": p.leader if p is not None else -1,
                "min_isr": state.min_isr(s.topic), "under_min_isr": under, "in_flight": s.key in in_flight,
                "bytes_total": p_total, "bytes_left": p_left, "bytes_moved": max(0, p_total - p_left),
                "replicas": [{"broker": r.broker, "role": r.role, "status": r.status_text,
                              "bytes_left": r.bytes_behind} for r in moving] if bstate == "running" else [],
            })
    # No ETA when nothing is moving: "0 s" would read as "about to finish".
    eta = (left_bytes / rate) if rate_known and rate > 0 else (0.0 if left_bytes == 0 and total_bytes else None)
    view = {
        "generated_at": datetime.fromtimestamp(now, tz=timezone.utc).isoformat(),
        "cluster_id": state.cluster_id,
        "summary": {
            "partitions_total": len(partition_rows),
            "partitions_in_flight": sum(1 for r in partition_rows if r["in_flight"]),
            "partitions_done": sum(1 for r in partition_rows if r["status"].startswith("Done")),
            "bytes_total": total_bytes, "bytes_moved": moved_bytes, "bytes_left": left_bytes,
            "rate_bytes_per_sec": rate if rate_known else None, "eta_seconds": eta,
            "batches_total": len(batch_rows) if batches is not None else 0,
            "current_batch": current if current is not None else (None if batches is None else finished_upto),
            "in_flight_cluster_wide": len(in_flight),
        },
        "batches": batch_rows if batches is not None else [],
        "partitions": partition_rows,
        "throttles": throttles_view(configs, own_changes if batches is not None else None),
        "under_min_isr": under_min_isr_view(state),
        "warnings": [],
    }
    return view, progress


# -- Airflow glue (api-server side) ------------------------------------------------------

class _ProgressMemory:
    """The previous poll per (conn, dag, run), so each refresh can report a rate."""

    def __init__(self, max_entries: int = 64) -> None:
        self._lock = threading.Lock()
        self._data: dict[tuple[str, str | None, str | None], tuple[float, dict[int, Any]]] = {}
        self.max_entries = max_entries

    def get(self, key: tuple[str, str | None, str | None]) -> dict[int, Any] | None:
        with self._lock:
            item = self._data.get(key)
            return item[1] if item else None

    def put(self, key: tuple[str, str | None, str | None], progress: dict[int, Any]) -> None:
        with self._lock:
            self._data[key] = (time.time(), progress)
            if len(self._data) > self.max_entries:
                oldest = min(self._data, key=lambda k: self._data[k][0])
                self._data.pop(oldest, None)


_MEMORY = _ProgressMemory()


def _find_batches(values: Iterable[Any]) -> list[Any] | None:
    """The run's batches from its XCom values: a list of Batch JSON, or {"batches": [...]}."""
    from kafka_reassign.steps import Batch

    def as_batches(v: Any) -> list[Any] | None:
        if isinstance(v, dict) and isinstance(v.get("batches"), list):
            v = v["batches"]
        if isinstance(v, list) and v and all(isinstance(b, dict) and "index" in b and "steps" in b for b in v):
            return [Batch.from_json(b) for b in v]
        return None

    for value in values:
        found = as_batches(value)
        if found is not None:
            return sorted(found, key=lambda b: b.index)
    return None


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
        # The prepare task pushes the batches under the key "batches"; look there first.
        for row in sorted(rows, key=lambda r: r.key != BATCHES_XCOM_KEY):
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
        rows = session.scalars(select(DagRun).where(DagRun.dag_id.in_(REASSIGN_DAG_IDS))
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
    """Read the cluster (and the run) and build the view. Blocking: call it in a thread.

    :param conn_id: Kafka connection id (the run's kafka_conn_id when a run is given)
    :param dag_id: DAG of the run to show, or None for the cluster-wide view
    :param run_id: run to show, or None
    """
    from kafka_reassign_airflow.hooks.kafka_admin import KafkaAdminHook

    run = _run_info(dag_id, run_id) if dag_id and run_id else None
    if dag_id and run_id and run is None:
        raise LookupError(f"no run {run_id!r} of DAG {dag_id!r}")
    batches = _find_batches(run["xcoms"]) if run else None
    admin = KafkaAdminHook(kafka_config_id=conn_id).get_admin()
    try:
        state = admin.cluster_state(include_log_dirs=False)
        in_flight = state.in_flight if state.in_flight is not None else admin.list_partition_reassignments()
        shown = batches if batches is not None else []
        tps = {s.key for b in shown for s in b.steps} | set(in_flight)
        log_dirs = admin.describe_log_dirs(None, sorted(tps)) if tps else []
        configs = admin.describe_configs(sorted(state.alive_brokers), [], keys=_BROKER_THROTTLE_KEYS)
    finally:
        admin.close()
    key = (conn_id, dag_id, run_id)
    view, progress = build_progress_view(
        state=state, in_flight=in_flight, log_dirs=log_dirs, configs=configs,
        batches=batches if run else None, previous=_MEMORY.get(key),
        own_changes=_own_changes(run_id) if run_id else ())
    _MEMORY.put(key, progress)
    view["conn_id"] = conn_id
    view["run"] = {k: v for k, v in run.items() if k not in ("xcoms", "conf")} if run else None
    view["plan"] = load_plan_view(planned_files(run["xcoms"])) if run else None
    if run and batches is None:
        finished = run.get("state") in ("success", "failed")
        view["warnings"].append("This run moved nothing: it stopped before the reassignment or was a dry run."
                                if finished else "This run has not computed its batches yet: showing nothing "
                                                 "per batch.")
    if not run and dag_id is None and in_flight:
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
            conn_id = str(info["conf"].get("kafka_conn_id") or DEFAULT_CONN_ID)  # type: ignore[index]
        try:
            view = await asyncio.to_thread(collect_progress, conn_id or DEFAULT_CONN_ID, dag_id, run_id)
        except LookupError as exc:
            raise HTTPException(status_code=404, detail=str(exc))
        except Exception as exc:  # Kafka unreachable, bad connection: say so, keep the page alive
            log.warning("progress for %s/%s failed: %s", dag_id, run_id, exc)
            raise HTTPException(status_code=502, detail=f"cannot read the Kafka cluster: {exc}")
        return JSONResponse(view, headers={"Cache-Control": "no-store"})

    _add_plan_and_cluster_routes(app)

    @app.get("/api/runs")
    async def runs(request: Request) -> JSONResponse:
        await _authorize(request, None)
        return JSONResponse({"runs": await asyncio.to_thread(_recent_runs)})

    return app


class KafkaReassignPlugin(AirflowPlugin):
    """Registers the progress page with the api-server and the Airflow UI."""

    name = "kafka_reassign"
    operator_extra_links = [PlanChartLink()]
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
