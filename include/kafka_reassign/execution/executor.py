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
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

from kafka_reassign import defaults as D
from kafka_reassign.cluster.port import KafkaAdminPort
from kafka_reassign.errors import ParamError, Problem
from kafka_reassign.execution.order import DEFAULT_STRATEGY, parse_strategy
from kafka_reassign.execution.poll import StepPoller
from kafka_reassign.execution.progress import ProgressView
from kafka_reassign.execution.reporting import ProgressReporting
from kafka_reassign.execution.steps import StepMove
from kafka_reassign.execution.window import AdmissionWindow


@dataclass(frozen=True)
class ExecutionLimits:
    """Caps on what is in flight, and the time limits steps are judged by.

    :param max_partition_movements: steps in flight in the whole cluster
    :param max_movements_per_broker: steps adding or removing a replica on one broker, or copying
        from it as the leader
    :param max_leader_movements: steps in flight that change the preferred leader
    :param step_timeout_seconds: a step not done this long after its submission times out
    :param stall_window_seconds: bytes left not falling (or a needed broker offline) this long
    :param strategy: ordering strategy, see :mod:`kafka_reassign.execution.order`
    """

    max_partition_movements: int = D.MAX_PARTITION_MOVEMENTS
    max_movements_per_broker: int = D.MAX_MOVEMENTS_PER_BROKER
    max_leader_movements: int = D.MAX_LEADER_MOVEMENTS
    step_timeout_seconds: float = D.MOVE_TIMEOUT_MINUTES * 60.0
    stall_window_seconds: float = D.STALL_WINDOW_SECONDS
    strategy: str = DEFAULT_STRATEGY

    @classmethod
    def from_params(cls, params: Any, strategy: str | None = None) -> "ExecutionLimits":
        """From validated run params (``move_timeout_minutes`` is the per-step timeout)."""
        return cls(max_partition_movements=params.max_partition_movements,
                   max_movements_per_broker=params.max_movements_per_broker,
                   max_leader_movements=params.max_leader_movements,
                   step_timeout_seconds=float(params.move_timeout_minutes) * 60.0,
                   stall_window_seconds=float(params.stall_window_seconds),
                   strategy=strategy or getattr(params, "movement_strategy", None) or cls.strategy)

    def validate(self, steps: Sequence[StepMove] = ()) -> None:
        """Raise :class:`ParamError` naming every limit at or below 0, or a step that can never fit."""
        problems = []
        for name in ("max_partition_movements", "max_movements_per_broker", "max_leader_movements",
                     "step_timeout_seconds", "stall_window_seconds"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                problems.append(Problem(name, f"must be > 0, got {v!r}", "bad_param"))
        try:
            parse_strategy(self.strategy)
        except ValueError as exc:
            problems.append(Problem("strategy", str(exc), "bad_param"))
        if not problems:
            for s in steps:
                # A step adds or removes at most one replica per broker: it needs one slot on each.
                load = {b: 1 for b in s.brokers_touched}
                over = [b for b, n in load.items() if n > self.max_movements_per_broker]
                if over or (s.moves_leader and self.max_leader_movements < 1):
                    problems.append(Problem(s.name, f"step {list(s.current)} -> {list(s.target)} can never fit "
                                            "max_movements_per_broker / max_leader_movements", "bad_param"))
                    break
        if problems:
            raise ParamError(problems, "execution limits")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


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
        """Poll the steps in flight, then refill the window (what one loop iteration does)."""
        now = time.time() if now is None else now
        self.poll(admin, now)
        self.refill(admin, now)


def run_execution(admin: KafkaAdminPort, executor: MoveExecutor, store: Any, *, poll_seconds: float,
                  on_progress: Callable[[ProgressView], None] | None = None,
                  should_stop: Callable[[ProgressView], bool] | None = None,
                  sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.time) -> ProgressView:
    """Tick, save, report, sleep until the run is done, dead or asked to stop.

    :param store: an :class:`~kafka_reassign.execution.store.ExecutionStore` (None = not durable)
    :param poll_seconds: time between polls; a finished step waits at most this long for its successor
    :param should_stop: checked after each poll (e.g. a signal): True returns with the run in progress
    :returns: the last progress view (its ``outcome`` says how the run ended)
    """
    while True:
        now = clock()
        executor.tick(admin, now)
        view = executor.progress(now)
        if store is not None:
            store.save(executor.run_id, executor.state_json(), view.to_json())
        if on_progress is not None:
            on_progress(view)
        if view.finished or (should_stop is not None and should_stop(view)):
            return view
        sleep(poll_seconds)
