"""The task wiring of a reassignment, shared by every DAG that moves replicas.

``kafka_reassign`` (manual / REST API) and ``kafka_rebalance`` (scheduled) run the same
tasks; this builds them once. Planning (:func:`planning_tasks`, when no plan is given)::

    snapshot (cluster -> <work_dir>/<dag>/<run>/snapshot.json; skipped when a plan is given)
       └──> plan (SparkSubmitOperator: spark-submit planner/spark_job.py -> PLAN.json,
                  PLAN.summary.json, PLAN.chart.png)  ──> prepare (reads PLAN.json when plan is null)

The reassignment itself (:func:`reassignment_tasks`)::

    prepare ──> throttle_set ──> execute (deferrable: a window of KIP-435 steps in flight,
       │             │             │       its trigger watches lag and ISR of the steps in flight)
       │             │             └──> cancel_on_failure (execute failed; only if the param is on)
       └─────────────┴──(setups)──> throttle_remove (teardown, fails the run if it fails) ──> report

Eight task instances per run whatever the plan's size. ``report`` is the leaf that decides
the run's state: it needs execute *and* the teardown to succeed, so a failed execute fails
the run even though the throttle removal after it succeeded. It is a teardown as well, so it
also runs (and fails the run) after a run is marked failed by hand.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow.sdk import TriggerRule

from kafka_reassign_airflow.operators.cancel import ReassignmentCancelOperator
from kafka_reassign_airflow.operators.common import PREPARE_TASK_ID
from kafka_reassign_airflow.operators.execute import ReassignmentExecuteOperator
from kafka_reassign_airflow.operators.planning import (PLAN_TASK_ID, PLANNER_LIMITS, SNAPSHOT_TASK_ID,
                                                       ClusterSnapshotOperator, PlannerSubmitOperator)
from kafka_reassign_airflow.operators.prepare import ReassignmentPrepareOperator
from kafka_reassign_airflow.operators.report import ReassignmentReportOperator
from kafka_reassign_airflow.operators.throttle import ThrottleRemoveOperator, ThrottleSetOperator

EXECUTE_TASK_ID = "execute"
#: Tries of execute beyond the first, for infrastructure failures only (see reassignment_tasks).
EXECUTE_RETRIES = 2


def p(name: str) -> str:
    """A Jinja reference to a DAG param (the DAG renders templates as native objects)."""
    return "{{ params.%s }}" % name


def p_if_any(name: str) -> str:
    """A DAG param, or None in a DAG without it (the rebalance DAG leaves out other goals' params)."""
    return "{{ params.get('%s') }}" % name


@dataclass
class PlanningTasks:
    """Handles on the planning tasks: the cluster snapshot and the Spark job."""

    snapshot: ClusterSnapshotOperator
    plan: PlannerSubmitOperator


def planning_tasks(*, plan: Any = p("plan"), goal: Any = p("goal"), brokers: Any = p("brokers"),
                   replication_factor: Any = p("replication_factor"), kafka_conn_id: Any = p("kafka_conn_id"),
                   spark_conn_id: Any = p("spark_conn_id"), engine: Any = "spark",
                   planner_options: Any = None) -> PlanningTasks:
    """Create the planning tasks in the current DAG: ``snapshot >> plan`` (the one planning path).

    ``snapshot`` reads the cluster into the run's planning directory (``[kafka_reassign]
    work_dir``, default ``$AIRFLOW_HOME/kafka_reassign``, then ``<dag_id>/<run_id>``); it is
    skipped when ``plan`` is not None, and so is the Spark job. ``plan`` spark-submits
    ``kafka_reassign/planning/spark/spark_job.py`` through the ``spark_conn_id`` connection; it writes
    PLAN.json, its summary and chart there and logs the summary line. Pass the result to
    :func:`reassignment_tasks` (``planning=``) so ``prepare`` reads the plan file.

    :param plan: the plan param (template or value); not None = no planning
    :param goal: planner goal (template or value)
    :param brokers: broker ids of add/remove-brokers
    :param replication_factor: target RF of the replication-factor goal
    :param kafka_conn_id: Kafka connection to snapshot
    :param spark_conn_id: Spark connection (conn_type spark) the job is submitted to
    :param engine: ``spark`` (spark-submit) or ``local`` (same job entry in-process, no JVM)
    :param planner_options: more planner options (dict of PlanOptions names, template or value)
    """
    snapshot = ClusterSnapshotOperator(
        task_id=SNAPSHOT_TASK_ID, kafka_conn_id=kafka_conn_id, plan=plan, goal=goal,
        log_dir_capacity_bytes=p_if_any("log_dir_capacity_bytes"),
        doc_md="Reads the cluster (brokers, racks, log dirs, replica sizes, topic configs) into the run's "
               "planning directory. Skipped when a plan is given.")
    planned = PlannerSubmitOperator(
        task_id=PLAN_TASK_ID, snapshot_task_id=SNAPSHOT_TASK_ID, spark_conn_id=spark_conn_id, goal=goal,
        brokers=brokers, replication_factor=replication_factor, engine=engine,
        planner_options=planner_options, limits={name: p_if_any(name) for name in PLANNER_LIMITS},
        doc_md="spark-submit of the planner (kafka_reassign/planning/spark/spark_job.py) to the Spark connection: "
               "writes PLAN.json, PLAN.summary.json and PLAN.chart.png; the summary line is in the log.")
    snapshot >> planned
    return PlanningTasks(snapshot, planned)


@dataclass
class ReassignmentTasks:
    """Handles on the built tasks, to wire more around them (e.g. an approval step)."""

    prepare: ReassignmentPrepareOperator
    throttle_set: ThrottleSetOperator
    execute: ReassignmentExecuteOperator
    cancel: ReassignmentCancelOperator
    throttle_remove: ThrottleRemoveOperator
    report: ReassignmentReportOperator


def reassignment_tasks(*, plan: Any = p("plan"), kafka_conn_id: Any = p("kafka_conn_id"),
                       goal: Any = p("goal"), brokers: Any = p("brokers"),
                       replication_factor: Any = p("replication_factor"),
                       planning: PlanningTasks | None = None,
                       deferrable: bool = True) -> ReassignmentTasks:
    """Create the reassignment tasks in the current DAG (call inside ``with DAG(...)``).

    The DAG must set ``render_template_as_native_obj=True`` and carry the params of
    :func:`kafka_reassign_airflow.params.reassign_params`; the run options (throttle, movement
    limits, dry_run...) are read from the run's params.

    :param plan: the plan (template or value); None/null = the plan file of ``planning``
    :param kafka_conn_id: connection id (template or value)
    :param goal: planner goal when no plan is given
    :param brokers: broker ids for the planner
    :param replication_factor: RF for the planner
    :param planning: the :func:`planning_tasks` of this DAG: ``prepare`` runs after them (also when
        they were skipped because a plan was given) and reads their plan file when ``plan`` is null
    :param deferrable: wait in the triggerer (default) instead of a worker slot
    """
    prepare = ReassignmentPrepareOperator(
        task_id=PREPARE_TASK_ID, kafka_conn_id=kafka_conn_id, plan=plan, goal=goal, brokers=brokers,
        replication_factor=replication_factor, plan_task_id=planning.plan.task_id if planning else None,
        # The planning tasks are skipped when a plan is given; a failed plan stops here.
        trigger_rule=TriggerRule.NONE_FAILED if planning is not None else TriggerRule.ALL_SUCCESS,
        doc_md="Reads the cluster, validates plan and params, builds the KIP-435 steps and the exact "
               "throttle config changes. Writes nothing to Kafka. A dry run stops here.")
    throttle_set = ThrottleSetOperator(
        task_id="throttle_set", kafka_conn_id=kafka_conn_id,
        doc_md="Records every prior config value in the Airflow metadata DB, then sets the KIP-73 "
               "replication throttle rates on the brokers involved.")
    execute = _execute_task(kafka_conn_id, deferrable)
    cancel = ReassignmentCancelOperator(
        task_id="cancel_on_failure", kafka_conn_id=kafka_conn_id,
        trigger_rule=TriggerRule.ONE_FAILED,
        doc_md="After a failure, reverts this run's in-flight moves (only when cancel_on_failure is on).")
    throttle_remove = ThrottleRemoveOperator(
        task_id="throttle_remove", kafka_conn_id=kafka_conn_id,
        retries=2, retry_delay=timedelta(seconds=15),
        doc_md="Teardown: restores every config this run changed to exactly its prior value, whatever "
               "happened before; releases the cluster lock.")
    report = ReassignmentReportOperator(
        task_id="report", kafka_conn_id=kafka_conn_id, work_task_ids=[throttle_set.task_id, EXECUTE_TASK_ID],
        doc_md="Checks the final placement against the plan and that every throttle config is back to "
               "its prior value; prints the execution's outcome, before/after and the time taken.")
    tasks = ReassignmentTasks(prepare, throttle_set, execute, cancel, throttle_remove, report)
    _wire(tasks, planning)
    return tasks


def _execute_task(kafka_conn_id: Any, deferrable: bool) -> ReassignmentExecuteOperator:
    """The execute task, retried for infrastructure failures only."""
    return ReassignmentExecuteOperator(
        task_id=EXECUTE_TASK_ID, kafka_conn_id=kafka_conn_id, deferrable=deferrable,
        # A stall, a timeout or a lost broker fails at once (AirflowFailException). What is
        # retried is the infrastructure: a lost worker, Kafka unreachable from it, and Airflow's
        # own race that fails a deferred task resuming right after its trigger fired
        # (apache/airflow#72716). Each try resumes from the saved state.
        retries=EXECUTE_RETRIES, retry_delay=timedelta(seconds=10),
        doc_md="Keeps a window of KIP-435 steps in flight under max_partition_movements, "
               "max_movements_per_broker and max_leader_movements, refilled as soon as a step finishes; "
               "throttled-replica lists name only the steps in flight. Waits in the triggerer (lag and "
               "ISR of the steps in flight); fails on a stall, an offline broker or a step timeout.")


def _wire(tasks: ReassignmentTasks, planning: PlanningTasks | None) -> None:
    """The dependencies and teardowns between the reassignment tasks (see the module docstring)."""
    if planning is not None:
        planning.plan >> tasks.prepare
    tasks.prepare >> tasks.throttle_set >> tasks.execute >> tasks.cancel >> tasks.throttle_remove
    setups = [tasks.prepare, tasks.throttle_set]
    tasks.throttle_remove.as_teardown(setups=setups, on_failure_fail_dagrun=True)
    [tasks.execute, tasks.throttle_remove] >> tasks.report
    # report is a teardown too: a run marked failed by hand skips every work task but still runs
    # teardowns, and the run's state then comes from them; report fails on the reverted
    # placement, so such a run stays failed instead of turning green after a clean teardown.
    tasks.report.as_teardown(setups=setups, on_failure_fail_dagrun=True)
