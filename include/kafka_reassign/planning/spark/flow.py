"""The driver flow of the balancing goals (rebalance, add-brokers, remove-brokers), top to bottom.

1. read the header of the snapshot-lines file (brokers, topics) and check the goal against it;
2. the engine (Spark, or pandas for small clusters) reads the partition lines itself and reports
   unusable rows (unknown brokers, missing sizes...);
3. loads per broker (a Spark aggregate) -> targets and each rack's quotas (driver, brokers-sized);
   infeasible goals and capacities stop here;
4. the move search runs as one Spark task per piece of a rack (:mod:`.search`, :mod:`.pieces`),
   refused up front if a task would not fit; then the network-in pass on the driver (:mod:`.network`) adds moves (or swaps)
   of hot replicas off the brokers receiving the most produce traffic, and the topic-spread pass
   (:mod:`.spread`) those of topics crowding a broker;
5. moves applied and leaders chosen as Spark tasks over partition groups (:mod:`.leaders`);
   only changed partitions come back; meanwhile the summary's lower bounds (:mod:`.lower_bound`:
   Spark reads of the snapshot as it was) in a background thread, the driver being idle;
6. reconcile on the driver (:mod:`.finish`): log dirs, executor order; meanwhile every rule
   checked and the summary's balance figures made (in a forked child for a big plan);
7. the summary's estimate (:mod:`.report`; a big plan's estimate makes its steps in two
   processes: :mod:`kafka_reassign.planning.plan_estimate`).

Steps 2-5 run under a deadline (``timeout_seconds``). Driver memory grows with brokers + moves.
"""
from __future__ import annotations

import gc
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kafka_reassign.errors import Problem, SnapshotError
from kafka_reassign.planning.spark.assignor import PlanOptions
from kafka_reassign.planning.spark.lower_bound import GoalBounds, goal_bounds, network_limit
from kafka_reassign.errors import ConstraintError, GoalError
from kafka_reassign.planning.forked import Forked, processes_for
from kafka_reassign.planning.plan_estimate import PlannedMove
from kafka_reassign.units import DEFAULT_NETWORK_BYTES_PER_SEC
from kafka_reassign.planning.spark.guard import check_task_sizes, deadline
from kafka_reassign.planning.spark.leaders import LEADER_GOALS, LeaderInputs, duplicates_in, leader_groups
from kafka_reassign.planning.spark.loads import (Loads, broker_infos, loads_after, loads_from_frame, open_log_dirs,
                                                 topic_counts_from_frame)
from kafka_reassign.planning.spark.finish import ordered_plan, rule_problems
from kafka_reassign.planning.spark.network import mid_loads, network_moves
from kafka_reassign.planning.spark.network_capacity import (capacity_summary, check_network_room, known_links,
                                                             limits, network_problems, set_link_limits)
from kafka_reassign.planning.spark.replica_capacity import (cancel_over_cap, check_replica_room, replica_problems,
                                                             replica_summary, shed_over_cap)
from kafka_reassign.planning.spark.pieces import PIECE_REPLICAS, split_quotas
from kafka_reassign.planning.spark.eta import change_moves, min_isr_of
from kafka_reassign.planning.spark.report import balance_summary, with_estimate
from kafka_reassign.planning.spark.search import SearchInputs, SpreadHint
from kafka_reassign.planning.spark.snapshot_file import read_header
from kafka_reassign.planning.spark.spread import EvenShares, placeable_capacity, spread_moves
from kafka_reassign.planning.spark.targets import (SLACK, BrokerInfo, Targets, compute_targets, fill_only,
                                            group_quotas)


def check_goal_header(opts: PlanOptions, brokers: dict[int, BrokerInfo], topics: set[str]) -> None:
    """Goal options against the header: unknown brokers or topics, missing or conflicting options.

    :raises GoalError: listing every problem
    """
    problems: list[Problem] = []
    for name in ("brokers", "exclude_brokers"):
        unknown = [b for b in getattr(opts, name) if b not in brokers]
        if unknown:
            problems.append(Problem(name, f"unknown broker ids {unknown} (the snapshot has "
                                          f"{sorted(brokers)})", "unknown_broker"))
    unknown_t = [t for t in opts.exclude_topics if t not in topics]
    if unknown_t:
        problems.append(Problem("exclude_topics", f"unknown topics {unknown_t}", "unknown_topic"))
    both = set(opts.brokers) & set(opts.exclude_brokers)
    if both:
        problems.append(Problem("brokers", f"brokers {sorted(both)} are both targeted and excluded",
                                "conflict"))
    if opts.goal in ("add-brokers", "remove-brokers") and not opts.brokers:
        problems.append(Problem("brokers", f"{opts.goal} needs --brokers", "missing_option"))
    if problems:
        raise GoalError(problems)


def check_feasible(opts: PlanOptions, brokers: dict[int, BrokerInfo], t: Any, max_rf: int) -> None:
    """Capacity and broker count: a goal no placement can meet is refused before any search.

    :raises GoalError: naming the problem and the option involved
    """
    problems: list[Problem] = []
    if len(t.placeable) < max_rf:
        problems.append(Problem("brokers", f"only {len(t.placeable)} brokers can hold replicas "
                                           f"(after drains, exclusions and dead brokers) for "
                                           f"replication factor {max_rf}", "not_enough_brokers"))
    if t.mean_util > opts.capacity_ceiling:
        problems.append(Problem("capacity_ceiling", f"the data needs {t.mean_util:.1%} of the "
                                                    f"placeable brokers' capacity, above "
                                                    f"capacity_ceiling={opts.capacity_ceiling:.0%}: "
                                                    "add brokers or disk", "capacity"))
    full = [b for b in t.placeable if t.target[b] > brokers[b].capacity * opts.capacity_ceiling + 1]
    if full and not problems:
        problems.append(Problem("capacity_ceiling", f"brokers {full[:10]} would need more than "
                                                    f"capacity_ceiling={opts.capacity_ceiling:.0%} of "
                                                    "their capacity (racks constrain placement)",
                                "capacity"))
    if problems:
        raise GoalError(problems)


def task_sizes(quotas: dict[str, Any], counts: dict[int, int]) -> dict[str, int]:
    """Most replicas each search task can receive: all replicas of its group's sources."""
    return {g: sum(counts.get(b, 0) for b in q.sources) for g, q in quotas.items()}


def _size_of(path: str) -> int | None:
    try:
        return os.path.getsize(path)
    except OSError:  # a URI only Spark can read
        return None


def open_engine(opts: PlanOptions, spark: Any, path: str, header: dict[str, Any]) -> tuple[Any, Any]:
    """(engine, spark session or None) for ``opts.engine``."""
    from kafka_reassign.planning.spark.data import LocalData, SparkData

    if opts.engine == "local":
        return LocalData(path, header), None
    from kafka_reassign.planning.spark.spark_session import get_spark, ship_package

    if spark is None:
        spark = get_spark(opts.spark_master, input_bytes=_size_of(path))
    ship_package(spark)
    return SparkData(spark, path, header), spark


@dataclass
class Run:
    """What every stage of one plan needs: options, the header's brokers, stage timings."""

    opts: PlanOptions
    header: dict[str, Any]
    brokers: dict[int, BrokerInfo]
    dirs: dict[int, list[tuple[str, float]]]
    drain: set[int]
    exclude: set[int]
    exclude_topics: set[str]
    timings: dict[str, float] = field(default_factory=dict)

    def timed(self, name: str, fn: Any, *args: Any) -> Any:
        t = time.monotonic()
        # A stage makes up to millions of short-lived acyclic objects (steps, loads, rows): the cyclic
        # GC would rescan every live one many times over; what cycles it leaves are collected after.
        enabled = gc.isenabled()
        gc.disable()
        try:
            out = fn(*args)
        finally:
            if enabled:
                gc.enable()
        self.timings[name] = round(time.monotonic() - t, 3)
        return out


class Background:
    """One stage run in a background thread while the driver waits on Spark (the summary's lower
    bound beside the leader stage: beside the search its jobs slowed the search's tasks more than
    they saved, beside a driver pass they share its one core); left only once it ended, whatever
    the driver's stages raised.

    :param fn: the stage; ``fn(*args)`` must only read its inputs
    """

    def __init__(self, fn: Any, *args: Any) -> None:
        self.seconds = 0.0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="plan-background")
        self._future = self._pool.submit(self._timed, fn, *args)

    def _timed(self, fn: Any, *args: Any) -> Any:
        t = time.monotonic()
        try:
            return fn(*args)
        finally:
            self.seconds = round(time.monotonic() - t, 3)

    def result(self) -> Any:
        """The stage's result (its exception raised here)."""
        return self._future.result()

    def __enter__(self) -> "Background":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._pool.shutdown(wait=True)


def start(path: str, opts: PlanOptions) -> Run:
    """Stage 1: the header (brokers, topics) and the goal checked against it."""
    header = read_header(path)
    brokers, dirs = broker_infos(header)
    set_link_limits(brokers, header, opts)
    check_goal_header(opts, brokers, {str(t["name"]) for t in header["topics"]})
    return Run(opts, header, brokers, dirs, set(opts.brokers) if opts.goal == "remove-brokers" else set(),
               set(opts.exclude_brokers), set(opts.exclude_topics))


def read_loads(engine: Any, run: Run) -> tuple[Loads, dict[str, float]]:
    """Stage 2: the engine reads the file: per-broker loads, totals, unusable rows."""
    per, totals, problems = engine.loads()
    if problems:
        raise SnapshotError(problems)
    loads = loads_from_frame(per, run.dirs)
    loads.topic_count = topic_counts_from_frame(engine.topic_counts(run.exclude_topics))
    return loads, totals


def plan_targets(run: Run, before: Loads, totals: dict[str, float]) -> tuple[Targets, dict, dict]:
    """Stage 3 (driver, brokers-sized): targets, bounds, feasibility, each rack's quotas cut
    into the search's pieces."""
    opts, max_rf = run.opts, int(totals["max_rf"])
    targets = compute_targets(run.brokers, before.bytes, run.drain, run.exclude, totals["partition_bytes"], max_rf)
    if opts.goal == "add-brokers":
        targets = fill_only(targets, run.brokers, before.bytes, set(opts.brokers))
    check_feasible(opts, run.brokers, targets, max_rf)
    check_network_room(run.brokers, targets, before, opts.consumer_fanout)
    check_replica_room(opts.max_replicas_per_broker, targets, before)
    quotas, flows = group_quotas(targets, before.bytes, before.count, hard_caps(run), opts.balance_tolerance)
    quotas = split_quotas(quotas, before.count, targets.group, opts.search_piece_replicas or PIECE_REPLICAS)
    check_task_sizes(task_sizes(quotas, before.count), opts.max_task_replicas)
    return targets, quotas, flows


def hard_caps(run: Run) -> dict[int, float]:
    return {b: x.capacity * run.opts.capacity_ceiling for b, x in run.brokers.items()}


def search_moves(engine: Any, run: Run, targets: Targets, quotas: dict, flows: dict, before: Loads,
                 first: bool = True) -> Any:
    """Stage 4: the move search, one Spark task per piece of a rack (:mod:`.pieces`).

    :param first: topic-spread listed: sources shed their crowded topics' excess first
    """
    limits = {b: (name, float("inf") if b in run.drain else q.sources[b] + q.slack.get(b, 0.0))
              for name, q in quotas.items() for b in q.sources}
    racks = {b: x.rack for b, x in run.brokers.items()}
    piece = {b: name for b, (name, _) in limits.items()}
    opts = run.opts
    hint = spread_hint(quotas, run.brokers, targets, before, opts.topic_spread_slack) if opts.balance_topic_spread \
        else None
    if hint is not None:
        hint.first = first
    return engine.search(limits, run.exclude_topics,
                         SearchInputs(quotas, racks, targets.group, flows, piece, hint))


def search_and_network(engine: Any, run: Run, targets: Targets, quotas: dict, flows: dict, before: Loads) -> Any:
    """Stage 4 and the network-in pass. With topic-spread listed the search first sheds the
    crowded topics' excess (fewer bytes than the spread pass copying it later); when the
    network-in pass then leaves a broker above its limit (the crowded replicas were hot and the
    receivers' network in took them), both run again without that, and the plan with the lower
    network-in peak is kept: network in ranks above topic spread."""
    opts = run.opts
    tries = (True, False) if opts.balance_topic_spread and opts.balance_network_in else (True,)
    best, peak = None, math.inf
    for first in tries:
        again = "" if first else "_again"  # the second try's timings apart from the first's
        moves = run.timed(f"search{again}_s", search_moves, engine, run, targets, quotas, flows, before, first)
        moves = cancel_over_cap(moves, before, opts.max_replicas_per_broker, targets.drained, hard_caps(run))
        moves = run.timed(f"network_in{again}_s", network_moves, engine, run.brokers, targets, before, moves,
                          hard_caps(run), opts)
        moves = shed_over_cap(engine, run.brokers, targets, before, moves, hard_caps(run), opts)
        limit = network_limit(run.brokers, targets, before.net_in, opts.network_in_tolerance)
        net = mid_loads(before, moves)[1]
        # the peak against each broker's limit (one limit for all unless link speeds differ)
        top = max((v / limit[b] for b, v in net.items() if b in limit), default=0.0) if limit else 0.0
        if top < peak:
            best, peak = moves, top
        if limit is None or top <= 1.0:
            break
    return best


def spread_hint(quotas: dict, brokers: dict[int, BrokerInfo], targets: Targets, before: Loads,
                slack: int) -> SpreadHint:
    """What the search needs to prefer moves that spread topics: even shares, the receivers'
    counts, and each source's topics above even + slack (the spread pass's measure).

    :param before: the snapshot's loads (``topic_count`` of the movable topics)
    """
    placeable = set(targets.placeable)
    even = EvenShares(before.topic_count, placeable_capacity(brokers, targets))
    receivers = {b for q in quotas.values() for b in (*q.local, *q.exports)}
    sources = {b for q in quotas.values() for b in q.sources}
    count = {k: n for k, n in before.topic_count.items() if k[1] in receivers}
    crowded: dict[int, dict[str, int]] = {}
    for (topic, b), n in before.topic_count.items():
        if b in sources and b in placeable and n > even.of(topic, b) + slack:
            crowded.setdefault(b, {})[topic] = n - even.of(topic, b) - slack
    return SpreadHint(even, count, crowded)


def apply_and_lead(engine: Any, run: Run, moves: Any, targets: Targets, totals: dict[str, float]) -> Any:
    """Stage 5: moves applied and leaders chosen, one Spark task per partition group."""
    opts = run.opts
    order = tuple(g for g in opts.balance_goals if g in LEADER_GOALS)  # their priority order
    groups = leader_groups(int(totals["partitions"]), len(targets.placeable))
    out_caps = {b: lim / groups for b, lim in limits(run.brokers).items()}  # a rule: kept unlisted
    inputs = LeaderInputs(eligible=set(targets.placeable) if order or out_caps else set(),
                          fixed=run.exclude, slack=SLACK * 4, balance=bool(order or out_caps), order=order,
                          count_tolerance=opts.leader_tolerance, bytes_tolerance=opts.leader_bytes_in_tolerance,
                          out_tolerance=opts.network_out_tolerance, fanout=opts.consumer_fanout,
                          groups=groups, out_caps=out_caps, out_links=known_links(run.brokers, targets.placeable),
                          gainers=set(opts.brokers) if opts.goal == "add-brokers" else None,
                          rack={b: x.rack for b, x in run.brokers.items()}, placeable=set(targets.placeable))
    try:
        return engine.changes(moves, run.exclude_topics, inputs)
    except Exception as exc:
        dups = duplicates_in(exc)
        if not dups:
            raise
        raise SnapshotError([Problem(f"partition {d}", "appears more than once in the snapshot",
                                     "duplicate_partition") for d in dups]) from None


def checked_after(run: Run, before: Loads, targets: Targets, changes: Any) -> Loads:
    """The loads after the changes, every rule checked against them.

    :raises GoalError: excluded topics keep replicas on brokers to drain
    :raises ConstraintError: listing every rule the changes break
    """
    after = loads_after(before, changes)
    stuck = {b: after.count[b] for b in run.drain if after.count[b] > 0}
    if stuck and run.exclude_topics:
        raise GoalError([Problem("exclude_topics", f"excluded topics {sorted(run.exclude_topics)} keep "
                                                   f"{sum(stuck.values())} replicas on brokers to drain "
                                                   f"{sorted(stuck)}", "conflict")])
    broken = rule_problems(changes, targets, after, hard_caps(run))
    broken += network_problems(run.brokers, before, after, run.opts.consumer_fanout)
    broken += replica_problems(run.opts.max_replicas_per_broker, before, after)
    if broken:
        raise ConstraintError(broken)
    return after


def checked_summary(run: Run, targets: Targets, before: Loads, changes: Any, bounds: GoalBounds) -> dict[str, Any]:
    """Every rule checked (:func:`checked_after`), then the summary's figures of the loads before
    and after, with a warning when balance stays above the tolerance: all but the estimate's.

    :raises GoalError, ConstraintError: as :func:`checked_after`
    """
    opts = run.opts
    after = checked_after(run, before, targets, changes)
    summary = balance_summary(opts, run.brokers, targets, before, after, changes, bounds)
    summary["network_capacity"], over = capacity_summary(run.brokers, before, after, opts.consumer_fanout,
                                                         opts.network_capacity_ceiling)
    summary["warnings"] += over
    summary["replica_capacity"], over = replica_summary(opts.max_replicas_per_broker, before, after)
    summary["warnings"] += over
    if summary["balance_after"] > 1 + opts.balance_tolerance:
        summary["warnings"].append(
            f"the fullest broker stays {summary['balance_after'] - 1:.1%} above the mean utilisation "
            f"(more than balance_tolerance={opts.balance_tolerance:g}): excluded brokers, racks "
            f"{targets.rack_capped or ''} or replica sizes leave no better placement")
    summary["engine"] = opts.engine
    return summary


def reconcile(run: Run, before: Loads, targets: Targets, changes: Any,
              bounds: GoalBounds) -> tuple[Any, list[PlannedMove], Forked[dict[str, Any]]]:
    """Stage 6 (driver, moves-sized): the plan in executor order and its moves as the estimate
    takes them; meanwhile :func:`checked_summary` (in a forked child for a big plan: each side is
    seconds of one-core Python at 3M replicas, and only the summary's figures come back)."""
    checked = Forked(processes_for(len(changes)) > 1, checked_summary, run, targets, before, changes, bounds)
    try:
        plan = ordered_plan(changes, open_log_dirs(run.header), before)
        moves = change_moves(changes, plan, min_isr_of(run.header["topics"]))
    except BaseException:
        checked.result()  # a broken rule is the error to show, as when the rules came first
        raise
    return plan, moves, checked


def summarise(run: Run, moves: list[PlannedMove], checked: Forked[dict[str, Any]]) -> dict[str, Any]:
    """Stage 7: :func:`reconcile`'s summary (a broken rule raised here, before any estimate) with
    the plan's estimate.

    :param moves: the plan's moves as the estimate takes them
    """
    summary = checked.result()
    nic = {int(b["id"]): float(b.get("network_bytes_per_sec") or DEFAULT_NETWORK_BYTES_PER_SEC)
           for b in run.header["brokers"]}
    summary = with_estimate(summary, run.opts, moves, nic)
    summary["timings"] = run.timings
    return summary


def plan_lines(path: str, opts: PlanOptions, spark: Any = None) -> tuple[Any, dict[str, Any]]:
    """Plan a balancing goal on a snapshot-lines file: (ReassignmentPlan, summary)."""
    t0 = time.monotonic()
    run = start(path, opts)
    engine, spark = run.timed("spark_start_s", open_engine, opts, spark, path, run.header)
    try:
        with deadline(spark, opts.timeout_seconds):
            before, totals = run.timed("read_and_aggregate_s", read_loads, engine, run)
            targets, quotas, flows = plan_targets(run, before, totals)
            moves = search_and_network(engine, run, targets, quotas, flows, before)
            moves = run.timed("topic_spread_s", spread_moves, engine, run.brokers, targets, before, moves,
                              hard_caps(run), opts)
            with Background(goal_bounds, engine, run.brokers, targets, before, opts) as lower:
                changes = run.timed("leaders_s", apply_and_lead, engine, run, moves, targets, totals)
                bounds = lower.result()
            run.timings["lower_bound_s"] = lower.seconds
    finally:
        engine.close()
    plan, planned, checked = run.timed("reconcile_s", reconcile, run, before, targets, changes, bounds)
    plan.make_text_ahead()
    try:
        summary = run.timed("summary_s", summarise, run, planned, checked)
    except BaseException:
        plan.discard_text_ahead()
        raise
    summary["plan_seconds"] = round(time.monotonic() - t0, 3)
    summary["search_pieces"] = len(quotas)
    return plan, summary
