"""Operators of a reassignment run: thin Airflow wrappers around :mod:`kafka_reassign.reassign`.

Every operator connects through :class:`KafkaAdminHook`, calls one idempotent domain step and
passes plain JSON along XCom. Retrying any of them is safe: prepare writes nothing to Kafka,
the throttle is applied with its prior values recorded first (a retry keeps the first
record's priors), executing a batch skips partitions already at their target and adopts
moves already heading there, cancelling and restoring are no-ops the second time.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import (AirflowFailException, AirflowRescheduleException,
                                    AirflowSkipException)

from kafka_reassign_airflow.params import min_return_seconds

if TYPE_CHECKING:
    from airflow.sdk import Context

PREPARE_TASK_ID = "prepare"
PREPARED_XCOM_KEY = "prepared"


def _params(context: Context) -> dict[str, Any]:
    return dict(context.get("params") or {})


def _admin(conn_id: str) -> Any:
    # Imported here: the Kafka provider's hook module pulls in confluent-kafka, which DAG
    # parsing does not need.
    from kafka_reassign_airflow.hooks.kafka_admin import KafkaAdminHook

    return KafkaAdminHook(kafka_config_id=conn_id).get_admin()


def _pull_prepared(context: Context, prepare_task_id: str) -> dict[str, Any] | None:
    return context["ti"].xcom_pull(task_ids=prepare_task_id, key=PREPARED_XCOM_KEY)


def _is_run_active(dag_id: str, run_id: str) -> bool:
    """Whether a DAG run is still queued or running (through the Task SDK)."""
    if not dag_id or not run_id:
        return False
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    try:
        state = RuntimeTaskInstance.get_dagrun_state(dag_id=dag_id, run_id=run_id)
    except Exception:  # the run was deleted: it holds nothing any more
        return False
    return str(getattr(state, "value", state)) in ("queued", "running")


class ReassignmentPrepareOperator(BaseOperator):
    """Read the cluster, validate the plan and params, build KIP-435 batches; write nothing.

    With ``dry_run`` it prints the plan, the batches and the exact config changes and stops.
    Otherwise it takes the cluster lock (one reassignment per cluster). It returns the list of
    batches (what the mapped task group expands over; empty for a dry run) and pushes the
    prepared run (plan, params, batches, throttle changes, placement before) to the XCom key
    ``prepared``.

    :param kafka_conn_id: Airflow connection id (conn_type kafka)
    :param plan: reassignment JSON object; None = read the plan file the planning task wrote
        (a plan given here always wins)
    :param goal: planner goal when ``plan`` is None (replication-factor allows RF changes)
    :param brokers: broker ids of the add/remove-brokers goals (informational here)
    :param replication_factor: target RF of the replication-factor goal (informational here)
    :param options: run options (throttle, batch limits, dry_run, ...) as the DAG params name them
    :param plan_task_id: the :class:`PlannerSubmitOperator` task whose XCom names the plan file
    """

    template_fields: Sequence[str] = ("kafka_conn_id", "plan", "goal", "brokers", "replication_factor", "options")
    ui_color = "#e8eefc"

    def __init__(self, *, kafka_conn_id: str = "kafka_default", plan: Any = None, goal: Any = None,
                 brokers: Any = None, replication_factor: Any = None, options: Any = None,
                 plan_task_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_conn_id = kafka_conn_id
        self.plan = plan
        self.goal = goal
        self.brokers = brokers
        self.replication_factor = replication_factor
        self.options = options
        self.plan_task_id = plan_task_id

    def _domain_options(self, context: Context) -> dict[str, Any]:
        from kafka_reassign_airflow.params import run_options

        raw = self.options if isinstance(self.options, dict) else _params(context)
        opts = run_options(raw)
        if self.goal == "replication-factor":
            opts["allow_rf_change"] = True
        return opts

    def _planned(self, context: Context) -> Any:
        """The plan the planning tasks wrote (plan param null): read from the run's plan file."""
        if not self.plan_task_id:
            raise AirflowFailException(
                "plan is null and this DAG has no planning task: pass a reassignment plan "
                '{"version": 1, "partitions": [{"topic": ..., "partition": ..., "replicas": [...]}]}')
        planned = context["ti"].xcom_pull(task_ids=self.plan_task_id)
        if not planned or not planned.get("plan_file"):
            raise AirflowFailException(
                f"plan is null and task {self.plan_task_id!r} produced no plan file (it was skipped or "
                "failed): give a plan, or a goal (rebalance, add-brokers, remove-brokers, "
                "replication-factor, rack-repair)")
        path = Path(planned["plan_file"])
        try:
            plan = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise AirflowFailException(f"cannot read the plan file {path}: {exc}") from exc
        self.log.info("No plan given: using the plan computed by %s (%s)", self.plan_task_id, path)
        return plan

    def execute(self, context: Context) -> list[dict[str, Any]]:
        from kafka_reassign.errors import ReassignError
        from kafka_reassign.reassign import prepare

        options = self._domain_options(context)
        admin = _admin(self.kafka_conn_id)
        try:
            plan = self.plan if self.plan is not None else self._planned(context)
            state = admin.cluster_state()
            try:
                prepared = prepare(admin, plan, options, run_id=context["run_id"], state=state)
            except (ReassignError, ValueError) as exc:
                # Bad plan or params: nothing was written; the message lists every problem.
                raise AirflowFailException(str(exc)) from exc
        finally:
            admin.close()
        before = {}
        for m in prepared.plan.moves:
            p = state.partition(m.topic, m.partition)
            before[m.name] = list(p.replicas) if p is not None else None
        report = prepared.report() if hasattr(prepared, "report") else json.dumps(prepared.to_json(), indent=2)
        dry_run = prepared.params.dry_run
        self.log.info("Reassignment %s:\n%s", "DRY RUN (nothing will be written)" if dry_run else "plan", report)
        data = prepared.to_json()
        batches = data.get("batches", [])
        ti = context["ti"]
        if dry_run:
            ti.xcom_push(key=PREPARED_XCOM_KEY, value={**data, "dry_run": True, "before": before})
            return []
        if not batches:
            self.log.info("Every partition is already at its target: nothing to move.")
        from kafka_reassign_airflow.record_store import ClusterLock, ClusterLockError

        cluster_id = data.get("cluster_id") or "unknown-cluster"
        try:
            stale = ClusterLock(_is_run_active).acquire(cluster_id, ti.dag_id, ti.run_id)
        except ClusterLockError as exc:
            raise AirflowFailException(str(exc)) from exc
        if stale:
            self.log.warning("Took over the lock of cluster %s from run %s, which is no longer running",
                             cluster_id, stale.get("run_id"))
        ti.xcom_push(key=PREPARED_XCOM_KEY, value={**data, "dry_run": False, "started_at": time.time(),
                                                   "before": before})
        return batches


class _RunStepOperator(BaseOperator):
    """Common parts of the steps after prepare: the connection and the prepared run."""

    template_fields: Sequence[str] = ("kafka_conn_id",)

    def __init__(self, *, kafka_conn_id: str = "kafka_default", prepare_task_id: str = PREPARE_TASK_ID,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_conn_id = kafka_conn_id
        self.prepare_task_id = prepare_task_id

    def prepared(self, context: Context) -> dict[str, Any]:
        data = _pull_prepared(context, self.prepare_task_id)
        if data is None:
            raise AirflowSkipException("prepare did not produce a run (it failed or was skipped)")
        return data


class ThrottleSetOperator(_RunStepOperator):
    """Set the KIP-73 replication throttle for the whole run, recording prior values first.

    Throttle records left behind by earlier runs on the same cluster (a worker killed before
    its teardown) are adopted: their prior values become this run's, so this run's teardown
    restores what they left (this run holds the cluster lock, so they are stale).
    """

    ui_color = "#fff3d6"

    def execute(self, context: Context) -> dict[str, Any]:
        from kafka_reassign.reassign import PreparedRun, apply_throttle

        from kafka_reassign_airflow.record_store import VariableRecordStore

        data = self.prepared(context)
        if data.get("dry_run"):
            raise AirflowSkipException("dry run: no throttle is set")
        store = VariableRecordStore()
        run_id = context["run_id"]
        admin = _admin(self.kafka_conn_id)
        try:
            record = apply_throttle(admin, PreparedRun.from_json(data), store, run_id)
        finally:
            admin.close()
        for note in record.notes:
            self.log.warning("%s", note)
        written = [c.describe() for c in record.changes]
        self.log.info("Throttle set; %d recorded change(s), prior values in Variable %s:\n%s", len(written),
                      store.key_for(run_id), "\n".join(written) or "(none needed)")
        return {"record_key": store.key_for(run_id), "changes": len(written)}


class BatchExecuteOperator(_RunStepOperator):
    """Submit one batch (AlterPartitionReassignments / AlterReplicaLogDirs), in order.

    Batches are strictly sequential: batch i starts only after batch i-1's sensor succeeded.
    Until then the task reschedules itself (no worker slot held); when batch i-1 failed or was
    skipped, batch i is skipped so nothing new starts after a failure.

    :param batch: the batch as JSON (templated, from the mapped task group)
    :param wait_task_id: task id of the sensor of the same group (whose previous map index gates us)
    :param recheck_seconds: how often to look again while the previous batch runs
    """

    template_fields: Sequence[str] = ("kafka_conn_id", "batch", "recheck_seconds")
    ui_color = "#ffe0cc"

    def __init__(self, *, batch: Any, wait_task_id: str, recheck_seconds: Any = 10.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.batch = batch
        self.wait_task_id = wait_task_id
        self.recheck_seconds = recheck_seconds

    def _previous_batch_state(self, context: Context, index: int) -> str | None:
        ti = context["ti"]
        states = ti.get_task_states(dag_id=ti.dag_id, task_ids=[self.wait_task_id], run_ids=[ti.run_id])
        per_ti = states.get(ti.run_id, {})
        state = per_ti.get(f"{self.wait_task_id}_{index}")
        return None if state is None else str(getattr(state, "value", state))

    def execute(self, context: Context) -> dict[str, Any]:
        from kafka_reassign.reassign import execute_batch
        from kafka_reassign.steps import Batch

        ti = context["ti"]
        position = ti.map_index if ti.map_index is not None and ti.map_index >= 0 else 0
        if position > 0:
            prev = self._previous_batch_state(context, position - 1)
            if prev in ("failed", "upstream_failed", "skipped", "removed"):
                raise AirflowSkipException(f"batch {position - 1} ended {prev}: batch {position} is not started")
            if prev != "success":
                # A reschedule due sooner than the scheduler handles this try's executor event
                # gets the task failed by the scheduler (apache/airflow#10790): keep a floor.
                delay = max(float(self.recheck_seconds), min_return_seconds())
                self.log.info("Batch %d is not finished yet (%s); checking again in %ss",
                              position - 1, prev or "not started", delay)
                raise AirflowRescheduleException(datetime.now(timezone.utc) + timedelta(seconds=delay))
        self.prepared(context)  # a skipped/failed prepare means nothing to do
        from kafka_reassign.errors import BatchExecutionError

        batch = Batch.from_json(self.batch)
        admin = _admin(self.kafka_conn_id)
        try:
            result = execute_batch(admin, batch, run_id=context["run_id"])
        except BatchExecutionError as exc:
            self.log.error("Batch %s partly refused: %s", batch.index, json.dumps(exc.result, indent=1))
            raise AirflowFailException(str(exc)) from exc
        finally:
            admin.close()
        self.log.info("Batch %s submitted: %s", batch.index, json.dumps(result, default=str, indent=1))
        return result


class ReassignmentCancelOperator(_RunStepOperator):
    """Cancel (revert) this run's in-flight moves after a failure, when cancel_on_failure is on.

    Only reassignments heading to one of this run's step targets are cancelled (what this
    run submitted or adopted), never another tool's.

    :param cancel_on_failure: the param (templated); False skips
    """

    template_fields: Sequence[str] = ("kafka_conn_id", "cancel_on_failure")
    ui_color = "#fcdede"

    def __init__(self, *, cancel_on_failure: Any = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cancel_on_failure = cancel_on_failure

    def execute(self, context: Context) -> dict[str, Any]:
        if not _truthy(self.cancel_on_failure):
            raise AirflowSkipException("cancel_on_failure is off: in-flight moves keep going")
        data = self.prepared(context)
        if data.get("dry_run"):
            raise AirflowSkipException("dry run: nothing was submitted")
        admin = _admin(self.kafka_conn_id)
        try:
            out = cancel_own_moves(admin, data, self.log)
        finally:
            admin.close()
        if out.get("errors"):
            raise AirflowFailException(f"could not cancel every in-flight move of this run: {out['errors']}")
        return out


def _truthy(v: Any) -> bool:
    if isinstance(v, str):
        return v.strip().lower() in ("true", "1", "yes", "on")
    return bool(v)


def own_in_flight(admin: Any, data: dict[str, Any]) -> list[tuple[str, int]]:
    """Partitions still moving to one of this run's step targets (ListPartitionReassignments)."""
    from kafka_reassign.reassign import PreparedRun

    own = PreparedRun.from_json(data).own_targets()
    in_flight = admin.list_partition_reassignments(list(own))
    return sorted(k for k, inf in in_flight.items() if tuple(inf.target) in own.get(k, []))


def cancel_own_moves(admin: Any, data: dict[str, Any], log: Any) -> dict[str, Any]:
    """Cancel every in-flight move of the prepared run ``data``; return what was cancelled."""
    from kafka_reassign.reassign import PreparedRun, cancel_in_flight

    out = cancel_in_flight(admin, PreparedRun.from_json(data))
    if out["cancelled"]:
        log.warning("Cancelled %d in-flight move(s) of this run (reverted to their replicas before the "
                    "move): %s", len(out["cancelled"]), ", ".join(out["cancelled"]))
    else:
        log.info("No move of this run was in flight: nothing to cancel")
    if out.get("left"):
        log.warning("Left alone (not ours): %s", ", ".join(out["left"]))
    return out


class ThrottleRemoveOperator(_RunStepOperator):
    """Teardown: restore every throttle config this run changed to exactly its prior value.

    Runs whatever happened before (a failed batch, a run marked failed by hand). When the
    run ends with its own moves still in flight and cancel_on_failure is on, they are
    cancelled first (nothing would watch them any more); with it off they keep going,
    unthrottled, and a warning says so. Releases the cluster lock.

    :param cancel_on_failure: the param (templated)
    """

    template_fields: Sequence[str] = ("kafka_conn_id", "cancel_on_failure")
    ui_color = "#fff3d6"

    def __init__(self, *, cancel_on_failure: Any = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cancel_on_failure = cancel_on_failure

    def execute(self, context: Context) -> dict[str, Any]:
        from kafka_reassign.reassign import restore_throttle

        from kafka_reassign_airflow.record_store import ClusterLock, VariableRecordStore

        run_id = context["run_id"]
        data = _pull_prepared(context, self.prepare_task_id) or {}
        store = VariableRecordStore()
        out: dict[str, Any] = {"cancelled": [], "restore": None}
        if data and not data.get("dry_run"):
            admin = _admin(self.kafka_conn_id)
            try:
                moving = own_in_flight(admin, data)
                if moving:
                    names = ", ".join(f"{t}-{p}" for t, p in moving)
                    if _truthy(self.cancel_on_failure):
                        self.log.warning("The run ended with moves still in flight (%s): cancelling them "
                                         "before removing the throttle", names)
                        out["cancelled"] = cancel_own_moves(admin, data, self.log)["cancelled"]
                    else:
                        self.log.warning("The run ended with moves still in flight (%s); cancel_on_failure is "
                                         "off, so they continue WITHOUT a throttle", names)
                result = restore_throttle(admin, store, run_id)
            finally:
                admin.close()
            out["restore"] = result.to_json()
            if result.no_record:
                self.log.info("Run %s set no throttle: nothing to restore", run_id)
            else:
                lines = [c.describe() for c in result.changes]
                self.log.info("Throttle restored to the prior values (%d write(s)):\n%s", len(lines),
                              "\n".join(lines) or "(already as before)")
            for w in result.warnings:
                self.log.warning("%s", w)
        else:
            self.log.info("Nothing was written by this run (dry run or prepare did not finish)")
        if data.get("cluster_id") and ClusterLock.release(data["cluster_id"], run_id):
            self.log.info("Released the lock of cluster %s", data["cluster_id"])
        return out


class ReassignmentReportOperator(_RunStepOperator):
    """Final check and report: placement equals the plan, throttles are back, time taken.

    Runs after the throttle teardown. Prints before/after placement of every moved partition,
    the time taken, and, for every config the run changed, its prior value next to its value
    now. Fails when a partition is not where the plan wanted it or a config was not restored.
    """

    ui_color = "#e6f5e6"

    def __init__(self, *, work_task_ids: Sequence[str] = (), **kwargs: Any) -> None:
        """:param work_task_ids: tasks whose failure (or skip, after a manual fail) fails the run"""
        super().__init__(**kwargs)
        self.work_task_ids = list(work_task_ids)

    def _unfinished_work(self, context: Context) -> list[str]:
        """Work tasks of this run that failed or never ran (``task[map index]: state``)."""
        if not self.work_task_ids:
            return []
        ti = context["ti"]
        states = ti.get_task_states(dag_id=ti.dag_id, task_ids=self.work_task_ids, run_ids=[ti.run_id])
        bad = []
        for key, state in sorted(states.get(ti.run_id, {}).items()):
            value = str(getattr(state, "value", state))
            if value in ("failed", "upstream_failed", "skipped", "removed"):
                bad.append(f"{key}: {value}")
        return bad

    def execute(self, context: Context) -> dict[str, Any]:
        from kafka_reassign_airflow.record_store import VariableRecordStore

        data = self.prepared(context)
        if data.get("dry_run"):
            raise AirflowSkipException("dry run: nothing to report")
        # As a teardown this runs after failures too: they decide the run, whatever the placement.
        unfinished = self._unfinished_work(context)
        record = VariableRecordStore().get(context["run_id"])
        admin = _admin(self.kafka_conn_id)
        try:
            topics = sorted({e["topic"] for e in data["plan"]["partitions"]})
            state = admin.cluster_state(include_log_dirs=False, topics=topics)
            changes = record.changes if record is not None else []
            now_cfg = admin.describe_configs(
                broker_ids=sorted({int(c.name) for c in changes if c.resource_type == "broker"}),
                topics=sorted({c.name for c in changes if c.resource_type == "topic"}),
                keys=sorted({c.key for c in changes})) if changes else {}
        finally:
            admin.close()
        before = data.get("before") or {}
        lines = ["Placement (before -> after):"]
        wrong: list[str] = []
        for e in data["plan"]["partitions"]:
            name = f"{e['topic']}-{e['partition']}"
            p = state.partition(e["topic"], e["partition"])
            after = list(p.replicas) if p is not None else None
            mark = "" if after == list(e["replicas"]) else f"   <-- plan wants {e['replicas']}"
            if mark:
                wrong.append(name)
            lines.append(f"  {name}: {before.get(name)} -> {after}{mark}")
        lines.append("Throttle configs (prior -> now):")
        not_restored: list[str] = []
        for c in changes:
            now = (now_cfg.get((c.resource_type, c.name)) or {}).get(c.key)
            flag = "" if now == c.prior else "   <-- NOT RESTORED"
            if flag:
                not_restored.append(f"{c.resource_type} {c.name} {c.key}")
            lines.append(f"  {c.resource_type} {c.name} {c.key}: {c.prior!r} -> {now!r}{flag}")
        if not changes:
            lines.append("  (this run changed no config)")
        took = time.time() - float(data.get("started_at") or time.time())
        lines.append(f"Time taken: {took:.1f} s for {len(data.get('batches', []))} batch(es)")
        self.log.info("\n".join(lines))
        if wrong or not_restored or unfinished:
            raise AirflowFailException(
                (f"the reassignment did not complete ({', '.join(unfinished)}). " if unfinished else "")
                + (f"partitions not at their planned replicas: {', '.join(wrong)}. " if wrong else "")
                + (f"configs not back to their prior values: {', '.join(not_restored)}" if not_restored else ""))
        return {"partitions": len(data["plan"]["partitions"]), "seconds": round(took, 3),
                "configs_restored": len(changes)}


# -- planning: snapshot -> Spark job -> plan file (read by prepare) ------------------------------
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
        admin = _admin(self.kafka_conn_id)
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
