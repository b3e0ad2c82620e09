"""Throttle tasks: set the KIP-73 throttle (priors recorded first) and the teardown restoring it."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from kafka_reassign_airflow.operators.cancel import cancel_own_moves, own_in_flight
from kafka_reassign_airflow.operators.common import RunStepOperator, admin_client, pull_prepared, truthy

if TYPE_CHECKING:
    from airflow.sdk import Context


class ThrottleSetOperator(RunStepOperator):
    """Set the KIP-73 replication throttle for the whole run, recording prior values first.

    Throttle records left behind by earlier runs on the same cluster (a worker killed before
    its teardown) are adopted: their prior values become this run's, so this run's teardown
    restores what they left (this run holds the cluster lock, so they are stale).
    """

    ui_color = "#fff3d6"

    def execute(self, context: Context) -> dict[str, Any]:
        from kafka_reassign.run.reassign import PreparedRun, apply_throttle

        from kafka_reassign_airflow.record_store import VariableRecordStore

        data = self.prepared(context)
        if data.get("dry_run"):
            raise AirflowSkipException("dry run: no throttle is set")
        store = VariableRecordStore()
        run_id = context["run_id"]
        admin = admin_client(self.kafka_conn_id)
        try:
            record = apply_throttle(admin, PreparedRun.from_json(data), store, run_id)
        finally:
            admin.close()
        for note in record.notes:
            self.log.warning("%s", note)
        written = [c.describe() for c in record.changes]
        # Each write is logged once, by the domain layer as it is made; here the one-line result.
        self.log.info("Throttle set: %d recorded change(s), prior values in Variable %s", len(written),
                      store.key_for(run_id))
        from kafka_reassign_airflow import metrics

        rate = data.get("params", {}).get("throttle_bytes_per_sec")
        brokers = {c.name for c in record.changes if c.resource_type == "broker"}
        metrics.throttle_set(rate_bytes_per_sec=rate or 0, brokers=len(brokers), dag_id=context["ti"].dag_id,
                             cluster=data.get("cluster_id"))
        return {"record_key": store.key_for(run_id), "changes": len(written)}

class ThrottleRemoveOperator(RunStepOperator):
    """Teardown: undo every throttle config this run changed (only its own part, per resource).

    Runs whatever happened before (a failed batch, a run marked failed by hand). When the
    run ends with its own moves still in flight and cancel_on_failure is on, they are
    cancelled first (nothing would watch them any more); with it off they keep going and the
    throttle stays with them: the record stays pending and the kafka_throttle_reconciler DAG
    restores it once they finish. A broker or topic that cannot be reached is left pending
    too; the task then fails with a message naming it and how to finish. Releases the
    cluster lock.

    :param cancel_on_failure: the param (templated)
    """

    template_fields: Sequence[str] = ("kafka_conn_id", "cancel_on_failure")
    ui_color = "#fff3d6"

    def __init__(self, *, cancel_on_failure: Any = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cancel_on_failure = cancel_on_failure

    def execute(self, context: Context) -> dict[str, Any]:
        from kafka_reassign.throttle.restore import MOVES_PENDING, restore_throttle

        from kafka_reassign_airflow.record_store import ClusterLock, VariableRecordStore

        run_id = context["run_id"]
        data = pull_prepared(context, self.prepare_task_id) or {}
        store = VariableRecordStore()
        out: dict[str, Any] = {"cancelled": [], "restore": None}
        result = None
        if data and not data.get("dry_run"):
            admin = admin_client(self.kafka_conn_id)
            try:
                moving = own_in_flight(admin, data)
                keep = False
                if moving:
                    names = ", ".join(f"{t}-{p}" for t, p in moving)
                    if truthy(self.cancel_on_failure):
                        self.log.warning("The run ended with moves still in flight (%s): cancelling them "
                                         "before removing the throttle", names)
                        out["cancelled"] = cancel_own_moves(admin, data, self.log)["cancelled"]
                    else:
                        keep = True
                        self.log.warning("The run ended with moves still in flight (%s); cancel_on_failure is "
                                         "off, so they continue and the throttle stays until they finish "
                                         "(the kafka_throttle_reconciler DAG restores it then)", names)
                result = restore_throttle(admin, store, run_id, keep_while_moving=keep)
            finally:
                admin.close()
            out["restore"] = result.to_json()
            from kafka_reassign.throttle.notices import leftover_changes
            from kafka_reassign_airflow import metrics

            left = {c.name for c in leftover_changes(store.get(run_id)) if c.resource_type == "broker"}
            metrics.throttle_leftovers(len(left), dag_id=context["ti"].dag_id, cluster=data.get("cluster_id"))
            if result.no_record:
                self.log.info("Run %s set no throttle: nothing to restore", run_id)
            else:
                lines = [c.describe() for c in result.changes]
                self.log.info("Throttle restored (%d write(s)):\n%s", len(lines),
                              "\n".join(lines) or "(already as before)")
            for w in result.warnings:
                self.log.warning("%s", w)
        else:
            self.log.info("Nothing was written by this run (dry run or prepare did not finish)")
        if data.get("cluster_id") and ClusterLock.release(data["cluster_id"], run_id):
            self.log.info("Released the lock of cluster %s", data["cluster_id"])
        if result is not None and not result.done and set(result.pending) != {MOVES_PENDING}:
            raise AirflowFailException(result.message())
        return out
