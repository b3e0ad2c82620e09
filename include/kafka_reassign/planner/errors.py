"""Errors of the planner. Each one names what is wrong so an operator can fix the input."""
from __future__ import annotations

from kafka_reassign.errors import Problem, ProblemListError, ReassignError, SnapshotError

__all__ = ["Problem", "SnapshotError", "GoalError", "AssignorError", "ConstraintError", "PlannerError"]


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
