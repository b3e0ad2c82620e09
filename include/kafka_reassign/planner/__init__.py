"""The Spark planner: snapshot + goal -> Kafka reassignment plan + summary.

``plan(snapshot, goal, **options) -> PlanResult(plan, summary)``.

Where things run:

* **Spark** (local[2] by default, any master through ``spark_master`` /
  ``$KAFKA_REASSIGN_SPARK_MASTER`` / spark-submit): the snapshot becomes a DataFrame of
  partitions exploded to one row per replica; per-broker, per-log-dir, per-rack and
  per-(topic, broker) load are Spark aggregates; the rebalance goal's candidate replicas (those
  on over-loaded brokers, ranked by size per broker with a window) are selected on Spark, and
  each topic's spread is read from the Spark (topic, broker) aggregate; the "after" load in the summary
  is the same aggregation over the final assignment, which cross-checks the driver's counters.
* **Driver**: the move search itself (:mod:`.goals`). Each accepted move changes the loads the
  next decision depends on, so it is a sequential greedy over in-memory counters (O(RF) per
  candidate check) - seconds on 150k partitions, where one Spark stage per move would take hours.
  Constraint checks, the summary and the KIP-73 estimate are also driver-side (small data).

``engine="local"`` computes the same aggregates in plain Python (no JVM), for tests and for
small clusters; the move search is identical.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from kafka_reassign.plan import PartitionMove, ReassignmentPlan
from kafka_reassign.planner.assignor import (PlanContext, PlanOptions, Proposal, ReplicaAssignor,
                                             assignor_name, load_assignor)
from kafka_reassign.planner.cluster import ANY, Assignment, Cluster
from kafka_reassign.planner.constraints import check_constraints, check_goal_scope
from kafka_reassign.planner.errors import (AssignorError, ConstraintError, GoalError, PlannerError,
                                           Problem, SnapshotError)
from kafka_reassign.planner.goals import GOALS, BuiltinGoal
from kafka_reassign.planner import summary as _summary

__all__ = ["plan", "PlanResult", "PlanOptions", "ReplicaAssignor", "Proposal", "AssignorError",
           "GoalError", "SnapshotError", "ConstraintError", "PlannerError", "GOALS", "GOAL_NAMES",
           "make_options"]

GOAL_NAMES: tuple[str, ...] = tuple(GOALS)
CUSTOM_GOAL = "custom"


@dataclass
class PlanResult:
    """The plan (Kafka reassignment JSON) and its summary (one JSON line in the CLI)."""

    plan: ReassignmentPlan
    summary: dict[str, Any]
    final: list[tuple[tuple[int, ...], tuple[str, ...]]] = field(default_factory=list, repr=False)


_TUPLE_INT = {"brokers", "exclude_brokers"}
_TUPLE_STR = {"topics", "exclude_topics"}


def make_options(goal: str, **options: Any) -> PlanOptions:
    """Build and type-check :class:`PlanOptions` (unknown names and bad values are errors).

    :param goal: one of GOAL_NAMES, or "custom" with ``assignor``
    """
    known = {f.name for f in dataclasses.fields(PlanOptions)}
    problems: list[Problem] = []
    kwargs: dict[str, Any] = {"goal": goal}
    for k, v in options.items():
        k = k.replace("-", "_")
        if k not in known or k == "goal":
            problems.append(Problem(k, f"unknown planner option (known: {', '.join(sorted(known - {'goal'}))})",
                                    "unknown_option"))
            continue
        if v is None:
            continue
        if k in _TUPLE_INT:
            if isinstance(v, (int, str)) and not isinstance(v, bool):
                v = [v]
            try:
                v = tuple(int(x) for x in (str(v).split(",") if isinstance(v, str) else v)
                          if str(x).strip() != "")
            except (TypeError, ValueError):
                problems.append(Problem(k, f"must be broker ids, got {v!r}", "bad_option"))
                continue
        elif k in _TUPLE_STR:
            if isinstance(v, str):
                v = [x for x in v.split(",") if x.strip()]
            v = tuple(str(x).strip() for x in v)
        kwargs[k] = v
    opts = PlanOptions(**{k: v for k, v in kwargs.items() if k in known})
    for name in ("capacity_ceiling",):
        v = getattr(opts, name)
        if not isinstance(v, (int, float)) or not 0 < v <= 1:
            problems.append(Problem(name, f"must be in (0, 1], got {v!r}", "bad_option"))
    for name in ("balance_tolerance", "count_tolerance", "leader_tolerance"):
        v = getattr(opts, name)
        if not isinstance(v, (int, float)) or v < 0:
            problems.append(Problem(name, f"must be a number >= 0, got {v!r}", "bad_option"))
    for name in ("max_partition_movements", "max_movements_per_broker", "max_leader_movements"):
        v = getattr(opts, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            problems.append(Problem(name, f"must be an integer >= 1, got {v!r}", "bad_option"))
    for name in ("throttle_bytes_per_sec", "log_dir_throttle_bytes_per_sec"):
        v = getattr(opts, name)
        if v is not None and (not isinstance(v, (int, float)) or v <= 0):
            problems.append(Problem(name, f"must be a positive number of bytes/s, got {v!r}", "bad_option"))
    if opts.engine not in ("spark", "local"):
        problems.append(Problem("engine", f"must be 'spark' or 'local', got {opts.engine!r}", "bad_option"))
    if goal not in GOALS and not (goal == CUSTOM_GOAL and opts.assignor):
        problems.append(Problem("goal", f"unknown goal {goal!r}: use one of {', '.join(GOAL_NAMES)}"
                                        " (or 'custom' with an assignor)", "unknown_goal"))
    if problems:
        raise GoalError(problems, headline="invalid planner options")
    return opts


def check_goal(cluster: Cluster, opts: PlanOptions) -> list[str]:
    """Reject goals that cannot be met; return warnings for ones that can only partly be met.

    :raises GoalError: listing every problem
    """
    problems: list[Problem] = []
    warnings: list[str] = []
    for name in ("brokers", "exclude_brokers"):
        unknown = [b for b in getattr(opts, name) if b not in cluster.brokers]
        if unknown:
            problems.append(Problem(name, f"unknown broker ids {unknown} (the snapshot has "
                                          f"{sorted(cluster.brokers)})", "unknown_broker"))
    for name in ("topics", "exclude_topics"):
        unknown = [t for t in getattr(opts, name) if t not in cluster.topic_configs]
        if unknown:
            problems.append(Problem(name, f"unknown topics {unknown}", "unknown_topic"))
    excl_b, excl_t = set(opts.exclude_brokers), set(opts.exclude_topics)
    goal_b = set(opts.brokers)
    if goal_b & excl_b:
        problems.append(Problem("brokers", f"brokers {sorted(goal_b & excl_b)} are both targeted and "
                                           "excluded", "conflict"))
    if opts.goal in ("add-brokers", "remove-brokers") and not goal_b:
        problems.append(Problem("brokers", f"{opts.goal} needs --brokers", "missing_option"))
    placeable = [b for b in cluster.brokers if b not in excl_b
                 and not (opts.goal == "remove-brokers" and b in goal_b)]
    racks = {cluster.rack_of(b) for b in placeable}
    if opts.goal == "remove-brokers" and goal_b and not problems:
        stuck = sorted({p.topic for p in cluster.partitions
                        if p.topic in excl_t and set(p.replicas) & goal_b})
        if stuck:
            problems.append(Problem("exclude_topics", f"excluded topics {stuck[:10]} have replicas on "
                                                      "brokers to drain", "conflict"))
        stuck_b = sorted({p.name for p in cluster.partitions
                          if set(p.replicas) & goal_b and set(p.replicas) & excl_b})
        max_rf = max((len(p.replicas) for p in cluster.partitions if set(p.replicas) & goal_b),
                     default=0)
        if max_rf > len(placeable) + len(excl_b):
            problems.append(Problem("brokers", f"draining {sorted(goal_b)} leaves "
                                               f"{len(placeable)} brokers for partitions with "
                                               f"replication factor {max_rf}", "not_enough_brokers"))
        del stuck_b
        if cluster.has_racks and max_rf > len(racks):
            warnings.append(f"after draining only {len(racks)} racks remain for replication factor "
                            f"{max_rf}: some partitions will share a rack")
    if opts.goal == "replication-factor":
        rf = opts.replication_factor
        if not isinstance(rf, int) or isinstance(rf, bool) or rf < 1:
            problems.append(Problem("replication_factor", f"replication-factor needs an integer >= 1, "
                                                          f"got {rf!r}", "missing_option"))
        else:
            if rf > len(placeable):
                problems.append(Problem("replication_factor", f"replication factor {rf} is above the "
                                                              f"{len(placeable)} brokers available",
                                        "rf_above_brokers"))
            if cluster.has_racks and rf > len(racks):
                warnings.append(f"replication factor {rf} is above the {len(racks)} racks: some "
                                "replicas will share a rack")
            scope = set(opts.topics) or set(cluster.topic_configs) - excl_t
            for t in sorted(scope):
                idx = cluster.topic_partitions.get(t, [])
                if not idx:
                    continue
                min_isr = cluster.partitions[idx[0]].min_isr
                if rf < min_isr:
                    problems.append(Problem(f"topic {t}", f"replication factor {rf} is below its "
                                                          f"min.insync.replicas={min_isr}: producers "
                                                          "with acks=all would fail", "rf_below_min_isr"))
    if problems:
        raise GoalError(problems)
    return warnings


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
    bytes_in: dict[int, float] = {b: 0.0 for b in cluster.brokers}
    for p, (reps, _) in zip(cluster.partitions, placement):
        bytes_in[reps[0]] += p.bytes_in_per_sec
    return {"bytes": dict(a.broker_bytes), "count": dict(a.broker_count),
            "leaders": dict(a.broker_leaders), "bytes_in": bytes_in, "dir_bytes": dict(a.dir_bytes),
            "topic_broker": dict(a.topic_broker)}


def _spark_aggregates(spark: Any, cluster: Cluster, placement=None, cache: bool = False):
    from kafka_reassign.planner import spark_stats

    rdf = spark_stats.replicas_frame(spark, cluster, placement)
    if cache:
        rdf = rdf.cache()
    agg = spark_stats.aggregates(rdf)
    out = {"bytes": agg.broker_bytes, "count": agg.broker_count, "leaders": agg.broker_leaders,
           "bytes_in": agg.broker_bytes_in, "dir_bytes": agg.dir_bytes, "topic_broker": agg.topic_broker,
           "rack_bytes": agg.rack_bytes}
    return out, rdf


def plan(snapshot: Any, goal: str, spark: Any = None, **options: Any) -> PlanResult:
    """Compute a reassignment plan for ``goal`` on ``snapshot``.

    :param snapshot: snapshot dict (docs/FORMATS.md, version 1)
    :param goal: rebalance, add-brokers, remove-brokers, replication-factor, rack-repair, disks
        (or "custom" with ``assignor``)
    :param spark: an existing SparkSession to use (default: create / reuse one)
    :param options: fields of :class:`PlanOptions` (brokers, replication_factor, topics,
        exclude_topics, exclude_brokers, capacity_ceiling, throttle_bytes_per_sec, assignor, ...)
    :raises SnapshotError: malformed snapshot; :raises GoalError: impossible goal or bad option;
    :raises AssignorError: the assignor failed; :raises ConstraintError: a built-in goal broke a rule
    """
    t0 = time.monotonic()
    opts = make_options(goal, **options)
    cluster = Cluster.from_snapshot(snapshot)
    warnings = check_goal(cluster, opts)
    timings: dict[str, float] = {}

    rdf = None
    if opts.engine == "spark":
        from kafka_reassign.planner import spark_stats

        t = time.monotonic()
        if spark is None:
            spark = spark_stats.get_spark(opts.spark_master)
        timings["spark_start_s"] = round(time.monotonic() - t, 3)
        t = time.monotonic()
        before, rdf = _spark_aggregates(spark, cluster, cache=True)
        timings["spark_aggregate_s"] = round(time.monotonic() - t, 3)
    else:
        spark = None
        before = _python_aggregates(cluster, [(p.replicas, p.log_dirs) for p in cluster.partitions])
    work = Assignment(cluster)
    work.load_counters(before["bytes"], before["count"], before["leaders"], before["dir_bytes"],
                       before["topic_broker"])

    if opts.assignor:
        assignor: Any = load_assignor(opts.assignor)
        name = opts.assignor
    else:
        assignor = GOALS[opts.goal]()
        name = assignor_name(assignor)
    builtin = isinstance(assignor, BuiltinGoal)
    ctx = PlanContext(options=opts, assignment=work, spark=spark, replicas_df=rdf)
    excl_t = set(opts.exclude_topics)
    offered = [p for p in cluster.partitions if p.topic not in excl_t]
    allowed = {p.key for p in offered}
    allow_rf = bool(getattr(assignor, "changes_replication_factor", False)) or (
        not builtin and opts.goal in ("replication-factor", CUSTOM_GOAL))

    t = time.monotonic()
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
    timings["search_s"] = round(time.monotonic() - t, 3)
    changes = _normalize(result, cluster, allowed, name, allow_rf)

    # final placement: the goal's own dir choices; for user assignors, named dirs or the
    # emptiest dir of each new broker
    final: list[tuple[tuple[int, ...], tuple[str, ...]]] = []
    if builtin:
        for pi, p in enumerate(cluster.partitions):
            if pi in changes:
                final.append((tuple(work.replicas[pi]), tuple(work.dirs[pi])))
            else:
                final.append((p.replicas, p.log_dirs))
    else:
        dir_load = dict(before["dir_bytes"])
        for pi, p in enumerate(cluster.partitions):
            if pi not in changes:
                final.append((p.replicas, p.log_dirs))
                continue
            reps, dirs = changes[pi]
            old = dict(zip(p.replicas, p.log_dirs))
            resolved = []
            for i, r in enumerate(reps):
                if dirs is not None and dirs[i] != ANY:
                    d = dirs[i]
                elif r in old:
                    d = old[r]
                else:
                    d = min(cluster.brokers[r].log_dirs,
                            key=lambda x: dir_load.get((r, x.path), 0.0) / x.capacity_bytes).path
                dir_load[(r, d)] = dir_load.get((r, d), 0.0) + p.size_bytes
                resolved.append(d)
            final.append((reps, tuple(resolved)))

    problems = check_constraints(cluster, final, opts, allow_rf_change=allow_rf)
    if builtin:
        problems += check_goal_scope(cluster, final, opts)
    if problems:
        if builtin:
            raise ConstraintError(problems[:20])
        raise AssignorError(name, "the assignment breaks the planner's constraints: "
                                  + "; ".join(str(p) for p in problems[:10]))

    moves: list[PartitionMove] = []
    for pi in sorted(changes):
        p = cluster.partitions[pi]
        reps, dirs = changes[pi]
        if reps == p.replicas and (dirs is None or all(d == ANY for d in dirs)) \
                and final[pi][1] == p.log_dirs:
            continue
        moves.append(PartitionMove(p.topic, p.partition, tuple(reps),
                                   tuple(dirs) if dirs is not None else None))
    reassignment = ReassignmentPlan(moves)

    t = time.monotonic()
    if spark is not None:
        after, _ = _spark_aggregates(spark, cluster, final)
        if rdf is not None:
            rdf.unpersist()
    else:
        after = _python_aggregates(cluster, final)
    timings["after_aggregate_s"] = round(time.monotonic() - t, 3)
    warnings += ctx.warnings
    lb = assignor.lower_bound_bytes(cluster) if hasattr(assignor, "lower_bound_bytes") else None
    summary = build_summary(snapshot, cluster, opts, final, reassignment, before, after, lb,
                            warnings, name)
    summary["engine"] = opts.engine
    summary["timings"] = {**timings, **summary.get("timings", {})}
    summary["plan_seconds"] = round(time.monotonic() - t0, 3)
    return PlanResult(reassignment, summary, final)


def build_summary(snapshot: Any, cluster: Cluster, opts: PlanOptions, final, reassignment,
                  before: dict, after: dict, lower_bound: float | None, warnings: list[str],
                  assignor: str) -> dict[str, Any]:
    """The summary dict (see :mod:`kafka_reassign.planner.summary` for the definitions)."""
    replica_moves = 0
    data = 0.0
    leader_moves = 0
    dir_moves = 0
    dir_bytes: dict[int, float] = {}
    changed: list[int] = []
    for p, (reps, dirs) in zip(cluster.partitions, final):
        if tuple(reps) == p.replicas and tuple(dirs) == p.log_dirs:
            continue
        changed.append(p.index)
        added = [r for r in reps if r not in p.replicas]
        replica_moves += len(added)
        data += p.size_bytes * len(added)
        if reps and reps[0] != p.replicas[0]:
            leader_moves += 1
        old = dict(zip(p.replicas, p.log_dirs))
        for r, d in zip(reps, dirs):
            if r in old and old[r] != d:
                dir_moves += 1
                data += p.size_bytes
                dir_bytes[r] = dir_bytes.get(r, 0.0) + p.size_bytes
    drained = set(opts.brokers) if opts.goal == "remove-brokers" else set()
    caps = {b: cluster.brokers[b].capacity_bytes for b in cluster.brokers}
    bal_before, cv_before = _summary._stats({b: before["bytes"].get(b, 0.0) for b in caps}, caps)
    after_bytes = {b: after["bytes"].get(b, 0.0) for b in caps if b not in drained}
    bal_after, cv_after = _summary._stats(after_bytes, caps)
    live = [b for b in caps if b not in drained]

    batching = "kafka_reassign.steps.build_batches"
    t_batch = time.monotonic()
    try:
        from kafka_reassign.state import ClusterState
        from kafka_reassign.steps import build_batches

        state = ClusterState.from_snapshot(snapshot)
        steps_batches = build_batches(reassignment.moves, state, opts.max_partition_movements,
                                      opts.max_movements_per_broker, opts.max_leader_movements)
        batches = [[(cluster.index[s.key], s.current, s.target) for s in b.steps
                    if not s.is_log_dir_only] for b in steps_batches]
        n_batches = len(steps_batches)
    except ImportError:
        batching = "planner local fallback (kafka_reassign.steps unavailable)"
        batches = _summary.local_batches(cluster, final, changed, opts)
        n_batches = len(batches)
    batching_s = round(time.monotonic() - t_batch, 3)
    seconds, est_warnings, _ = _summary.estimate_seconds(cluster, batches, opts, before["bytes_in"],
                                                         dir_bytes)
    return {
        "goal": opts.goal,
        "assignor": assignor,
        "partitions_moved": len(reassignment.moves),
        "replica_movements": replica_moves,
        "log_dir_movements": dir_moves,
        "data_to_move_bytes": round(data),
        "lower_bound_bytes": None if lower_bound is None else round(lower_bound),
        "moved_over_lower_bound": (round(data / lower_bound, 4) if lower_bound else
                                   (1.0 if lower_bound == 0 and data == 0 else None)),
        "leader_movements": leader_moves,
        "batches": n_batches,
        "batching": batching,
        "balance_metric": "max broker utilisation / mean utilisation (1.0 = perfect)",
        "balance_before": round(bal_before, 4),
        "balance_after": round(bal_after, 4),
        "cv_before": round(cv_before, 4),
        "cv_after": round(cv_after, 4),
        "replica_count_balance_before": round(_summary._count_balance(
            {b: before["count"].get(b, 0) for b in caps}), 4),
        "replica_count_balance_after": round(_summary._count_balance(
            {b: after["count"].get(b, 0) for b in live}), 4),
        "leader_balance_before": round(_summary._count_balance(
            {b: before["leaders"].get(b, 0) for b in caps}), 4),
        "leader_balance_after": round(_summary._count_balance(
            {b: after["leaders"].get(b, 0) for b in live}), 4),
        "throttle_bytes_per_sec": opts.throttle_bytes_per_sec,
        "estimated_seconds": None if seconds is None else round(seconds, 1),
        "warnings": warnings + est_warnings,
        "brokers": _summary.broker_rows(cluster, before, after),
        "timings": {"batching_s": batching_s},
    }
