"""Driver-side goals: replication-factor, rack-repair, disks and user assignors (``custom``).

These goals edit a :class:`~kafka_reassign.planning.spark.cluster.Assignment` move by move in the
driver (:mod:`kafka_reassign.planning.spark.goals`); their loads are computed in plain Python. The
balancing goals (rebalance, add-brokers, remove-brokers) run on Spark in :mod:`.flow`.
"""
from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

from kafka_reassign.planning.plan import PartitionMove, ReassignmentPlan
from kafka_reassign.planning.spark.assignor import (PlanContext, PlanOptions, Proposal, assignor_name,
                                             load_assignor)
from kafka_reassign.planning.spark.cluster import ANY, Assignment, Cluster
from kafka_reassign.planning.spark.constraints import check_constraints, check_goal_scope
from kafka_reassign.errors import (AssignorError, ConstraintError, GoalError, Problem,
                                           SnapshotError)
from kafka_reassign.planning.spark.goals import GOALS, BuiltinGoal
from kafka_reassign.planning.spark.options import CUSTOM_GOAL
from kafka_reassign.planning.spark.driver_summary import build_summary


def check_goal(cluster: Cluster, opts: PlanOptions) -> list[str]:
    """Reject goals that cannot be met; return warnings for ones that can only partly be met.

    :raises GoalError: listing every problem
    """
    problems = _option_problems(cluster, opts)
    warnings: list[str] = []
    excl_b, goal_b = set(opts.exclude_brokers), set(opts.brokers)
    placeable = [b for b in cluster.brokers if b not in excl_b
                 and not (opts.goal == "remove-brokers" and b in goal_b)]
    racks = {cluster.rack_of(b) for b in placeable}
    if opts.goal == "remove-brokers" and goal_b and not problems:
        _check_drain(cluster, opts, placeable, racks, problems, warnings)
    if opts.goal == "replication-factor":
        _check_replication_factor(cluster, opts, placeable, racks, problems, warnings)
    if problems:
        raise GoalError(problems)
    return warnings


def _option_problems(cluster: Cluster, opts: PlanOptions) -> list[Problem]:
    """Unknown brokers or topics, brokers both targeted and excluded, a missing --brokers."""
    problems: list[Problem] = []
    for name in ("brokers", "exclude_brokers"):
        unknown = [b for b in getattr(opts, name) if b not in cluster.brokers]
        if unknown:
            problems.append(Problem(name, f"unknown broker ids {unknown} (the snapshot has "
                                          f"{sorted(cluster.brokers)})", "unknown_broker"))
    for name in ("topics", "exclude_topics"):
        unknown = [t for t in getattr(opts, name) if t not in cluster.topic_configs]
        if unknown:
            problems.append(Problem(name, f"unknown topics {unknown}", "unknown_topic"))
    both = set(opts.brokers) & set(opts.exclude_brokers)
    if both:
        problems.append(Problem("brokers", f"brokers {sorted(both)} are both targeted and excluded", "conflict"))
    if opts.goal in ("add-brokers", "remove-brokers") and not opts.brokers:
        problems.append(Problem("brokers", f"{opts.goal} needs --brokers", "missing_option"))
    return problems


def _check_drain(cluster: Cluster, opts: PlanOptions, placeable: list[int], racks: set[str],
                 problems: list[Problem], warnings: list[str]) -> None:
    """remove-brokers: excluded topics on the drained brokers, enough brokers and racks left."""
    goal_b, excl_b = set(opts.brokers), set(opts.exclude_brokers)
    stuck = sorted({p.topic for p in cluster.partitions
                    if p.topic in set(opts.exclude_topics) and set(p.replicas) & goal_b})
    if stuck:
        problems.append(Problem("exclude_topics", f"excluded topics {stuck[:10]} have replicas on "
                                                  "brokers to drain", "conflict"))
    max_rf = max((len(p.replicas) for p in cluster.partitions if set(p.replicas) & goal_b), default=0)
    if max_rf > len(placeable) + len(excl_b):
        problems.append(Problem("brokers", f"draining {sorted(goal_b)} leaves "
                                           f"{len(placeable)} brokers for partitions with "
                                           f"replication factor {max_rf}", "not_enough_brokers"))
    if cluster.has_racks and max_rf > len(racks):
        warnings.append(f"after draining only {len(racks)} racks remain for replication factor "
                        f"{max_rf}: some partitions will share a rack")


def _check_replication_factor(cluster: Cluster, opts: PlanOptions, placeable: list[int], racks: set[str],
                              problems: list[Problem], warnings: list[str]) -> None:
    """replication-factor: a valid factor, enough brokers and racks, not below min.insync.replicas."""
    rf = opts.replication_factor
    if not isinstance(rf, int) or isinstance(rf, bool) or rf < 1:
        problems.append(Problem("replication_factor", f"replication-factor needs an integer >= 1, "
                                                      f"got {rf!r}", "missing_option"))
        return
    if rf > len(placeable):
        problems.append(Problem("replication_factor", f"replication factor {rf} is above the "
                                                      f"{len(placeable)} brokers available", "rf_above_brokers"))
    if cluster.has_racks and rf > len(racks):
        warnings.append(f"replication factor {rf} is above the {len(racks)} racks: some "
                        "replicas will share a rack")
    for t in sorted(set(opts.topics) or set(cluster.topic_configs) - set(opts.exclude_topics)):
        idx = cluster.topic_partitions.get(t, [])
        if idx and rf < cluster.partitions[idx[0]].min_isr:
            min_isr = cluster.partitions[idx[0]].min_isr
            problems.append(Problem(f"topic {t}", f"replication factor {rf} is below its "
                                                  f"min.insync.replicas={min_isr}: producers "
                                                  "with acks=all would fail", "rf_below_min_isr"))


def _normalize(result: Any, cluster: Cluster, allowed: set[tuple[str, int]], name: str,
               allow_rf_change: bool) -> dict[int, tuple[tuple[int, ...], tuple[str, ...] | None]]:
    """Check an assignor's return value; AssignorError names the first problems found."""
    if not isinstance(result, Mapping):
        raise AssignorError(name, f"assign() must return a mapping {{(topic, partition): replicas}}, "
                                  f"got {type(result).__name__}")
    out: dict[int, tuple[tuple[int, ...], tuple[str, ...] | None]] = {}
    errors: list[str] = []
    for key, value in result.items():
        if len(errors) >= 10:
            break
        if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], str)
                and isinstance(key[1], int)):
            errors.append(f"key {key!r} is not a (topic, partition) tuple")
            continue
        if key not in cluster.index:
            errors.append(f"{key[0]}-{key[1]} is not a partition of the snapshot")
            continue
        if key not in allowed:
            errors.append(f"{key[0]}-{key[1]} was not offered to the assignor (excluded)")
            continue
        dirs: tuple[str, ...] | None = None
        if isinstance(value, Proposal):
            reps, dirs = value.replicas, value.log_dirs
        else:
            reps = value
        if isinstance(reps, (str, bytes)) or not isinstance(reps, Sequence):
            errors.append(f"{key[0]}-{key[1]}: replicas must be a list of broker ids, got {reps!r}")
            continue
        if not reps or not all(isinstance(r, int) and not isinstance(r, bool) for r in reps):
            errors.append(f"{key[0]}-{key[1]}: replicas must be a non-empty list of broker ids, "
                          f"got {list(reps)!r}")
            continue
        unknown = [r for r in reps if r not in cluster.brokers]
        if unknown:
            errors.append(f"{key[0]}-{key[1]}: unknown brokers {unknown}")
            continue
        if len(set(reps)) != len(reps):
            errors.append(f"{key[0]}-{key[1]}: a broker appears twice in {list(reps)}")
            continue
        p = cluster.partitions[cluster.index[key]]
        if not allow_rf_change and len(reps) != len(p.replicas):
            errors.append(f"{key[0]}-{key[1]}: changes the replication factor from "
                          f"{len(p.replicas)} to {len(reps)}")
            continue
        if dirs is not None:
            if len(dirs) != len(reps):
                errors.append(f"{key[0]}-{key[1]}: {len(dirs)} log dirs for {len(reps)} replicas")
                continue
            bad = [(r, d) for r, d in zip(reps, dirs)
                   if d != ANY and d not in {x.path for x in cluster.brokers[r].log_dirs}]
            if bad:
                errors.append(f"{key[0]}-{key[1]}: log dirs not on their brokers: {bad}")
                continue
        out[cluster.index[key]] = (tuple(reps), tuple(dirs) if dirs is not None else None)
    if errors:
        raise AssignorError(name, "invalid assignment: " + "; ".join(errors))
    return out


def _python_aggregates(cluster: Cluster, placement) -> dict[str, dict]:
    a = Assignment(cluster)
    a.replicas = [list(r) for r, _ in placement]
    a.dirs = [list(d) for _, d in placement]
    a.compute_counters()
    return {"bytes": dict(a.broker_bytes), "count": dict(a.broker_count),
            "leaders": dict(a.broker_leaders), "dir_bytes": dict(a.dir_bytes),
            "topic_broker": dict(a.topic_broker)}


def _run_assignor(cluster: Cluster, opts: PlanOptions, ctx: PlanContext) -> tuple[Any, str, dict, bool]:
    """(assignor, its name, its normalised changes, whether it may change the RF)."""
    if opts.assignor:
        assignor: Any = load_assignor(opts.assignor)
        name = opts.assignor
    else:
        assignor = GOALS[opts.goal]()  # a driver-side goal (the balancing ones run in flow)
        name = assignor_name(assignor)
    builtin = isinstance(assignor, BuiltinGoal)
    excl_t = set(opts.exclude_topics)
    offered = [p for p in cluster.partitions if p.topic not in excl_t]
    allow_rf = bool(getattr(assignor, "changes_replication_factor", False)) or (
        not builtin and opts.goal in ("replication-factor", CUSTOM_GOAL))
    try:
        assignor.configure(ctx)
        result = assignor.assign(cluster, offered)
    except (GoalError, SnapshotError):
        raise
    except AssignorError as exc:
        if exc.assignor != name and not builtin:
            raise AssignorError(name, str(exc)) from exc
        raise
    except Exception as exc:
        raise AssignorError(name, f"{type(exc).__name__}: {exc}") from exc
    return assignor, name, _normalize(result, cluster, {p.key for p in offered}, name, allow_rf), allow_rf


def _final_placement(cluster: Cluster, changes: dict, work: Assignment, dir_bytes: dict,
                     builtin: bool) -> list[tuple[tuple[int, ...], tuple[str, ...]]]:
    """Replicas and log dirs of every partition after the plan: the goal's own dir choices; for
    user assignors, the named dirs, else the replica's old dir, else the emptiest dir."""
    final: list[tuple[tuple[int, ...], tuple[str, ...]]] = []
    dir_load = dict(dir_bytes)
    for pi, p in enumerate(cluster.partitions):
        if pi not in changes:
            final.append((p.replicas, p.log_dirs))
        elif builtin:
            final.append((tuple(work.replicas[pi]), tuple(work.dirs[pi])))
        else:
            reps, dirs = changes[pi]
            old = dict(zip(p.replicas, p.log_dirs))
            resolved = []
            for i, r in enumerate(reps):
                if dirs is not None and dirs[i] != ANY:
                    d = dirs[i]
                elif r in old:
                    d = old[r]
                else:
                    dirs_of = cluster.brokers[r].log_dirs
                    d = min([x for x in dirs_of if not x.cordoned] or dirs_of,
                            key=lambda x: dir_load.get((r, x.path), 0.0) / x.capacity_bytes).path
                dir_load[(r, d)] = dir_load.get((r, d), 0.0) + p.size_bytes
                resolved.append(d)
            final.append((reps, tuple(resolved)))
    return final


def _moves(cluster: Cluster, changes: dict, final: list) -> ReassignmentPlan:
    moves: list[PartitionMove] = []
    for pi in sorted(changes):
        p = cluster.partitions[pi]
        reps, dirs = changes[pi]
        if reps == p.replicas and (dirs is None or all(d == ANY for d in dirs)) \
                and final[pi][1] == p.log_dirs:
            continue
        moves.append(PartitionMove(p.topic, p.partition, tuple(reps),
                                   tuple(dirs) if dirs is not None else None, original_replicas=tuple(p.replicas)))
    return ReassignmentPlan(moves)


def plan_snapshot(snapshot: Any, opts: PlanOptions) -> tuple[ReassignmentPlan, dict[str, Any]]:
    """A plan for a driver-side goal (or a user assignor) on a snapshot dict.

    :raises SnapshotError: malformed snapshot; :raises GoalError: impossible goal or bad option;
    :raises AssignorError: the assignor failed; :raises ConstraintError: a built-in goal broke a rule
    """
    t0 = time.monotonic()
    cluster = Cluster.from_snapshot(snapshot)
    warnings = check_goal(cluster, opts)
    before = _python_aggregates(cluster, [(p.replicas, p.log_dirs) for p in cluster.partitions])
    work = Assignment(cluster)
    work.load_counters(before["bytes"], before["count"], before["leaders"], before["dir_bytes"],
                       before["topic_broker"])
    ctx = PlanContext(options=opts, assignment=work)
    t = time.monotonic()
    assignor, name, changes, allow_rf = _run_assignor(cluster, opts, ctx)
    timings = {"search_s": round(time.monotonic() - t, 3)}
    builtin = isinstance(assignor, BuiltinGoal)
    final = _final_placement(cluster, changes, work, before["dir_bytes"], builtin)
    problems = check_constraints(cluster, final, opts, allow_rf_change=allow_rf)
    if builtin:
        problems += check_goal_scope(cluster, final, opts)
    if problems:
        if builtin:
            raise ConstraintError(problems[:20])
        raise AssignorError(name, "the assignment breaks the planner's constraints: "
                                  + "; ".join(str(p) for p in problems[:10]))
    reassignment = _moves(cluster, changes, final)
    after = _python_aggregates(cluster, final)
    lb = assignor.lower_bound_bytes(cluster) if hasattr(assignor, "lower_bound_bytes") else None
    summary = build_summary(cluster, opts, final, reassignment, before, after, lb, warnings + ctx.warnings, name,
                            reached=getattr(assignor, "bound_reached", True))
    summary["engine"] = "driver"
    summary["timings"] = timings
    summary["plan_seconds"] = round(time.monotonic() - t0, 3)
    return reassignment, summary
