"""A whole reassignment run, chained: prepare, set the throttle, execute, and always restore.

:func:`~kafka_reassign.run.prepare.prepare` (read + validate + KIP-435 steps + throttle rates;
writes nothing) -> :func:`~kafka_reassign.throttle.apply.apply_throttle` (record prior values
durably, then set the rates) -> the pipelined executor (:mod:`kafka_reassign.execution.executor`:
a window of steps in flight, throttled-replica lists following it) -> finally
:func:`~kafka_reassign.throttle.restore.restore_after_run` (and
:func:`~kafka_reassign.run.cancel.cancel_in_flight` first when the run failed and asked for it).

The Airflow operators call these one per task; :func:`run_reassignment` chains them for
the command line and the tests. A run id tags what a run owns: its throttle record (with
the moves it submitted), its execution state.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from kafka_reassign.cluster.port import KafkaAdminPort
from kafka_reassign.cluster.state import TopicPartition
from kafka_reassign.errors import ReassignError
from kafka_reassign.execution.executor import MoveExecutor, run_execution
from kafka_reassign.execution.step_state import DONE
from kafka_reassign.execution.outcome import Outcome
from kafka_reassign.execution.ownership import run_submitted
from kafka_reassign.execution.progress import ProgressView
from kafka_reassign.execution.store import ExecutionStore
from kafka_reassign.planning.plan import ReassignmentPlan
from kafka_reassign.planning.validate import ReassignParams
from kafka_reassign.run.cancel import CancelReport, cancel_in_flight
from kafka_reassign.run.paged import PagedRun
from kafka_reassign.run.prepare import PreparedRun, Rehearser, new_run_id, prepare
from kafka_reassign.throttle.apply import apply_throttle
from kafka_reassign.throttle.guard import ThrottleGuard
from kafka_reassign.throttle.record import RecordStore, submitted_targets
from kafka_reassign.throttle.restore import RestoreResult, finish_hint, restore_after_run, restore_throttle

log = logging.getLogger(__name__)

#: Polls between two checks of the run's throttle (ThrottleGuard) while moves are in flight.
GUARD_EVERY_POLLS = 1


def restore_unrestored(admin: KafkaAdminPort, store: Any, cluster_id: str | None = None) -> list[RestoreResult]:
    """Restore every unrestored record (of ``cluster_id`` when given): the reconciler's job."""
    out = []
    for rec in store.list_unrestored():
        if cluster_id is not None and rec.cluster_id not in (None, cluster_id):
            continue
        out.append(restore_throttle(admin, store, rec.run_id))
    return out


@dataclass
class RunResult:
    """Outcome of :func:`run_reassignment`."""

    run_id: str
    prepared: PreparedRun
    dry_run: bool = False
    progress: ProgressView | None = None
    restore: RestoreResult | None = None
    cancelled: CancelReport | None = None
    error: str | None = None
    throttle_reapplied: int = 0

    @property
    def steps_done(self) -> int:
        return self.progress.steps_done if self.progress is not None else 0

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "dry_run": self.dry_run, "steps": len(self.prepared.steps),
                "steps_done": self.steps_done, "outcome": self.progress.outcome if self.progress else None,
                "error": self.error, "cancelled": self.cancelled,
                "restore": self.restore.to_json() if self.restore else None}


def executor_for(prepared: PreparedRun, run_id: str, record_store: RecordStore | None, *,
                 saved: Mapping[str, Any] | None = None, strategy: str | None = None,
                 produce_rates: Mapping[TopicPartition, float] | None = None) -> MoveExecutor:
    """The run's executor: its steps, limits and throttle record; resumed from ``saved`` state.

    :param record_store: where the throttle record is (None: the replica lists are not managed)
    :param saved: what an :class:`ExecutionStore` loaded for this run (``{"state": ...}``)
    """
    paged, pages = PagedRun.of(prepared, strategy)
    return paged.executor(pages.__getitem__, run_id, record_store, saved=saved, produce_rates=produce_rates)


class RunFailed(ReassignError):
    """The execution ended with a dead step (stalled, failed, timed out); ``outcome`` says which."""

    def __init__(self, outcome: Outcome, message: str) -> None:
        super().__init__(f"{outcome.value.replace('_', ' ')}: {message}")
        self.outcome = outcome


def run_reassignment(admin: KafkaAdminPort, plan: ReassignmentPlan | dict[str, Any] | str,
                     params: ReassignParams | Mapping[str, Any] | None, store: RecordStore, *,
                     run_id: str | None = None, on_progress: Callable[[ProgressView], None] | None = None,
                     on_event: Callable[[str], None] | None = None, sleep: Callable[[float], None] = time.sleep,
                     clock: Callable[[], float] = time.time,
                     produce_rates: Mapping[TopicPartition, float] | None = None,
                     exec_store: ExecutionStore | None = None, strategy: str | None = None,
                     should_stop: Callable[[ProgressView], bool] | None = None, paused: Callable[[], bool] | None = None,
                     guard_every: int = GUARD_EVERY_POLLS, rehearser: Rehearser | None = None,
                     prepared: PreparedRun | None = None) -> RunResult:
    """Run a whole reassignment (what ``kafka-reassign execute`` does).

    The throttle is restored in a ``finally`` whatever happens; on failure with
    ``cancel_on_failure`` our in-flight moves are cancelled first. With ``exec_store`` the
    execution state is saved after every poll and a run with the same id resumes from it.

    :param guard_every: check the run's throttle every this many polls (0: never, for a
        rehearsal's private simulated cluster, which nobody else can change)
    :param rehearser: see :func:`prepare`
    :param prepared: what :func:`prepare` gave for this plan, params and run id just now, nothing of
        the run in ``store`` yet (a rehearsal's, which reports it): not prepared a second time
    :raises: the first error (validation, Kafka, :class:`RunFailed`) after cleaning up
    """
    run_id = run_id or new_run_id()
    say = on_event or (lambda m: log.info("%s", m))
    saved = exec_store.load(run_id) if exec_store is not None else None
    if prepared is None:
        prepared = prepare(admin, plan, params, run_id=run_id, produce_rates=produce_rates, sleep=sleep, clock=clock,
                           own_targets=submitted_targets(store, None, run_id), rehearser=rehearser)
    result = RunResult(run_id=run_id, prepared=prepared, dry_run=prepared.params.dry_run)
    say(prepared.report())
    if prepared.params.dry_run:
        say("dry run: nothing written")
        return result
    if not prepared.steps:
        say(f"run {run_id}: nothing to move: every partition is already at its target; nothing written")
        return result
    executor = _resumed(prepared, run_id, store, saved, strategy, produce_rates, say)
    # The throttle guard reads the run's configs each poll: a removal is put back at once.
    guard = ThrottleGuard(admin, store, run_id, every=guard_every)
    watch = _guarded(guard, on_progress, say)
    failure: BaseException | None = None
    try:
        apply_throttle(admin, prepared, store, run_id)
        say(f"run {run_id}: throttle set ({len(prepared.throttle_changes)} config change(s))")
        result.progress = run_execution(admin, executor, exec_store, poll_seconds=prepared.params.poll_interval_seconds,
                                        on_progress=watch, should_stop=should_stop, paused=paused, sleep=sleep, clock=clock)
        if executor.outcome() not in (Outcome.DONE, Outcome.IN_PROGRESS):
            raise RunFailed(executor.outcome(), executor.message)
    except BaseException as exc:
        failure = exc
        result.error = str(exc)
        _cancel_after_failure(admin, prepared, store, result, say)
        raise
    finally:
        _restore_after_run(admin, store, run_id, result, guard, failure, say)
    return result


def _guarded(guard: ThrottleGuard, on_progress: Callable[[ProgressView], None] | None,
             say: Callable[[str], None]) -> Callable[[ProgressView], None]:
    """The run's progress callback: every poll, put the throttle back if someone removed or raised
    it (raises if it cannot), then pass the view on."""
    def watch(view: ProgressView) -> None:
        for w in guard.check().warnings:
            say(f"warning: {w}")
        if on_progress is not None:
            on_progress(view)
    return watch


def _resumed(prepared: PreparedRun, run_id: str, store: RecordStore, saved: Mapping[str, Any] | None,
             strategy: str | None, produce_rates: Mapping[TopicPartition, float] | None,
             say: Callable[[str], None]) -> MoveExecutor:
    """The run's executor, resumed from ``saved`` when it is the state of these very steps."""
    if saved and saved.get("state"):
        try:
            ex = executor_for(prepared, run_id, store, saved=saved, strategy=strategy, produce_rates=produce_rates)
            say(f"run {run_id}: resuming ({ex.counts[DONE]} step(s) already done)")
            return ex
        except ValueError as exc:  # the plan's steps changed since (partitions moved meanwhile)
            say(f"run {run_id}: not resuming the saved state ({exc}); starting from the cluster as it is")
    return executor_for(prepared, run_id, store, strategy=strategy, produce_rates=produce_rates)


def _cancel_after_failure(admin: KafkaAdminPort, prepared: PreparedRun, store: RecordStore, result: RunResult,
                          say: Callable[[str], None]) -> None:
    if not prepared.params.cancel_on_failure:
        return
    try:
        result.cancelled = cancel_in_flight(admin, prepared, submitted=run_submitted(store, result.run_id))
        say(f"run {result.run_id}: cancelled in-flight moves {result.cancelled['cancelled']}")
    except Exception as cexc:  # noqa: BLE001 - keep going to the throttle restore
        say(f"run {result.run_id}: cancelling in-flight moves failed: {cexc}")


def _restore_after_run(admin: KafkaAdminPort, store: RecordStore, run_id: str, result: RunResult, guard: ThrottleGuard,
                       failure: BaseException | None, say: Callable[[str], None]) -> None:
    """Restore the throttle (kept while our moves are in flight: :func:`restore_after_run`)."""
    try:
        result.restore = restore_after_run(admin, store, run_id)
        say(result.restore.message())
        for w in result.restore.warnings:
            say(f"warning: {w}")
    except Exception as rexc:  # noqa: BLE001
        say(f"run {run_id}: RESTORING THE THROTTLE FAILED: {rexc}; {finish_hint(run_id)}")
        if failure is None:
            raise ReassignError(f"throttle restore failed for run {run_id}: {rexc}") from rexc
    result.throttle_reapplied = len(guard.reapplied)
    if guard.summary():
        say(f"warning: {guard.summary()}")
    if failure is None and result.restore is not None and not result.restore.done:
        raise ReassignError(result.restore.message())
