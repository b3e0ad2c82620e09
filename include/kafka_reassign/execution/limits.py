"""The caps on what is in flight and the time limits steps are judged by (the executor's limits)."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

from kafka_reassign import defaults as D
from kafka_reassign.errors import ParamError, Problem
from kafka_reassign.execution.order import DEFAULT_STRATEGY, parse_strategy
from kafka_reassign.execution.steps import StepMove

#: Least seconds of the throttle kept in flight per broker: a wake of the DAG's execute task
#: (trigger event, scheduler, worker start) takes seconds, and a broker must not run dry meanwhile.
MIN_BUDGET_SECONDS = 10.0
#: The adaptive throttle's settings, by the same names in the run params and the limits.
ADAPTIVE_THROTTLE_FIELDS = ("adaptive_throttle", "throttle_min_bytes_per_sec", "throttle_max_bytes_per_sec",
                            "broker_network_capacity_bytes_per_sec", "broker_network_capacities")


def budget_for(poll_interval_seconds: float) -> float:
    """Seconds of work a broker keeps in flight: two polls, so a late wake still finds it busy."""
    return max(2.0 * poll_interval_seconds, MIN_BUDGET_SECONDS)


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
    :param budget_seconds: seconds of the throttle a broker should have in flight: a step is
        admitted only if each of its brokers has less (see ``AdmissionWindow.pick``)
    :param adaptive_concurrency: the caps follow the ISR health of the moving partitions
        (:mod:`kafka_reassign.execution.health`)
    :param min_movements_per_broker: adaptive concurrency's floor (at most the per-broker cap:
        a larger one is clamped to it)
    :param maintenance_windows: when new steps may start (:mod:`kafka_reassign.execution.windows`;
        empty: always)
    :param adaptive_throttle: each broker's rate follows its client traffic within the bounds
        (:mod:`kafka_reassign.execution.rate_control`)
    :param throttle_min_bytes_per_sec: the adaptive throttle's floor
    :param throttle_max_bytes_per_sec: the adaptive throttle's ceiling
    :param broker_network_capacity_bytes_per_sec: a broker's link (None: adaptive throttle off)
    :param broker_network_capacities: ``BROKER=RATE`` for brokers whose link differs
    """

    max_partition_movements: int = D.MAX_PARTITION_MOVEMENTS
    max_movements_per_broker: int = D.MAX_MOVEMENTS_PER_BROKER
    max_leader_movements: int = D.MAX_LEADER_MOVEMENTS
    step_timeout_seconds: float = D.MOVE_TIMEOUT_MINUTES * 60.0
    stall_window_seconds: float = D.STALL_WINDOW_SECONDS
    strategy: str = DEFAULT_STRATEGY
    budget_seconds: float = budget_for(D.POLL_INTERVAL_SECONDS)
    adaptive_concurrency: bool = D.ADAPTIVE_CONCURRENCY
    min_movements_per_broker: int = D.MIN_MOVEMENTS_PER_BROKER
    maintenance_windows: tuple[str, ...] = ()
    adaptive_throttle: bool = D.ADAPTIVE_THROTTLE
    throttle_min_bytes_per_sec: int = D.THROTTLE_MIN_BYTES_PER_SEC
    throttle_max_bytes_per_sec: int = D.THROTTLE_MAX_BYTES_PER_SEC
    broker_network_capacity_bytes_per_sec: int | None = None
    broker_network_capacities: tuple[str, ...] = ()

    @classmethod
    def from_params(cls, params: Any, strategy: str | None = None) -> "ExecutionLimits":
        """From validated run params (``move_timeout_minutes`` is the per-step timeout)."""
        return cls(max_partition_movements=params.max_partition_movements,
                   max_movements_per_broker=params.max_movements_per_broker,
                   max_leader_movements=params.max_leader_movements,
                   step_timeout_seconds=float(params.move_timeout_minutes) * 60.0,
                   stall_window_seconds=float(params.stall_window_seconds),
                   strategy=strategy or getattr(params, "movement_strategy", None) or cls.strategy,
                   budget_seconds=budget_for(float(params.poll_interval_seconds)),
                   adaptive_concurrency=bool(getattr(params, "adaptive_concurrency", D.ADAPTIVE_CONCURRENCY)),
                   min_movements_per_broker=int(getattr(params, "min_movements_per_broker",
                                                        D.MIN_MOVEMENTS_PER_BROKER)),
                   maintenance_windows=tuple(getattr(params, "maintenance_windows", ()) or ()),
                   **{k: getattr(params, k) for k in ADAPTIVE_THROTTLE_FIELDS if hasattr(params, k)})

    def validate(self, steps: Sequence[StepMove] = ()) -> None:
        """Raise :class:`ParamError` naming every limit at or below 0, or a step that can never fit."""
        problems = []
        for name in ("max_partition_movements", "max_movements_per_broker", "max_leader_movements",
                     "step_timeout_seconds", "stall_window_seconds", "budget_seconds",
                     "min_movements_per_broker"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                problems.append(Problem(name, f"must be > 0, got {v!r}", "bad_param"))
        try:
            parse_strategy(self.strategy)
        except ValueError as exc:
            problems.append(Problem("strategy", str(exc), "bad_param"))
        # A step needs one slot on each broker it touches and, when it moves the leader, one leader
        # movement: with both caps at 1 or more every step fits, so the million steps go unread.
        if not problems and (self.max_movements_per_broker < 1 or self.max_leader_movements < 1):
            for s in steps:
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
