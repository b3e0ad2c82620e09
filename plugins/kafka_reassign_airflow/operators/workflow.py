"""The task wiring of a reassignment, shared by every DAG that moves replicas.

``kafka_reassign`` (manual / REST API) and ``kafka_rebalance`` (scheduled) run the same
tasks; this builds them once::

    prepare ──> throttle_set ──> batches[i]: execute ──> wait   (mapped, strictly sequential)
       │             │                 │
       │             │                 └──> cancel_on_failure (one failed; only if the param is on)
       └─────────────┴──(setups)──> throttle_remove (teardown, fails the run if it fails) ──> report

``report`` is the leaf that decides the run's state: it needs the batches *and* the
teardown to succeed, so a failed batch fails the run even though the throttle removal after
it succeeded. It is a teardown as well, so it also runs (and fails the run) after a run is
marked failed by hand.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow.sdk import TriggerRule, task_group

from kafka_reassign_airflow.operators.reassign import (PREPARE_TASK_ID,
                                                       BatchExecuteOperator, ReassignmentCancelOperator,
                                                       ReassignmentPrepareOperator, ReassignmentReportOperator,
                                                       ThrottleRemoveOperator, ThrottleSetOperator)
from kafka_reassign_airflow.sensors.reassignment import ReassignmentBatchSensor

BATCH_GROUP_ID = "batches"
EXECUTE_TASK_ID = f"{BATCH_GROUP_ID}.execute"
WAIT_TASK_ID = f"{BATCH_GROUP_ID}.wait"


def p(name: str) -> str:
    """A Jinja reference to a DAG param (the DAG renders templates as native objects)."""
    return "{{ params.%s }}" % name


@dataclass
class ReassignmentTasks:
    """Handles on the built tasks, to wire more around them (e.g. an approval step)."""

    prepare: ReassignmentPrepareOperator
    throttle_set: ThrottleSetOperator
    batches: Any
    cancel: ReassignmentCancelOperator
    throttle_remove: ThrottleRemoveOperator
    report: ReassignmentReportOperator


def reassignment_tasks(*, plan: Any = p("plan"), kafka_conn_id: Any = p("kafka_conn_id"),
                       goal: Any = p("goal"), brokers: Any = p("brokers"),
                       replication_factor: Any = p("replication_factor"),
                       deferrable: bool = True) -> ReassignmentTasks:
    """Create the reassignment tasks in the current DAG (call inside ``with DAG(...)``).

    The DAG must set ``render_template_as_native_obj=True`` and carry the params of
    :func:`kafka_reassign_airflow.params.reassign_params`; the run options (throttle, batch
    limits, dry_run...) are read from the run's params.

    :param plan: the plan (template or value); None/null = compute from ``goal``
    :param kafka_conn_id: connection id (template or value)
    :param goal: planner goal when no plan is given
    :param brokers: broker ids for the planner
    :param replication_factor: RF for the planner
    :param deferrable: wait for batches in the triggerer (default) instead of a worker slot
    """
    prepare = ReassignmentPrepareOperator(
        task_id=PREPARE_TASK_ID, kafka_conn_id=kafka_conn_id, plan=plan, goal=goal, brokers=brokers,
        replication_factor=replication_factor,
        doc_md="Reads the cluster, validates plan and params, builds the KIP-435 batches and the exact "
               "throttle config changes. Writes nothing to Kafka. A dry run stops here.")
    throttle_set = ThrottleSetOperator(
        task_id="throttle_set", kafka_conn_id=kafka_conn_id,
        doc_md="Records every prior config value in the Airflow metadata DB, then sets the KIP-73 "
               "replication throttle on the brokers and topics involved.")

    @task_group(group_id=BATCH_GROUP_ID, tooltip="One mapped instance per batch, run one after the other")
    def batches(batch: dict[str, Any]) -> None:
        execute = BatchExecuteOperator(
            task_id="execute", batch=batch, kafka_conn_id=kafka_conn_id, wait_task_id=WAIT_TASK_ID,
            recheck_seconds=p("poll_interval_seconds"), max_active_tis_per_dagrun=1,
            doc_md="Submits the batch (AlterPartitionReassignments / AlterReplicaLogDirs) once the "
                   "previous batch's wait succeeded.")
        wait = ReassignmentBatchSensor(
            task_id="wait", batch=batch, kafka_conn_id=kafka_conn_id,
            batch_timeout_minutes=p("batch_timeout_minutes"), poll_interval_seconds=p("poll_interval_seconds"),
            stall_window_minutes=p("stall_window_minutes"), throttle_bytes_per_sec=p("throttle_bytes_per_sec"),
            deferrable=deferrable, max_active_tis_per_dagrun=1,
            doc_md="Waits until every partition of the batch is at its target and in sync; logs a "
                   "progress table each poll; fails on stall, offline broker or timeout.")
        execute >> wait

    batch_group = batches.expand(batch=prepare.output)
    cancel = ReassignmentCancelOperator(
        task_id="cancel_on_failure", kafka_conn_id=kafka_conn_id, cancel_on_failure=p("cancel_on_failure"),
        trigger_rule=TriggerRule.ONE_FAILED,
        doc_md="After a failure, reverts this run's in-flight moves (only when cancel_on_failure is on).")
    throttle_remove = ThrottleRemoveOperator(
        task_id="throttle_remove", kafka_conn_id=kafka_conn_id, cancel_on_failure=p("cancel_on_failure"),
        retries=2, retry_delay=timedelta(seconds=15),
        doc_md="Teardown: restores every config this run changed to exactly its prior value, whatever "
               "happened before; releases the cluster lock.")
    report = ReassignmentReportOperator(
        task_id="report", kafka_conn_id=kafka_conn_id,
        doc_md="Checks the final placement against the plan and that every throttle config is back to "
               "its prior value; prints before/after and the time taken.")

    prepare >> throttle_set >> batch_group >> cancel >> throttle_remove
    throttle_remove.as_teardown(setups=[prepare, throttle_set], on_failure_fail_dagrun=True)
    [batch_group, throttle_remove] >> report
    # report is a teardown too: a run marked failed by hand skips every work task but still runs
    # teardowns, and the run's state then comes from them; report fails on the reverted
    # placement, so such a run stays failed instead of turning green after a clean teardown.
    report.as_teardown(setups=[prepare, throttle_set], on_failure_fail_dagrun=True)
    return ReassignmentTasks(prepare, throttle_set, batch_group, cancel, throttle_remove, report)
