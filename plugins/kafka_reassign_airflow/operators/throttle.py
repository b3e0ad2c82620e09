"""Throttle tasks: set the KIP-73 throttle (priors recorded first) and the teardown restoring it.

A remove-brokers run also cordons its leaving brokers here, and the teardown puts their prior
value back unless execute succeeded (:mod:`kafka_reassign_airflow.operators.cordon`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from kafka_reassign_airflow.operators.cancel import cancel_own_moves
from kafka_reassign_airflow.operators.common import RunStepOperator, admin_client, pull_prepared
from kafka_reassign_airflow.operators.cordon import cordon_leaving, release_unless_done

if TYPE_CHECKING:
    from airflow.sdk import Context

    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.execution.ownership import SubmittedTargets
    from kafka_reassign.run.payload import PreparedPayload
    from kafka_reassign.throttle.restore import RestoreResult


class ThrottleSetOperator(RunStepOperator):
    """Set the KIP-73 replication throttle for the whole run, recording prior values first.

    Throttle records left behind by earlier runs on the same cluster (a worker killed before
    its teardown) are adopted: their prior values become this run's, so this run's teardown
    restores what they left (this run holds the cluster lock, so they are stale).
    """

    ui_color = "#fff3d6"

    def execute(self, context: Context) -> dict[str, Any]:
        from kafka_reassign.throttle.apply import apply_throttle

        from kafka_reassign_airflow.record_store import VariableRecordStore

        payload = self.prepared(context)
        if payload.dry_run:
            raise AirflowSkipException("dry run: no throttle is set")
        store = VariableRecordStore()
        run_id = context["run_id"]
        admin = admin_client(self.kafka_conn_id)
        try:
            cordon_leaving(context, admin, store)  # before the first move; refusals write nothing
            record = apply_throttle(admin, payload.run, store, run_id)
        finally:
            admin.close()
        for note in record.notes:
            self.log.warning("%s", note)
        written = [c.describe() for c in record.changes]
        # Each write is logged once, by the domain layer as it is made; here the one-line result.
        self.log.info("Throttle set: %d recorded change(s), prior values in Variable %s", len(written),
                      store.key_for(run_id))
        from kafka_reassign_airflow import metrics

        rate = payload.run.params.throttle_bytes_per_sec
        brokers = {c.name for c in record.changes if c.resource_type == "broker"}
        metrics.throttle_set(rate_bytes_per_sec=rate or 0, brokers=len(brokers), dag_id=context["ti"].dag_id,
                             cluster=payload.cluster_id)
        return {"record_key": store.key_for(run_id), "changes": len(written)}

class ThrottleRemoveOperator(RunStepOperator):
    """Teardown: undo every throttle config this run changed (only its own part, per resource).

    Runs whatever happened before (a failed batch, a run marked failed by hand). When the
    run ends with its own moves still in flight and cancel_on_failure is on, they are
    cancelled first (nothing would watch them any more); with it off they keep going and the
    throttle stays with them: the record stays pending and the kafka_throttle_reconciler DAG
    restores it once they finish. A broker or topic that cannot be reached is left pending
    too; the task then fails with a message naming it and how to finish. Releases the
    cluster lock. ``cancel_on_failure`` is the run's validated one (in the prepared run).
    """

    ui_color = "#fff3d6"
    #: its state decides whether a remove-brokers run's cordons stay (success) or are put back
    execute_task_id = "execute"

    def execute(self, context: Context) -> dict[str, Any]:
        from kafka_reassign.throttle.restore import MOVES_PENDING

        from kafka_reassign_airflow.record_store import ClusterLock

        run_id = context["run_id"]
        try:
            payload = pull_prepared(context, self.prepare_task_id)
        except AirflowFailException as exc:
            # An XCom this release cannot read (an upgrade mid-run) must not strand the throttle:
            # the durable record alone says what to restore.
            return self._restore_from_record(context, exc)
        out: dict[str, Any] = {"cancelled": [], "restore": None}
        result = None
        if payload is not None and not payload.dry_run:
            result = self._restore(context, payload, out)
        else:
            self.log.info("Nothing was written by this run (dry run or prepare did not finish)")
        cluster_id = payload.cluster_id if payload is not None else None
        if cluster_id and ClusterLock.release(cluster_id, run_id):
            self.log.info("Released the lock of cluster %s", cluster_id)
        if result is not None and not result.done and set(result.pending) != {MOVES_PENDING}:
            raise AirflowFailException(result.message())
        return out

    def _restore_from_record(self, context: Context, unreadable: AirflowFailException) -> dict[str, Any]:
        """Restore from the run's throttle record alone (its moves are left to finish: with the
        payload unreadable, cancel_on_failure is unknown), release the lock, then fail naming why."""
        from kafka_reassign.throttle.restore import restore_after_run

        from kafka_reassign_airflow.record_store import ClusterLock, VariableRecordStore

        run_id = context["run_id"]
        store = VariableRecordStore()
        record = store.get(run_id)
        if record is not None:
            admin = admin_client(self.kafka_conn_id)
            try:
                result = restore_after_run(admin, store, run_id)
            finally:
                admin.close()
            self.log.warning("Prepared XCom unreadable; throttle restored from the record: %s", result.message())
        if record is not None and record.cluster_id and ClusterLock.release(record.cluster_id, run_id):
            self.log.info("Released the lock of cluster %s", record.cluster_id)
        raise unreadable

    def _restore(self, context: Context, payload: PreparedPayload, out: dict[str, Any]) -> RestoreResult:
        """Cancel or keep the run's moves still in flight, then restore its throttle (fills ``out``)."""
        from kafka_reassign.throttle.notices import leftover_changes
        from kafka_reassign.execution.ownership import run_submitted
        from kafka_reassign.throttle.restore import restore_after_run

        from kafka_reassign_airflow import metrics
        from kafka_reassign_airflow.record_store import VariableRecordStore

        run_id = context["run_id"]
        store = VariableRecordStore()
        admin = admin_client(self.kafka_conn_id)
        try:
            self._settle_in_flight(admin, payload, run_submitted(store, run_id), out)
            result = restore_after_run(admin, store, run_id)
            release_unless_done(context, admin, store, self.execute_task_id)
        finally:
            admin.close()
        out["restore"] = result.to_json()
        left = {c.name for c in leftover_changes(store.get(run_id)) if c.resource_type == "broker"}
        metrics.throttle_leftovers(len(left), dag_id=context["ti"].dag_id, cluster=payload.cluster_id)
        if result.no_record:
            self.log.info("Run %s set no throttle: nothing to restore", run_id)
        else:
            lines = [c.describe() for c in result.changes]
            self.log.info("Throttle restored (%d write(s)):\n%s", len(lines), "\n".join(lines) or "(already as before)")
        for w in result.warnings:
            self.log.warning("%s", w)
        return result

    def _settle_in_flight(self, admin: KafkaAdmin, payload: PreparedPayload, submitted: SubmittedTargets,
                          out: dict[str, Any]) -> None:
        """Cancel the run's moves still in flight when cancel_on_failure is on; otherwise they go on
        and keep the throttle (``restore_after_run`` leaves it while they are in flight)."""
        from kafka_reassign.execution.ownership import own_moves_in_flight, partition_names

        moving = own_moves_in_flight(admin, submitted)
        if not moving:
            return
        names = ", ".join(partition_names(moving))
        if payload.run.params.cancel_on_failure:
            self.log.warning("The run ended with moves still in flight (%s): cancelling them "
                             "before removing the throttle", names)
            out["cancelled"] = cancel_own_moves(admin, payload.run, submitted, self.log)["cancelled"]
            return
        self.log.warning("The run ended with moves still in flight (%s); cancel_on_failure is "
                         "off, so they continue and the throttle stays until they finish "
                         "(the kafka_throttle_reconciler DAG restores it then)", names)
