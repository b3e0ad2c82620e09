"""Planning tasks: cluster snapshot -> Spark job -> plan file (read by prepare)."""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from kafka_reassign_airflow.operators.common import admin_client

if TYPE_CHECKING:
    from airflow.sdk import Context

SNAPSHOT_TASK_ID = "snapshot"
PLAN_TASK_ID = "plan"
PLAN_FILE = "PLAN.json"
SNAPSHOT_FILE = "snapshot.json"
#: Run params the planner takes as options (time estimate, batch packing of the summary).
PLANNER_LIMITS = ("throttle_bytes_per_sec", "log_dir_throttle_bytes_per_sec", "max_partition_movements",
                  "max_movements_per_broker", "max_leader_movements")
_LIMIT_FLAGS = {"throttle_bytes_per_sec": "--throttle", "log_dir_throttle_bytes_per_sec": "--log-dir-throttle",
                "max_partition_movements": "--max-partition-movements",
                "max_movements_per_broker": "--max-movements-per-broker",
                "max_leader_movements": "--max-leader-movements"}


def planning_dir(dag_id: str, run_id: str) -> Path:
    """The run's planning directory: ``[kafka_reassign] work_dir``/<dag_id>/<run_id, path-safe>.

    ``work_dir`` defaults to ``$AIRFLOW_HOME/kafka_reassign``. The snapshot, the plan, its
    summary and chart of one run live there; workers on several hosts need it on shared storage.
    """
    import os
    import re

    from airflow.sdk import conf

    base = conf.get("kafka_reassign", "work_dir", fallback="") or ""
    if not base.strip():
        home = os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow")
        base = os.path.join(home, "kafka_reassign")
    safe = lambda s: re.sub(r"[^A-Za-z0-9._-]+", "_", s).strip("._") or "run"  # noqa: E731
    return Path(base).expanduser() / safe(dag_id) / safe(run_id)


class ClusterSnapshotOperator(BaseOperator):
    """Snapshot the cluster for the planner into the run's planning directory.

    Skipped (and so is the Spark job after it) when a plan is given: a plan in the conf always
    wins. Fails when neither a plan nor a goal is given. Returns ``{"work_dir", "snapshot_file"}``.

    :param kafka_conn_id: Airflow connection id (conn_type kafka)
    :param plan: the plan param (templated); not None = nothing to plan
    :param goal: the planner goal (templated)
    """

    template_fields: Sequence[str] = ("kafka_conn_id", "plan", "goal")
    ui_color = "#eef6e8"

    def __init__(self, *, kafka_conn_id: str = "kafka_default", plan: Any = None, goal: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_conn_id = kafka_conn_id
        self.plan = plan
        self.goal = goal

    def execute(self, context: Context) -> dict[str, Any]:
        import os

        if self.plan is not None:
            raise AirflowSkipException("a plan was given: nothing to plan (the given plan is used)")
        if not self.goal:
            raise AirflowFailException("plan is null and goal is null: give a plan, or a goal "
                                       "(rebalance, add-brokers, remove-brokers, replication-factor, rack-repair)")
        from kafka_reassign.snapshot import read_cluster_snapshot

        ti = context["ti"]
        work = planning_dir(ti.dag_id, context["run_id"])
        work.mkdir(parents=True, exist_ok=True)
        admin = admin_client(self.kafka_conn_id)
        try:
            snapshot = read_cluster_snapshot(admin)
        finally:
            admin.close()
        path = work / SNAPSHOT_FILE
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(snapshot), encoding="utf-8")
        os.replace(tmp, path)
        topics = snapshot.get("topics", [])
        self.log.info("Cluster snapshot for goal %r: %d broker(s), %d topic(s), %d partition(s) -> %s",
                      self.goal, len(snapshot.get("brokers", [])), len(topics),
                      sum(len(t.get("partitions", [])) for t in topics), path)
        return {"work_dir": str(work), "snapshot_file": str(path)}


try:  # the Spark provider is a dependency of the project; guarded so the domain-only tools import
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator as _SparkSubmit
except ImportError:  # pragma: no cover
    _SparkSubmit = BaseOperator  # type: ignore[misc,assignment]


class PlannerSubmitOperator(_SparkSubmit):  # type: ignore[misc,valid-type]
    """Plan on Spark: ``spark-submit`` of ``kafka_reassign/planner/spark_job.py`` (SparkSubmitOperator).

    The master and submit options come from the Spark connection ``spark_conn_id`` (conn_type
    spark: host ``local[2]``, ``spark://host:7077``, ``yarn``...; extra ``deploy-mode`` must stay
    ``client`` or unset, the driver reads and writes the run's planning directory; extra
    ``spark-binary``). A missing connection plans with ``local[2]``. ``spark-submit`` is looked
    up on PATH, then beside this Python and in pyspark's ``bin``. Driver and executors run this
    worker's Python (``spark.pyspark.python``), which has ``kafka_reassign`` installed.

    The job writes ``PLAN.json``, ``PLAN.summary.json`` and ``PLAN.chart.png`` into the planning
    directory and logs the summary as one JSON line. ``engine="local"`` runs the same job entry
    in this process with plain-Python aggregates (small clusters, no JVM). Returns
    ``{"work_dir", "plan_file", "summary_file", "chart_file", "engine"}``; skipped when the
    snapshot task was.

    :param snapshot_task_id: the :class:`ClusterSnapshotOperator` task
    :param spark_conn_id: Spark connection id (templated)
    :param goal: planner goal (templated)
    :param brokers: broker ids of add/remove-brokers (templated)
    :param replication_factor: target RF (templated)
    :param engine: ``spark`` or ``local`` (templated)
    :param planner_options: more planner options, PlanOptions names (templated dict)
    :param limits: throttle and batch limits for the summary (templated dict, PLANNER_LIMITS names)
    """

    template_fields: Sequence[str] = (*getattr(_SparkSubmit, "template_fields", ()), "spark_conn_id", "goal",
                                      "brokers", "replication_factor", "engine", "planner_options", "limits")
    ui_color = "#fde9d3"

    def __init__(self, *, snapshot_task_id: str = SNAPSHOT_TASK_ID, spark_conn_id: Any = "spark_default",
                 goal: Any = None, brokers: Any = None, replication_factor: Any = None, engine: Any = "spark",
                 planner_options: Any = None, limits: Any = None, **kwargs: Any) -> None:
        kwargs.setdefault("name", "kafka-reassign-plan")
        super().__init__(**kwargs)
        self.snapshot_task_id = snapshot_task_id
        self.spark_conn_id = spark_conn_id
        self.goal = goal
        self.brokers = brokers
        self.replication_factor = replication_factor
        self.engine = engine
        self.planner_options = planner_options
        self.limits = limits

    def planner_args(self, snapshot_file: str, plan_file: str) -> list[str]:
        """The job's arguments (``kafka-reassign plan`` options)."""
        args = ["--snapshot", snapshot_file, "--goal", str(self.goal), "--out", plan_file]
        if self.brokers:
            args += ["--brokers", ",".join(str(int(b)) for b in self.brokers)]
        if self.replication_factor:
            args += ["--replication-factor", str(int(self.replication_factor))]
        for name, value in (self.limits or {}).items():
            if value is not None and name in _LIMIT_FLAGS:
                args += [_LIMIT_FLAGS[name], str(value)]
        if self.planner_options:
            if not isinstance(self.planner_options, dict):
                raise AirflowFailException(f"planner_options must be a JSON object, got {self.planner_options!r}")
            args += ["--options", json.dumps(self.planner_options, separators=(",", ":"))]
        return args

    def _use_connection(self) -> None:
        """Point the submit at ``spark_conn_id``; without that connection, at local[2]."""
        import os

        from airflow.sdk import BaseHook

        conn_id = str(self.spark_conn_id or "spark_default")
        try:
            BaseHook.get_connection(conn_id)
        except Exception:  # missing connection: plan in local mode on this worker
            self.log.warning("Spark connection %r not found: planning with local[2]", conn_id)
            os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps({"conn_type": "spark", "host": "local[2]"})
        self._conn_id = conn_id
        self._hook = None

    def _spark_submit_on_path(self, binary: str) -> None:
        """Make ``binary`` findable: PATH, else beside this Python, else pyspark's bin/."""
        import importlib.util
        import os
        import shutil
        import sys

        if os.path.sep in binary or shutil.which(binary):
            return
        dirs = [os.path.dirname(sys.executable)]
        spec = importlib.util.find_spec("pyspark")
        if spec is not None and spec.submodule_search_locations:
            dirs.append(os.path.join(list(spec.submodule_search_locations)[0], "bin"))
        for d in dirs:
            if os.access(os.path.join(d, binary), os.X_OK):
                os.environ["PATH"] = d + os.pathsep + os.environ.get("PATH", "")
                self.log.info("%s is not on PATH: using the one in %s", binary, d)
                return
        raise AirflowFailException(f"{binary} not found on PATH nor in {', '.join(dirs)}: install pyspark "
                                   "or Spark on the worker, or set the connection's spark-binary extra")

    def execute(self, context: Context) -> dict[str, Any]:
        import sys

        from kafka_reassign.planner import spark_job
        from kafka_reassign.planner.chart import chart_path_for
        from kafka_reassign.planner.cli import summary_path_for

        snap = context["ti"].xcom_pull(task_ids=self.snapshot_task_id)
        if not snap:
            raise AirflowSkipException(f"{self.snapshot_task_id} produced no snapshot: nothing to plan")
        work = Path(snap["work_dir"])
        plan_file = work / PLAN_FILE
        for stale in (plan_file, summary_path_for(plan_file), chart_path_for(plan_file)):
            stale.unlink(missing_ok=True)  # a retry must not pick up an older try's plan
        args = self.planner_args(snap["snapshot_file"], str(plan_file))
        engine = str(self.engine or "spark")
        if engine == "local":
            self.log.info("Planning goal %r in-process (engine local): spark_job %s", self.goal, " ".join(args))
            rc = spark_job.main([*args, "--engine", "local"])
            if rc != 0:
                raise AirflowFailException(f"the planner failed (exit status {rc}); its error is logged above")
        elif engine == "spark":
            self.application = self.application or spark_job.__file__
            self.application_args = args
            self.conf = {**(self.conf or {})}
            # driver (client mode) and executors: this worker's Python, which has kafka_reassign
            self.conf.setdefault("spark.pyspark.python", sys.executable)
            self.conf.setdefault("spark.pyspark.driver.python", sys.executable)
            self._use_connection()
            self._hook = self._get_hook()
            self._spark_submit_on_path(self._hook._connection["spark_binary"])
            self.log.info("Planning goal %r on Spark (connection %s, master %s)", self.goal, self._conn_id,
                          self._hook._connection["master"])
            super().execute(context)
        else:
            raise AirflowFailException(f"planner engine must be 'spark' or 'local', got {engine!r}")
        if not plan_file.exists():
            raise AirflowFailException(f"the planning job ended without writing {plan_file}")
        chart = chart_path_for(plan_file)
        return {"work_dir": str(work), "plan_file": str(plan_file),
                "summary_file": str(summary_path_for(plan_file)),
                "chart_file": str(chart) if chart.exists() else None, "engine": engine}
