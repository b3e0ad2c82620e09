"""The execute task: the pipelined executor, waiting in the triggerer while nothing is due.

Each time it runs (first start, then each time its trigger fires) the task resumes the run's
:class:`~kafka_reassign.execution.executor.MoveExecutor` from the state saved in the metadata DB, polls
the steps in flight, refills the window (throttled-replica lists, then one
AlterPartitionReassignments) and saves the state and progress. While a step is due within
:data:`_STAY_SECONDS` (many small moves) it goes on in the worker, as the CLI does, for at most
:data:`_MAX_IN_WORKER_SECONDS`; otherwise it defers to
:class:`~kafka_reassign_airflow.triggers.reassignment.ReassignmentWatchTrigger`, which watches
only the steps in flight and fires as soon as one finishes, dies or loses a broker. A plan of
any size is one task instance.
"""
from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from kafka_reassign_airflow.operators.common import RunStepOperator, admin_client, pull_paged

if TYPE_CHECKING:
    from airflow.sdk import Context

    from kafka_reassign.execution.executor import MoveExecutor
    from kafka_reassign.execution.progress import ProgressView
    from kafka_reassign.run.paged import PagedRun

#: A wake that finds the next step due (or a broker running low) within this many seconds keeps
#: the worker and goes on in it: resuming a deferred task costs seconds (scheduling, a worker,
#: the prepared plan read back), which many small moves would otherwise wait out each time.
_STAY_SECONDS = 30.0
#: At most this long in the worker per wake, then the task defers (its progress saved) and
#: gives the slot back, however busy the run is.
_MAX_IN_WORKER_SECONDS = 600.0
#: The steps-in-flight table goes to the log at most this often (the summary line every poll).
_TABLE_EVERY_SECONDS = 60.0
#: Extra seconds a deferral may last beyond a step's timeout and stall window, so the trigger
#: reports the timeout itself (naming the step) before Airflow's own trigger timeout.
_TIMEOUT_GRACE = 600.0


class ReassignmentExecuteOperator(RunStepOperator):
    """Run the prepared steps as a sliding window under the run's limits; fail on a dead step.

    A step that stalls, times out or loses a broker for longer than the stall window fails the
    task with the outcome's message (cancel_on_failure and the throttle teardown follow).
    Retrying or clearing the task resumes from the saved state: steps already done are never
    submitted again, steps in flight are adopted.

    The poll interval and the move order are the run's validated params (in the prepared run).

    :param deferrable: wait in the triggerer (default); False runs the whole loop in the worker
    """

    ui_color = "#ffe0cc"

    def __init__(self, *, deferrable: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.deferrable = deferrable

    def execute(self, context: Context) -> dict[str, Any]:
        return self._wake(context, None)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """The trigger fired: act on what it saw (or fail on its error), then defer again."""
        if event and event.get("status") == "error":
            # Not retried: the cluster could not be read; cancel_on_failure and the teardown run now.
            raise AirflowFailException(event.get("message") or "the trigger could not read progress")
        for reason in (event or {}).get("reasons", []):
            self.log.info("%s", reason)
        return self._wake(context, event)

    def _executor(self, context: Context) -> tuple[PagedRun, MoveExecutor]:
        """The run's head and executor: from the pages prepare stored (a wake reads only those it
        works on), or from the whole prepared run when prepare stored no pages (an older release)."""
        from kafka_reassign.run.paged import PagedRun

        from kafka_reassign_airflow.record_store import VariableExecutionStore, VariableRecordStore

        paged = pull_paged(context, self.prepare_task_id)
        if paged is None:
            prepared = self.prepared(context).run  # a dry run stores no pages
            if prepared.params.dry_run:
                raise AirflowSkipException("dry run: nothing is moved")
            head, pages = PagedRun.of(prepared)
            paged = head, pages.__getitem__
        head, load = paged
        run_id = context["run_id"]
        saved = VariableExecutionStore().load(run_id)
        return head, head.executor(load, run_id, VariableRecordStore(), saved=saved)

    def _wake(self, context: Context, event: dict[str, Any] | None) -> dict[str, Any]:
        from kafka_reassign.execution.executor import run_execution, work_due_within

        from kafka_reassign_airflow.pause import is_paused, resume
        from kafka_reassign_airflow.record_store import VariableExecutionStore

        head, ex = self._executor(context)
        if event:
            ex.merge_watches(event.get("watch") or {})
        from kafka_reassign_airflow import metrics

        store = VariableExecutionStore()
        poll = head.poll_interval_seconds
        tags = {"dag_id": context["ti"].dag_id, "cluster": head.cluster_id}

        table_at = [0.0]

        def on_progress(v: ProgressView) -> None:  # each poll: the log line (the table each minute), metrics
            if time.monotonic() - table_at[0] >= _TABLE_EVERY_SECONDS:
                table_at[0] = time.monotonic()
                self.log.info("Progress (poll %d):\n%s", v.polls, v.format_table())
            else:
                self.log.info("%s", v.summary())
            metrics.progress_view(v, **tags)

        admin = admin_client(self.kafka_conn_id)
        try:
            def each_poll(v: ProgressView) -> None:
                self._guard(admin, context)
                on_progress(v)

            until = time.monotonic() + _MAX_IN_WORKER_SECONDS
            stop = (lambda v: time.monotonic() > until or not work_due_within(ex, time.time(), _STAY_SECONDS)) \
                if self.deferrable else None
            view = run_execution(admin, ex, store, poll_seconds=poll, on_progress=each_poll, should_stop=stop,
                                 paused=lambda: is_paused(context["run_id"]))
        finally:
            admin.close()
        if view.finished:
            resume(context["run_id"])  # a pause left on a finished run would only confuse
            return self._finish(view)
        wait = ex.limits.step_timeout_seconds + ex.limits.stall_window_seconds + _TIMEOUT_GRACE
        opens = ex.reopens_at(time.time())  # a window opening hours away: the trigger sleeps until then
        if opens is not None:
            wait = max(wait, opens - time.time() + _TIMEOUT_GRACE)
        self.defer(trigger=self._trigger(ex, context, poll), method_name="execute_complete",
                   timeout=timedelta(seconds=wait))
        return {}  # not reached: defer() raises

    def _guard(self, admin: Any, context: Context) -> None:
        """Put the run's throttle back if someone removed or raised it; fail the run if that fails."""
        from kafka_reassign.throttle.guard import ThrottleGuardError, guard_throttle

        from kafka_reassign_airflow.record_store import VariableRecordStore

        try:
            result = guard_throttle(admin, VariableRecordStore(), context["run_id"])
        except ThrottleGuardError as exc:
            raise AirflowFailException(str(exc)) from exc
        for w in result.warnings:
            self.log.warning("%s", w)

    def _trigger(self, ex: MoveExecutor, context: Context, poll: float) -> Any:
        from kafka_reassign.throttle.guard import expected_throttle

        from kafka_reassign_airflow.record_store import VariableRecordStore
        from kafka_reassign_airflow.triggers.reassignment import ReassignmentWatchTrigger, first_refresh_seconds

        # The trigger checks (read-only) that this stays in place and wakes us when it does not.
        spec = {**ex.watch_spec(), "throttle": expected_throttle(VariableRecordStore().get(context["run_id"])),
                # Held back (paused, or outside the windows): with nothing in flight the trigger
                # sleeps until the window opens, or a minute when paused (the pause is re-read).
                "reopens_at": ex.reopens_at(time.time()), "paused": ex.paused, "held": ex.hold_reason}
        # Moves in flight but no rate yet (the run has just started): save progress soon.
        refresh = None if ex.rate_measured() or not ex.watches else first_refresh_seconds(poll)
        return ReassignmentWatchTrigger(kafka_conn_id=self.kafka_conn_id, spec=spec, poll_interval=poll,
                                        run_id=context["run_id"], refresh_seconds=refresh)

    def _finish(self, view: ProgressView) -> dict[str, Any]:
        if view.outcome != "done":
            # A stall, an offline broker or a timeout needs a decision: not retried.
            raise AirflowFailException(f"{view.outcome.replace('_', ' ')}: {view.message}")
        self.log.info("Every step is done: %s", view.summary())
        return {"outcome": view.outcome, "steps": view.steps_total, "bytes_moved": view.bytes_moved,
                "polls": view.polls}
