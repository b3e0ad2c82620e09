"""Planning tasks: cluster snapshot -> Spark job -> plan file (read by prepare)."""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from kafka_reassign import defaults
from kafka_reassign_airflow.links import PlanChartLink
from kafka_reassign_airflow.operators.common import admin_client

if TYPE_CHECKING:
    from airflow.sdk import Context

SNAPSHOT_TASK_ID = "snapshot"
PLAN_TASK_ID = "plan"
PLAN_FILE = "PLAN.json"
#: the snapshot as JSON lines (header + one partition per line): the Spark job reads it itself
SNAPSHOT_FILE = "snapshot.jsonl"
#: the planning job's own deadline (``--timeout``); the task's execution_timeout leaves room for
#: the Spark start and the writing of the plan
PLAN_TIMEOUT_SECONDS = 900
#: Run params the planner takes as options (time estimate, warnings): rows of the run-parameter table.
PLANNER_LIMITS = defaults.PLANNER_LIMITS


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
    :param log_dir_capacity_bytes: log dir capacities over the reported ones (templated; the run
        param of that name): a bad entry, or one naming a broker or dir the cluster lacks, fails the task
    """

    template_fields: Sequence[str] = ("kafka_conn_id", "plan", "goal", "log_dir_capacity_bytes")
    ui_color = "#eef6e8"

    def __init__(self, *, kafka_conn_id: str = "kafka_default", plan: Any = None, goal: Any = None,
                 log_dir_capacity_bytes: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_conn_id = kafka_conn_id
        self.plan = plan
        self.goal = goal
        self.log_dir_capacity_bytes = log_dir_capacity_bytes

    def execute(self, context: Context) -> dict[str, Any]:
        if self.plan is not None:
            raise AirflowSkipException("a plan was given: nothing to plan (the given plan is used)")
        if not self.goal:
            raise AirflowFailException("plan is null and goal is null: give a plan, or a goal "
                                       "(rebalance, add-brokers, remove-brokers, replication-factor, rack-repair, "
                                       "disk-threshold)")
        from kafka_reassign.cluster.capacities import PARAM, parse_capacities
        from kafka_reassign.cluster.snapshot import read_cluster_snapshot
        from kafka_reassign.errors import ParamError
        from kafka_reassign.planning.spark.snapshot_file import write_snapshot_lines

        try:
            capacities = parse_capacities(self.log_dir_capacity_bytes, PARAM)
        except ParamError as exc:
            raise AirflowFailException(str(exc)) from None
        ti = context["ti"]
        work = planning_dir(ti.dag_id, context["run_id"])
        work.mkdir(parents=True, exist_ok=True)
        admin = admin_client(self.kafka_conn_id)
        try:
            snapshot = read_cluster_snapshot(admin, capacities=capacities)
        except ParamError as exc:  # a broker or log dir the cluster lacks: nothing was written
            raise AirflowFailException(str(exc)) from None
        finally:
            admin.close()
        path = write_snapshot_lines(snapshot, work / SNAPSHOT_FILE)  # atomic (temp file + rename)
        topics = snapshot.get("topics", [])
        self.log.info("Cluster snapshot for goal %r: %d broker(s), %d topic(s), %d partition(s) -> %s",
                      self.goal, len(snapshot.get("brokers", [])), len(topics),
                      sum(len(t.get("partitions", [])) for t in topics), path)
        return {"work_dir": str(work), "snapshot_file": str(path)}


def _spark_submit_dir(binary: str) -> str | None:
    """Where ``binary`` is when it is not on PATH: beside this Python, else pyspark's bin/."""
    import importlib.util
    import os
    import shutil
    import sys

    if os.path.sep in binary or shutil.which(binary):
        return None
    dirs = [os.path.dirname(sys.executable)]
    spec = importlib.util.find_spec("pyspark")
    if spec is not None and spec.submodule_search_locations:
        dirs.append(os.path.join(list(spec.submodule_search_locations)[0], "bin"))
    for d in dirs:
        if os.access(os.path.join(d, binary), os.X_OK):
            return d
    raise AirflowFailException(f"{binary} not found on PATH nor in {', '.join(dirs)}: install pyspark "
                               "or Spark on the worker, or set the connection's spark-binary extra")


class PlannerSubmitOperator(BaseOperator):
    """Plan on Spark: ``spark-submit`` of ``kafka_reassign/planning/spark/spark_job.py`` through the
    Spark provider's :class:`SparkSubmitHook` (public arguments only).

    The master and submit options come from the Spark connection ``spark_conn_id`` (conn_type
    spark: host ``local[2]``, ``spark://host:7077``, ``yarn``, ``k8s://...``; extra ``deploy-mode``
    must stay ``client`` or unset, the driver reads and writes the run's planning directory;
    extra ``spark-binary``). The job reads the snapshot-lines file itself, so pointing the
    connection at a cluster scales the planning out. Without that connection the same job runs
    in this worker on ``local[2]``. ``spark-submit`` is looked up on PATH, then beside this
    Python and in pyspark's ``bin`` (passed to the submit process only). Driver and executors
    run this worker's Python (``spark.pyspark.python``), which has ``kafka_reassign`` installed;
    the driver memory is sized from the snapshot file unless ``conf`` sets it.

    The job stops itself after ``timeout_seconds`` (its Spark jobs are cancelled and the error
    names the setting); the task's ``execution_timeout`` defaults to that plus 5 minutes.
    It writes ``PLAN.json``, ``PLAN.summary.json`` and ``PLAN.chart.png`` into the planning
    directory and logs the summary as one JSON line. ``engine="local"`` runs the same job entry in
    this process with pandas instead of Spark (small clusters, no JVM). Returns ``{"work_dir",
    "plan_file", "summary_file", "chart_file", "engine"}``; skipped when the snapshot task was.

    :param snapshot_task_id: the :class:`ClusterSnapshotOperator` task
    :param spark_conn_id: Spark connection id (templated)
    :param goal: planner goal (templated)
    :param brokers: broker ids of add/remove-brokers (templated)
    :param replication_factor: target RF (templated)
    :param engine: ``spark`` or ``local`` (templated)
    :param planner_options: more planner options, PlanOptions names (templated dict)
    :param limits: throttle and movement limits for the summary (templated dict, PLANNER_LIMITS names)
    :param conf: extra Spark properties (templated dict)
    :param timeout_seconds: the planning job's deadline (templated)
    """

    template_fields: Sequence[str] = ("spark_conn_id", "goal", "brokers", "replication_factor", "engine",
                                      "planner_options", "limits", "conf", "timeout_seconds")
    ui_color = "#fde9d3"
    operator_extra_links = (PlanChartLink(),)

    def __init__(self, *, snapshot_task_id: str = SNAPSHOT_TASK_ID, spark_conn_id: Any = "spark_default",
                 goal: Any = None, brokers: Any = None, replication_factor: Any = None, engine: Any = "spark",
                 planner_options: Any = None, limits: Any = None, conf: Any = None,
                 timeout_seconds: Any = PLAN_TIMEOUT_SECONDS, **kwargs: Any) -> None:
        from datetime import timedelta

        kwargs.setdefault("execution_timeout", timedelta(seconds=PLAN_TIMEOUT_SECONDS + 300))
        super().__init__(**kwargs)
        self.snapshot_task_id = snapshot_task_id
        self.spark_conn_id = spark_conn_id
        self.goal = goal
        self.brokers = brokers
        self.replication_factor = replication_factor
        self.engine = engine
        self.planner_options = planner_options
        self.limits = limits
        self.conf = conf
        self.timeout_seconds = timeout_seconds
        self.submit_hook: Any = None

    def planner_args(self, snapshot_file: str, plan_file: str) -> list[str]:
        """The job's arguments (``kafka-reassign plan`` options)."""
        args = ["--snapshot", snapshot_file, "--goal", str(self.goal), "--out", plan_file]
        if self.brokers:
            args += ["--brokers", ",".join(str(int(b)) for b in self.brokers)]
        if self.replication_factor:
            args += ["--replication-factor", str(int(self.replication_factor))]
        args += defaults.planner_flags(self.limits or {})
        if self.timeout_seconds:
            args += ["--timeout", str(float(self.timeout_seconds))]
        if self.planner_options:
            if not isinstance(self.planner_options, dict):
                raise AirflowFailException(f"planner_options must be a JSON object, got {self.planner_options!r}")
            args += ["--options", json.dumps(self.planner_options, separators=(",", ":"))]
        return args

    def _connection_exists(self, conn_id: str) -> bool:
        from airflow.sdk import BaseHook

        try:
            BaseHook.get_connection(conn_id)
        except Exception:  # missing connection
            return False
        return True

    def _submit(self, args: list[str], snapshot_file: str) -> None:
        """spark-submit the job through the Spark provider's hook (public arguments only)."""
        import os
        import sys

        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        from kafka_reassign.planning.spark import spark_job
        from kafka_reassign.planning.spark.spark_session import driver_java_options, driver_memory

        size = os.path.getsize(snapshot_file)
        conf = {"spark.pyspark.python": sys.executable, "spark.pyspark.driver.python": sys.executable,
                "spark.driver.memory": driver_memory(size), "spark.driver.extraJavaOptions": driver_java_options(size),
                **(self.conf or {})}
        where = _spark_submit_dir("spark-submit")
        env = {"PATH": where + os.pathsep + os.environ.get("PATH", "")} if where else None
        self.submit_hook = SparkSubmitHook(conn_id=str(self.spark_conn_id), conf=conf, name="kafka-reassign-plan",
                                           application_args=args, env_vars=env)
        self.log.info("Planning goal %r on Spark (connection %s)", self.goal, self.spark_conn_id)
        self.submit_hook.submit(spark_job.__file__)

    def on_kill(self) -> None:
        if self.submit_hook is not None:
            self.submit_hook.on_kill()

    def execute(self, context: Context) -> dict[str, Any]:
        from kafka_reassign.planning.spark import spark_job
        from kafka_reassign.planning.spark.chart import chart_path_for
        from kafka_reassign.planning.spark.command import summary_path_for

        snap = context["ti"].xcom_pull(task_ids=self.snapshot_task_id)
        if not snap:
            raise AirflowSkipException(f"{self.snapshot_task_id} produced no snapshot: nothing to plan")
        work = Path(snap["work_dir"])
        plan_file = work / PLAN_FILE
        for stale in (plan_file, summary_path_for(plan_file), chart_path_for(plan_file)):
            stale.unlink(missing_ok=True)  # a retry must not pick up an older try's plan
        args = self.planner_args(snap["snapshot_file"], str(plan_file))
        engine = str(self.engine or "spark")
        if engine not in ("spark", "local"):
            raise AirflowFailException(f"planner engine must be 'spark' or 'local', got {engine!r}")
        if engine == "spark" and self._connection_exists(str(self.spark_conn_id)):
            self._submit(args, snap["snapshot_file"])
        else:
            extra = ["--engine", "local"] if engine == "local" else ["--spark-master", "local[2]"]
            if engine == "spark":
                self.log.warning("Spark connection %r not found: planning in this worker on local[2]",
                                 self.spark_conn_id)
            self.log.info("Planning goal %r in-process: spark_job %s", self.goal, " ".join(args + extra))
            rc = spark_job.main([*args, *extra])
            if rc != 0:
                raise AirflowFailException(f"the planner failed (exit status {rc}); its error is logged above")
        if not plan_file.exists():
            raise AirflowFailException(f"the planning job ended without writing {plan_file}")
        chart = chart_path_for(plan_file)
        return {"work_dir": str(work), "plan_file": str(plan_file),
                "summary_file": str(summary_path_for(plan_file)),
                "chart_file": str(chart) if chart.exists() else None, "engine": engine}
