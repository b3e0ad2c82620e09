"""Cancelling this run's in-flight moves after a failure."""
from __future__ import annotations

from typing import TYPE_CHECKING

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from kafka_reassign_airflow.operators.common import RunStepOperator, admin_client

if TYPE_CHECKING:
    from logging import Logger

    from airflow.sdk import Context

    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.execution.ownership import SubmittedTargets
    from kafka_reassign.run.cancel import CancelReport
    from kafka_reassign.run.prepare import PreparedRun


class ReassignmentCancelOperator(RunStepOperator):
    """Cancel (revert) this run's in-flight moves after a failure, when cancel_on_failure is on.

    Only the reassignments this run's durable record lists as submitted (or adopted) and
    still heading there are cancelled (:mod:`kafka_reassign.execution.ownership`), never
    another tool's. Skipped when the run's validated
    ``cancel_on_failure`` (in the prepared run) is off.
    """

    ui_color = "#fcdede"

    def execute(self, context: Context) -> CancelReport:
        from kafka_reassign.execution.ownership import run_submitted

        from kafka_reassign_airflow.record_store import VariableRecordStore

        payload = self.prepared(context)
        if not payload.run.params.cancel_on_failure:
            raise AirflowSkipException("cancel_on_failure is off: in-flight moves keep going")
        if payload.dry_run:
            raise AirflowSkipException("dry run: nothing was submitted")
        admin = admin_client(self.kafka_conn_id)
        try:
            out = cancel_own_moves(admin, payload.run, run_submitted(VariableRecordStore(), context["run_id"]),
                                   self.log)
        finally:
            admin.close()
        if out.get("errors"):
            raise AirflowFailException(f"could not cancel every in-flight move of this run: {out['errors']}")
        return out

def cancel_own_moves(admin: KafkaAdmin, run: PreparedRun, submitted: SubmittedTargets,
                     log: Logger) -> CancelReport:
    """Cancel every in-flight move of the prepared ``run``; return what was cancelled.

    :param submitted: what the run's durable record lists as submitted: only those moves are ours
    """
    from kafka_reassign.run.cancel import cancel_in_flight

    out = cancel_in_flight(admin, run, submitted=submitted)
    if out["cancelled"]:
        log.warning("Cancelled %d in-flight move(s) of this run (reverted to their replicas before the "
                    "move): %s", len(out["cancelled"]), ", ".join(out["cancelled"]))
    else:
        log.info("No move of this run was in flight: nothing to cancel")
    if out.get("left"):
        log.warning("Left alone (not ours): %s", ", ".join(out["left"]))
    return out
