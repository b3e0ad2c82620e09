"""Exceptions of the reassignment domain package.

Every error names what it is about (the plan entry, the partition, the Kafka error
name) so that an operator reading a task log knows what to fix without a debugger.
"""
from __future__ import annotations

from dataclasses import dataclass


class ReassignError(Exception):
    """Base class of every error raised by :mod:`kafka_reassign`."""


@dataclass(frozen=True)
class Problem:
    """One reason a plan, a snapshot or a parameter set is rejected.

    :param entry: what is wrong, e.g. ``partitions[3] (orders-7)`` or ``throttle_bytes_per_sec``
    :param reason: why, in words an operator understands
    :param kind: a stable machine-readable category (``unknown_broker``, ...)
    """

    entry: str
    reason: str
    kind: str = "invalid"

    def __str__(self) -> str:
        return f"{self.entry}: {self.reason}"

    def to_json(self) -> dict[str, str]:
        return {"entry": self.entry, "reason": self.reason, "kind": self.kind}


class ProblemListError(ReassignError, ValueError):
    """An error carrying every problem found (not only the first one)."""

    headline = "invalid input"

    def __init__(self, problems: list[Problem] | Problem | str, headline: str | None = None) -> None:
        if isinstance(problems, str):
            problems = [Problem("input", problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: list[Problem] = list(problems)
        if headline is not None:
            self.headline = headline
        super().__init__(self._render())

    def _render(self) -> str:
        n = len(self.problems)
        lines = [f"{self.headline} ({n} problem{'s' if n != 1 else ''}):"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)

    @property
    def kinds(self) -> set[str]:
        """The set of problem kinds, handy for tests and for metrics."""
        return {p.kind for p in self.problems}


class PlanError(ProblemListError):
    """The reassignment JSON is malformed (types, structure, version)."""

    headline = "invalid reassignment plan"


class PlanValidationError(ProblemListError):
    """The plan does not fit the cluster (or the parameters are wrong); nothing was written."""

    headline = "plan rejected, nothing was written"


class ParamError(ProblemListError):
    """Run parameters (throttle, movement limits, timeouts) are invalid."""

    headline = "invalid parameters"


class SnapshotError(ProblemListError):
    """A cluster snapshot file does not follow the snapshot format (version 1)."""

    headline = "invalid snapshot"


class KafkaAdminError(ReassignError):
    """A Kafka admin request failed permanently.

    :param operation: what we tried, e.g. ``AlterPartitionReassignments``
    :param error_name: Kafka's error name, e.g. ``INVALID_REPLICA_ASSIGNMENT``
    :param detail: extra text (the broker's message, the resource)
    """

    def __init__(self, operation: str, error_name: str, detail: str = "") -> None:
        self.operation = operation
        self.error_name = error_name
        self.detail = detail
        msg = f"{operation} failed: {error_name}"
        if detail:
            msg += f" ({detail})"
        super().__init__(msg)


class PreflightError(ProblemListError):
    """A move would stall at the run's throttle (KIP-73 with in-sync traffic counted); nothing was written."""

    headline = "pre-flight: moves would stall at this throttle, nothing was written"


class ThrottleRecordError(ReassignError):
    """The durable throttle record could not be read or written."""


# The planner's own errors.
class PlannerError(ReassignError):
    """Base of planner-only errors that are not a list of input problems."""


class GoalError(ProblemListError):
    """The goal or its options cannot be met on this cluster (e.g. RF above the broker count)."""

    headline = "goal cannot be met"


class ConstraintError(ProblemListError):
    """A computed assignment breaks a hard constraint (rack, capacity, exclusions)."""

    headline = "assignment breaks the planner's constraints"


class AssignorError(ReassignError, ValueError):
    """A replica assignor (built-in or the user's class) could not produce an assignment.

    :param assignor: dotted path or name of the assignor class
    :param problem: what went wrong, in words
    """

    def __init__(self, assignor: str, problem: str) -> None:
        self.assignor = assignor
        self.problem = problem
        super().__init__(f"replica assignor {assignor} failed: {problem}")
