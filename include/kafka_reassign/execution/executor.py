"""The pipelined executor: a sliding window of KIP-435 steps in flight, refilled as steps finish.

Like Cruise Control's executor, the plan is a queue of steps and the window holds as many of
them in flight as the caps allow:

* ``max_partition_movements``: steps in flight in the whole cluster;
* ``max_movements_per_broker``: steps adding or removing a replica on any one broker, or
  copying from it as the leader;
* ``max_leader_movements``: steps in flight that change a partition's preferred leader.

A partition's next step becomes eligible only when its previous one is done (a step's
``current`` is the previous step's ``target``). Each :meth:`MoveExecutor.tick` polls the
steps in flight (:mod:`kafka_reassign.execution.cluster_io`: requests sized by the window, not the
plan), judges each with :func:`kafka_reassign.execution.outcome.step_outcome`, then refills the window
in the order of the chosen strategy (:mod:`kafka_reassign.execution.order`): the throttled
replica lists gain the new steps' entries and lose the finished ones' (one config write), and
the new steps go out in one AlterPartitionReassignments. When a step dies (stalled, failed,
timed out) nothing new is submitted and the run ends with that outcome; cancelling what is
in flight and restoring the throttle are the caller's (``cancel_on_failure``, teardown).

:func:`run_execution` is the loop of the CLI and the rehearsal; the DAG runs the same ticks
from a deferrable operator. The state is plain JSON (one character per step), saved through
an :class:`~kafka_reassign.execution.store.ExecutionStore` after every poll, so a killed worker
resumes without resubmitting anything that finished.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from kafka_reassign.cluster.port import KafkaAdminPort
from kafka_reassign.execution.poll import StepPoller
from kafka_reassign.execution.progress import ProgressView
from kafka_reassign.execution.reporting import ProgressReporting
from kafka_reassign.execution.window import AdmissionWindow


class MoveExecutor(AdmissionWindow, StepPoller, ProgressReporting):
    """Owns the state of every step of a run: queued, in flight, done or dead.

    :param steps: every KIP-435 step of the run, each partition's steps in order
    :param limits: caps and time limits
    :param run_id: the run (names its state and throttle record)
    :param throttle_rate: replication throttle in force (named in stall messages)
    :param replica_throttle: keeps the throttled-replica lists to the steps in flight (None = the
        run is not throttled)
    :param leaders: partition -> leader when prepared (the broker sending a step's bytes)
    :param urp: partitions under-replicated when prepared (``postpone-urp``)
    :param produce_rates: partition -> known produce rate in bytes/s (stall messages)
    :param record_store: the run's record store: targets are noted there as submitted *before*
        each AlterPartitionReassignments (so a later run or the reconciler knows them as ours)
    :param cluster_id: recorded with a new record
    """

    def tick(self, admin: KafkaAdminPort, now: float | None = None) -> None:
        """Poll the steps in flight, adapt the caps to their health, refill the window (one loop iteration)."""
        now = time.time() if now is None else now
        self.poll(admin, now)
        self.govern(admin, now)
        self.refill(admin, now)

    def refill(self, admin: KafkaAdminPort, now: float) -> list[int]:
        """Refill the window; lead steps just sent are confirmed at once and their copies follow.

        Kafka completes a lead step (same replicas, new order) as it accepts it, so waiting for
        the next cheap check (a second or more) would only delay the copy it makes room for:
        one ListPartitionReassignments finds it done, the election and the copy go out now.
        """
        started = super().refill(admin, now)
        if any(self.steps[i].is_leader_only for i in started if i in self.watches):
            finished, _ = self.quick_check(admin, now)
            if finished:
                started += super().refill(admin, now)
        return started


#: Seconds within which a wake counts as reached.
_SLACK = 1e-3


def run_execution(admin: KafkaAdminPort, executor: MoveExecutor, store: Any, *, poll_seconds: float,
                  on_progress: Callable[[ProgressView], None] | None = None,
                  should_stop: Callable[[ProgressView], bool] | None = None,
                  paused: Callable[[], bool] | None = None,
                  sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.time) -> ProgressView:
    """Tick, save, report, wait for work until the run is done, dead or asked to stop.

    :param store: an :class:`~kafka_reassign.execution.store.ExecutionStore` (None = not durable)
    :param poll_seconds: time between full polls (sizes, lag, stall clocks); a finished step is
        seen sooner, by the cheap checks of :mod:`kafka_reassign.execution.wake`
    :param should_stop: checked after each poll (e.g. a signal): True returns with the run in progress
    :param paused: read before each poll: True holds new steps back (an operator's pause request)
    :returns: the last progress view (its ``outcome`` says how the run ended)
    """
    while True:
        now = clock()
        if paused is not None:
            executor.paused = paused()
        executor.tick(admin, now)
        view = executor.progress(now)
        if store is not None:
            store.save(executor.run_id, executor.state_json(), view.to_json())
        if on_progress is not None:
            on_progress(view)
        if view.finished or (should_stop is not None and should_stop(view)):
            return view
        wait_for_work(admin, executor, store, now + poll_seconds, sleep, clock)


def wait_for_work(admin: KafkaAdminPort, executor: MoveExecutor, store: Any, next_poll: float,
                  sleep: Callable[[float], None], clock: Callable[[], float]) -> None:
    """Sleep until a full poll is due (``next_poll``, or a step changed by someone), refilling on
    the way: when cheap checks find steps finished, and when a held-back broker runs low. A
    maintenance window opening before ``next_poll`` ends the wait then.
    """
    while True:
        now = clock()
        check, refill = executor.wake_at(now)
        reopen = executor.reopens_at(now)
        wake = min(t for t in (next_poll, check, refill, reopen) if t is not None)
        if wake > now + _SLACK:
            sleep(wake - now)
            now = clock()
        now += _SLACK  # a clock that stops a hair short of a wake (float sums) must not spin
        if now >= next_poll or (reopen is not None and now >= reopen):
            return
        if refill is not None and now >= refill:
            if executor.top_up(admin, now) and store is not None:
                store.save(executor.run_id, executor.state_json(), executor.progress(now).to_json())
        elif check is not None and now >= check:
            finished, full_poll = executor.quick_check(admin, now)
            if full_poll or executor.dead:
                return
            if finished:  # refill with the listing just read: the check and the refill are the requests
                executor.refill(admin, now)
                if store is not None:
                    store.save(executor.run_id, executor.state_json(), executor.progress(now).to_json())


def work_due_within(executor: MoveExecutor, now: float, seconds: float) -> bool:
    """Whether a step in flight is due, or a held-back broker runs low, within ``seconds``."""
    return any(t is not None and t - now <= seconds for t in executor.wake_at(now))
