"""The prepare task: validate the plan and params, build the steps, write nothing."""
from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from kafka_reassign_airflow.operators.common import PREPARED_XCOM_KEY, admin_client, is_run_active, push_pages, run_params

if TYPE_CHECKING:
    from airflow.sdk import Context

    from kafka_reassign.cluster.state import ClusterState
    from kafka_reassign.run.payload import PreparedPayload
    from kafka_reassign.run.prepare import PreparedRun


class ReassignmentPrepareOperator(BaseOperator):
    """Read the cluster, validate the plan and params, build the KIP-435 steps; write nothing.

    With ``dry_run`` it prints the plan, the steps and the exact config changes and stops.
    Otherwise it takes the cluster lock (one reassignment per cluster). It returns a summary
    (partitions, steps, estimate) and pushes the prepared run (plan, params, steps, throttle
    changes, placement before) to the XCom key ``prepared``, which the execute task runs.

    :param kafka_conn_id: Airflow connection id (conn_type kafka)
    :param plan: reassignment JSON object; None = read the plan file the planning task wrote
        (a plan given here always wins)
    :param goal: planner goal when ``plan`` is None (replication-factor allows RF changes)
    :param brokers: broker ids of the add/remove-brokers goals (informational here)
    :param replication_factor: target RF of the replication-factor goal (informational here)
    :param options: run options (throttle, movement limits, dry_run, ...) as the DAG params name them
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

        raw = self.options if isinstance(self.options, dict) else run_params(context)
        return run_options(raw, goal=self.goal)

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
                "replication-factor, rack-repair, disk-threshold)")
        path = Path(planned["plan_file"])
        try:
            plan = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise AirflowFailException(f"cannot read the plan file {path}: {exc}") from exc
        self.log.info("No plan given: using the plan computed by %s (%s)", self.plan_task_id, path)
        return plan

    def execute(self, context: Context) -> dict[str, Any]:
        from kafka_reassign.run.payload import PreparedPayload

        prepared, state = self._prepare(context)
        dry_run = prepared.params.dry_run
        self.log.info("Reassignment %s:\n%s", "DRY RUN (nothing will be written)" if dry_run else "plan",
                      prepared.report())
        ti = context["ti"]
        if dry_run:
            payload = PreparedPayload.of(prepared, state)
            ti.xcom_push(key=PREPARED_XCOM_KEY, value=payload.to_json())
            return _summary(payload)
        if not prepared.steps:
            self.log.info("Every partition is already at its target: nothing to move.")
        cluster_id = self._lock(context, prepared.cluster_id or "unknown-cluster")
        payload = PreparedPayload.of(prepared, state, started_at=time.time())
        ti.xcom_push(key=PREPARED_XCOM_KEY, value=payload.to_json())
        push_pages(ti, prepared)
        from kafka_reassign_airflow import metrics

        metrics.plan_size(moves=len(prepared.plan.moves), bytes_to_move=sum(s.bytes_to_copy for s in prepared.steps),
                          moved_over_bound=self._moved_over_bound(context), dag_id=ti.dag_id, cluster=cluster_id)
        return _summary(payload)

    def _prepare(self, context: Context) -> tuple[PreparedRun, ClusterState]:
        """Read the cluster and prepare the run (fails the task on a bad plan or params)."""
        from kafka_reassign.errors import ReassignError
        from kafka_reassign.rehearsal.rehearse import rehearse_live
        from kafka_reassign.run.prepare import prepare
        from kafka_reassign.throttle.record import submitted_targets

        from kafka_reassign_airflow.record_store import VariableRecordStore

        options = self._domain_options(context)
        admin = admin_client(self.kafka_conn_id)
        try:
            plan = self.plan if self.plan is not None else self._planned(context)
            state = admin.cluster_state()
            try:
                # In-flight moves count as ours only when a record of ours lists them.
                own = submitted_targets(VariableRecordStore(), state.cluster_id, context["run_id"])
                prepared = prepare(admin, plan, options, run_id=context["run_id"], state=state, own_targets=own,
                                   rehearser=rehearse_live)
            except (ReassignError, ValueError) as exc:
                # Bad plan or params: nothing was written; the message lists every problem.
                raise AirflowFailException(str(exc)) from exc
        finally:
            admin.close()
        return prepared, state

    def _lock(self, context: Context, cluster_id: str) -> str:
        """Take the cluster lock for this run (one reassignment per cluster); return the cluster id."""
        from kafka_reassign_airflow.record_store import ClusterLock, ClusterLockError

        ti = context["ti"]
        try:
            stale = ClusterLock(is_run_active).acquire(cluster_id, ti.dag_id, ti.run_id)
        except ClusterLockError as exc:
            raise AirflowFailException(str(exc)) from exc
        if stale:
            self.log.warning("Took over the lock of cluster %s from run %s, which is no longer running",
                             cluster_id, stale.get("run_id"))
        return cluster_id

    def _moved_over_bound(self, context: Context) -> float | None:
        """The planner's data moved / lower bound, when this run's plan was computed."""
        if self.plan is not None or not self.plan_task_id:
            return None
        planned = context["ti"].xcom_pull(task_ids=self.plan_task_id) or {}
        try:
            summary = json.loads(Path(planned["summary_file"]).read_text(encoding="utf-8"))
            return float(summary["moved_over_lower_bound"])
        except (KeyError, TypeError, ValueError, OSError):
            return None


def _summary(payload: PreparedPayload) -> dict[str, Any]:
    """The task's return value: partitions, steps, dry run and the estimate."""
    run = payload.run
    return {"partitions": len(payload.moves), "steps": len(payload.steps), "dry_run": payload.dry_run,
            # JSON has no infinity: a run that would stall has no estimate
            "estimated_seconds": None if math.isinf(run.estimated_seconds) else run.estimated_seconds,
            "estimate": (run.estimate or {}).get("text")}
