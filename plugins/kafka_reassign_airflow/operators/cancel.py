"""Cancelling this run's in-flight moves after a failure."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from kafka_reassign_airflow.operators.common import RunStepOperator, admin_client, truthy

if TYPE_CHECKING:
    from airflow.sdk import Context


class ReassignmentCancelOperator(RunStepOperator):
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
        if not truthy(self.cancel_on_failure):
            raise AirflowSkipException("cancel_on_failure is off: in-flight moves keep going")
        data = self.prepared(context)
        if data.get("dry_run"):
            raise AirflowSkipException("dry run: nothing was submitted")
        admin = admin_client(self.kafka_conn_id)
        try:
            out = cancel_own_moves(admin, data, self.log)
        finally:
            admin.close()
        if out.get("errors"):
            raise AirflowFailException(f"could not cancel every in-flight move of this run: {out['errors']}")
        return out

def own_in_flight(admin: Any, data: dict[str, Any]) -> list[tuple[str, int]]:
    """Partitions still moving to one of this run's step targets (ListPartitionReassignments)."""
    from kafka_reassign.run.reassign import PreparedRun

    own = PreparedRun.from_json(data).own_targets()
    in_flight = admin.list_partition_reassignments(list(own))
    return sorted(k for k, inf in in_flight.items() if tuple(inf.target) in own.get(k, []))


def cancel_own_moves(admin: Any, data: dict[str, Any], log: Any) -> dict[str, Any]:
    """Cancel every in-flight move of the prepared run ``data``; return what was cancelled."""
    from kafka_reassign.run.reassign import PreparedRun, cancel_in_flight

    out = cancel_in_flight(admin, PreparedRun.from_json(data))
    if out["cancelled"]:
        log.warning("Cancelled %d in-flight move(s) of this run (reverted to their replicas before the "
                    "move): %s", len(out["cancelled"]), ", ".join(out["cancelled"]))
    else:
        log.info("No move of this run was in flight: nothing to cancel")
    if out.get("left"):
        log.warning("Left alone (not ours): %s", ", ".join(out["left"]))
    return out
