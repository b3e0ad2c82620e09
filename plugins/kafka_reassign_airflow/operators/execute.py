"""The execute task of a batch: submit it once the previous batch is done."""
from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException, AirflowRescheduleException, AirflowSkipException

from kafka_reassign_airflow.operators.common import RunStepOperator, admin_client
from kafka_reassign_airflow.params import min_return_seconds

if TYPE_CHECKING:
    from airflow.sdk import Context


class BatchExecuteOperator(RunStepOperator):
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
        data = self.prepared(context)  # a skipped/failed prepare means nothing to do
        from kafka_reassign.errors import BatchExecutionError
        from kafka_reassign.record import note_submitted

        from kafka_reassign_airflow.record_store import VariableRecordStore

        batch = Batch.from_json(self.batch)
        # Recorded before submitting: only what a record lists counts as ours later.
        note_submitted(VariableRecordStore(), context["run_id"], data.get("cluster_id"),
                       {s.key: s.target for s in batch.steps if not s.is_log_dir_only})
        admin = admin_client(self.kafka_conn_id)
        try:
            result = execute_batch(admin, batch, run_id=context["run_id"])
        except BatchExecutionError as exc:
            self.log.error("Batch %s partly refused: %s", batch.index, json.dumps(exc.result, indent=1))
            raise AirflowFailException(str(exc)) from exc
        finally:
            admin.close()
        self.log.info("Batch %s submitted: %s", batch.index, json.dumps(result, default=str, indent=1))
        return result
