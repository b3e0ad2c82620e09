"""The planner: snapshot + goal -> Kafka reassignment plan + summary.

``plan(snapshot, goal, **options)`` (a snapshot dict) and ``plan_file(path, goal, **options)``
(a snapshot file) return ``PlanResult(plan, summary)``.

* The balancing goals (rebalance, add-brokers, remove-brokers) run on Spark (:mod:`.flow`): the
  job reads the snapshot-lines file itself (:mod:`.snapshot_file`), aggregates loads, searches
  moves as one task per rack and chooses leaders as tasks over partition groups; the driver holds
  brokers and moves only. Point ``spark_master`` (or the Spark connection of the DAG) at a
  cluster and the same code scales out. ``engine="local"`` runs the same steps in pandas.
* replication-factor, rack-repair, disks, disk-threshold and user assignors (``custom``) run on the driver
  (:mod:`.driver_plan`).
"""
from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_reassign.planning.plan import ReassignmentPlan
from kafka_reassign.planning.spark.assignor import PlanOptions, Proposal, ReplicaAssignor
from kafka_reassign.errors import (AssignorError, ConstraintError, GoalError, PlannerError,
                                           SnapshotError)
from kafka_reassign.planning.spark.goals import GOALS
from kafka_reassign.planning.spark.options import BALANCING_GOALS, CUSTOM_GOAL, GOAL_NAMES, make_options

__all__ = ["plan", "plan_file", "PlanResult", "PlanOptions", "ReplicaAssignor", "Proposal",
           "AssignorError", "GoalError", "SnapshotError", "ConstraintError", "PlannerError", "GOALS",
           "GOAL_NAMES", "CUSTOM_GOAL", "make_options"]


@dataclass
class PlanResult:
    """The plan (Kafka reassignment JSON, in executor order) and its summary."""

    plan: ReassignmentPlan
    summary: dict[str, Any]


def _balancing(opts: PlanOptions) -> bool:
    return opts.goal in BALANCING_GOALS and not opts.assignor


def plan(snapshot: Any, goal: str, spark: Any = None, **options: Any) -> PlanResult:
    """Plan ``goal`` on a snapshot dict (``kafka-reassign snapshot`` format).

    :param snapshot: the decoded snapshot
    :param goal: one of GOAL_NAMES, or "custom" with ``assignor``
    :param spark: a SparkSession to use (default: create or reuse one)
    :param options: fields of :class:`PlanOptions`
    :raises SnapshotError, GoalError, AssignorError, ConstraintError, PlannerError: naming the problem
    """
    opts = make_options(goal, **options)
    if not _balancing(opts):
        from kafka_reassign.planning.spark.driver_plan import plan_snapshot

        return PlanResult(*plan_snapshot(snapshot, opts))
    from kafka_reassign.planning.spark.flow import plan_lines
    from kafka_reassign.planning.spark.snapshot_file import write_snapshot_lines
    from kafka_reassign.cluster.snapshot import validate_snapshot

    validate_snapshot(snapshot, planning=True)
    with tempfile.TemporaryDirectory(prefix="kafka-reassign-plan-") as tmp:
        path = write_snapshot_lines(snapshot, Path(tmp) / "snapshot.jsonl")
        return PlanResult(*plan_lines(str(path), opts, spark))


def plan_file(path: str, goal: str, spark: Any = None, **options: Any) -> PlanResult:
    """Plan ``goal`` on a snapshot file: snapshot lines (read by Spark) or snapshot JSON.

    :param path: the file
    """
    from kafka_reassign.planning.spark.snapshot_file import is_snapshot_lines

    opts = make_options(goal, **options)
    if is_snapshot_lines(path):
        if _balancing(opts):
            from kafka_reassign.planning.spark.flow import plan_lines

            return PlanResult(*plan_lines(str(path), opts, spark))
        from kafka_reassign.planning.spark.snapshot_file import read_snapshot_dict

        return plan(read_snapshot_dict(path), goal, spark=spark, **options)
    return plan(json.loads(Path(path).read_text(encoding="utf-8")), goal, spark=spark, **options)
