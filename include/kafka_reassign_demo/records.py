"""What the narration reads while the DAG runs: the run's records, its planning files, the status line.

Everything here is read from another thread than dag.test's, straight from files (the SQLite
metadata DB, the planning directory) and the cluster's configs, never through Airflow's Task SDK.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from kafka_reassign.units import fmt_bytes, format_duration


class RunWatch:
    """The narration's status line: the run's phase, then the executor's own progress.

    While the moves run, the line is the :class:`~kafka_reassign.execution.progress.ProgressView`
    the execute task saves after every poll (the numbers the UI and ``kafka-reassign status``
    show). Before that, the phase is read from the planning files and the cluster's configs.

    :param cluster: the running :class:`kafka_sim.SimulatedCluster`
    :param before: its snapshot before the run
    :param files: the run's planning files (snapshot, plan)
    :param progress: returns the run's saved ProgressView, or None before the first poll
    """

    def __init__(self, cluster: Any, before: dict[str, Any], files: "PlanningFiles",
                 progress: Callable[[], Any]) -> None:
        self.cluster, self.files, self.progress = cluster, files, progress
        self.before = {(t["name"], p["partition"]): p for t in before["topics"] for p in t["partitions"]}
        self.brokers = sorted({b for p in self.before.values() for b in p["replicas"]})
        self._seen: tuple[float, int] | None = None   # (time, bytes moved) of the first view

    def _with_rate(self, view: Any) -> Any:
        """Fill in the rate and ETA, from the bytes moved since the first view, when the view has none."""
        now = time.time()
        if self._seen is None:
            self._seen = (now, view.bytes_moved)
        elif view.rate_bytes_per_sec is None and now > self._seen[0] and view.bytes_moved > self._seen[1]:
            view.rate_bytes_per_sec = (view.bytes_moved - self._seen[1]) / (now - self._seen[0])
            view.eta_seconds = view.bytes_left / view.rate_bytes_per_sec
        return view

    def __call__(self) -> str:
        try:
            view = self.progress()
        except Exception:  # the metadata DB is busy (SQLite): say what the cluster shows instead
            view = None
        if view is not None and view.steps_total:
            if not view.finished:
                return "moving: " + self._with_rate(view).summary()
            return (f"moves {view.outcome.replace('_', ' ')}: {view.steps_done}/{view.steps_total} steps done; "
                    "restoring the throttles and checking the result")
        throttled = any("follower.replication.throttled.rate" in self.cluster.broker_configs(b) for b in self.brokers)
        if throttled:
            return "throttle set (prior values recorded first); submitting the first moves"
        plan = self.files.plan()
        if plan:
            copy = sum(self.before[(e["topic"], e["partition"])].get("size_bytes", 0)
                       * len(set(e["replicas"]) - set(self.before[(e["topic"], e["partition"])]["replicas"]))
                       for e in plan.get("partitions", []) if (e["topic"], e["partition"]) in self.before)
            return (f"plan ready: {len(plan.get('partitions', []))} partition moves, {fmt_bytes(copy)} to copy; "
                    "validating it against the cluster")
        taken = self.files.snapshot_taken_at()
        if taken is None:
            return "reading the cluster (snapshot task)"
        return f"planning the rebalance on Spark (local[2]) for {format_duration(time.time() - taken)}"


class RunRecords:
    """What the run saved in the demo's SQLite metadata DB, read-only: its progress and estimate.

    Read straight from the file: the narration runs in its own thread and must not use
    Airflow's Task SDK, which belongs to the task dag.test is running.

    :param db: the SQLite metadata DB
    :param dag_id: the DAG whose newest run (started after ``since``) is read
    """

    def __init__(self, db: Path, dag_id: str, since: float) -> None:
        from datetime import datetime, timezone

        self.db, self.dag_id = db, dag_id
        self.since = datetime.fromtimestamp(since, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        self.run_id: str | None = None

    def _json(self, sql: str, key: str) -> Any:
        """``sql``'s one JSON value for (``key``, the run), or None before the run exists."""
        import sqlite3

        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=0.5) as con:
            if self.run_id is None:
                row = con.execute("SELECT run_id FROM dag_run WHERE dag_id = ? AND start_date >= ? "
                                  "ORDER BY start_date DESC LIMIT 1", (self.dag_id, self.since)).fetchone()
                if row is None:
                    return None
                self.run_id = row[0]
            row = con.execute(sql, (key(self.run_id) if callable(key) else key, self.run_id)).fetchone()
        return json.loads(row[0]) if row else None

    def progress(self) -> Any:
        """The ProgressView the execute task saved last, or None."""
        from kafka_reassign.execution.progress import ProgressView
        from kafka_reassign_airflow.record_store import VariableExecutionStore

        saved = self._json("SELECT val FROM variable WHERE key = ? AND ? IS NOT NULL",
                           VariableExecutionStore().key_for)
        return ProgressView.from_json(saved["progress"]) if saved and saved.get("progress") else None

    def estimate_seconds(self) -> float | None:
        """The moving time the prepare task estimated, or None."""
        summary = self._json("SELECT value FROM xcom WHERE task_id = 'prepare' AND key = ? AND run_id = ?",
                             "return_value")
        return (summary or {}).get("estimated_seconds")


class PlanningFiles:
    """The run's planning directory as the planning tasks fill it (snapshot, then the plan).

    :param work_dir: ``[kafka_reassign] work_dir`` (the demo's ``<AIRFLOW_HOME>/kafka_reassign``)
    :param given: the plan given in the run's conf (no planning), or None
    """

    def __init__(self, work_dir: Path, given: dict[str, Any] | None = None) -> None:
        from kafka_reassign_airflow.operators.planning import PLAN_FILE, SNAPSHOT_FILE

        self.work_dir, self.given = work_dir, given
        self.names = (SNAPSHOT_FILE, PLAN_FILE)
        self.started = time.time()
        self._plan = given

    def _newest(self, name: str) -> Path | None:
        files = [f for f in self.work_dir.glob(f"kafka_reassign/*/{name}") if f.stat().st_mtime >= self.started]
        return max(files, key=lambda f: f.stat().st_mtime) if files else None

    def snapshot_taken_at(self) -> float | None:
        snap = self._newest(self.names[0])
        return snap.stat().st_mtime if snap else None

    def plan(self) -> dict[str, Any] | None:
        if self._plan is None and (found := self._newest(self.names[1])) is not None:
            self._plan = json.loads(found.read_text(encoding="utf-8"))
        return self._plan
