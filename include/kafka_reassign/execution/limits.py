"""The caps on what is in flight and the time limits steps are judged by (the executor's limits)."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

from kafka_reassign import defaults as D
from kafka_reassign.errors import ParamError, Problem
from kafka_reassign.execution.order import DEFAULT_STRATEGY, parse_strategy
from kafka_reassign.execution.steps import StepMove


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
