"""Validate a reassignment plan (and the run parameters) against a cluster, before any write.

No I/O: everything is checked against a :class:`~kafka_reassign.cluster.state.ClusterState`.
Every problem is collected (not just the first) and each names the exact entry and the
reason, e.g. ``partitions[3] (orders-7): broker 9 does not exist (brokers: 1, 2, 3, 4)``.

A plan whose every partition is already at its target is not an error: it is a no-op (a
re-run of a finished plan) and the first warning says "nothing to move". A plan entry may
carry ``original_replicas`` (the placement the planner started from); when the live
placement differs (and the partition is neither at its target nor moved by a run of ours)
the plan is stale and refused, listing the partitions that changed.

Kinds of rejection (``Problem.kind``): not_json, not_object, bad_version, bad_partitions,
bad_entry, bad_topic, bad_partition_id, bad_replicas, bad_broker_id, bad_log_dirs,
empty_plan, duplicate_entry, internal_topic, unknown_topic, unknown_partition,
empty_replicas, duplicate_replicas, unknown_broker, broker_not_alive, rf_change,
below_min_isr, log_dirs_length, unknown_log_dir, partition_offline, in_flight_foreign,
foreign_in_flight_elsewhere, stale_plan; for parameters: bad_param, unknown_param.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Mapping

from kafka_reassign import defaults
from kafka_reassign.errors import ParamError, PlanValidationError, Problem
from kafka_reassign.planning.plan import ANY_LOG_DIR, ReassignmentPlan, parse_plan_entries
from kafka_reassign.cluster.state import ClusterState, InFlight, TopicPartition
from kafka_reassign.execution.steps import INT_MAX, plan_steps


def _on_the_way(now: tuple[int, ...], original: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether ``now`` is ``original``, ``target`` or a placement between them that the KIP-435
    steps of this move could have left (a resumed run): only brokers of either, every broker
    of both still there, and not merely one of the two reordered (a new preferred leader)."""
    if now in (tuple(original), tuple(target)):
        return True
    have, orig, tgt = set(now), set(original), set(target)
    return have <= orig | tgt and orig & tgt <= have and have != orig and have != tgt


def _fmt(ids) -> str:
    return "[" + ",".join(str(i) for i in ids) + "]"


def _short_names(items: list[str], limit: int = 20) -> str:
    more = f"; ... ({len(items)} in all)" if len(items) > limit else ""
    return "; ".join(items[:limit]) + more


def _short_list(ids, limit: int = 12) -> str:
    ids = sorted(ids)
    s = ", ".join(str(i) for i in ids[:limit])
    return s + (f", ... ({len(ids)} in all)" if len(ids) > limit else "")


def is_own_in_flight(inflight: InFlight, key: TopicPartition,
                     own_targets: Mapping[TopicPartition, Any] | None) -> bool:
    """Whether an in-flight reassignment is this project's (so a run may adopt it).

    Only what a durable run record says was submitted counts
    (:func:`kafka_reassign.throttle.record.submitted_targets`). A move that merely goes where the
    plan goes may be another tool's: adopting it would throttle it and, on failure, cancel it.

    :param inflight: the ongoing reassignment
    :param key: the partition
    :param own_targets: (topic, partition) -> replica lists our records say we submitted
    """
    if not own_targets or key not in own_targets:
        return False
    recorded = own_targets[key]
    cands = recorded if recorded and isinstance(recorded[0], (list, tuple)) else [recorded]
    return any(tuple(c) == tuple(inflight.target) for c in cands)


def validate_plan(plan: ReassignmentPlan | dict[str, Any] | str, state: ClusterState, *,
                  allow_rf_change: bool = False, own_run_id: str | None = None,
                  allow_internal_topics: bool = False,
                  own_targets: Mapping[TopicPartition, Any] | None = None,
                  refuse_foreign_in_flight: bool = True) -> list[str]:
    """Check ``plan`` against ``state``; raise listing every problem, or return warnings.

    :param plan: a parsed plan, or the raw JSON object/text (structural problems are then
        reported together with the cluster problems)
    :param state: the cluster as it is now
    :param allow_rf_change: accept moves whose replica count differs from the current one
    :param own_run_id: the run validating (named in messages about in-flight moves)
    :param allow_internal_topics: accept moves of __consumer_offsets and other internal topics
    :param own_targets: targets this run already submitted (adopted on resume)
    :param refuse_foreign_in_flight: also refuse when someone else is reassigning *other*
        partitions of the cluster (two tools reassigning at once fight over the throttle)
    :raises PlanValidationError: with every problem found; nothing has been written
    :returns: warnings (non-fatal: under-replicated partitions, partitions already at target)
    """
    problems: list[Problem] = []
    warnings: list[str] = []
    if isinstance(plan, ReassignmentPlan):
        moves = list(plan.moves)
        names = [f"partitions[{i}] ({m.name})" for i, m in enumerate(moves)]
    else:
        raw: Any = plan
        if isinstance(raw, (str, bytes)):
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise PlanValidationError([Problem("plan", f"not valid JSON: {exc}", "not_json")]) from None
        entries, parse_problems = parse_plan_entries(raw)
        problems.extend(parse_problems)
        moves = [m for _, m in entries]
        names = [f"partitions[{i}] ({m.name})" for i, m in entries]
        if isinstance(raw, dict) and isinstance(raw.get("partitions"), list) and not raw["partitions"]:
            problems.append(Problem("partitions", "the plan is empty: no partition to move", "empty_plan"))
            raise PlanValidationError(problems)
    if isinstance(plan, ReassignmentPlan) and not moves:
        problems.append(Problem("partitions", "the plan is empty: no partition to move", "empty_plan"))

    who = f"run {own_run_id}" if own_run_id else "this run"
    stale: list[str] = []
    seen: dict[TopicPartition, str] = {}
    changes = 0
    known_brokers = sorted(state.brokers)
    for move, name in zip(moves, names):
        key = move.key
        if key in seen:
            problems.append(Problem(name, f"duplicate entry: {move.name} is also at {seen[key].split(' ')[0]}",
                                    "duplicate_entry"))
            continue
        seen[key] = name
        if state.is_internal(move.topic) and not allow_internal_topics:
            problems.append(Problem(name, f"{move.topic} is an internal topic; moving it needs "
                                          "allow_internal_topics", "internal_topic"))
        topic = state.topics.get(move.topic)
        if topic is None:
            problems.append(Problem(name, f"unknown topic {move.topic!r}", "unknown_topic"))
            continue
        part = topic.partitions.get(move.partition)
        if part is None:
            n = len(topic.partitions)
            problems.append(Problem(name, f"unknown partition: {move.topic} has {n} partition"
                                          f"{'s' if n != 1 else ''} (0..{n - 1})", "unknown_partition"))
            continue
        target = move.replicas
        if not target:
            problems.append(Problem(name, "replicas is empty: a partition needs at least one replica",
                                    "empty_replicas"))
            continue
        dups = sorted({b for b in target if target.count(b) > 1})
        if dups:
            problems.append(Problem(name, f"broker {_short_list(dups)} listed more than once in replicas "
                                          f"{_fmt(target)}", "duplicate_replicas"))
        for b in dict.fromkeys(target):
            info = state.brokers.get(b)
            if info is None:
                problems.append(Problem(name, f"broker {b} does not exist (brokers: {_short_list(known_brokers)})",
                                        "unknown_broker"))
            elif not info.alive:
                problems.append(Problem(name, f"broker {b} is not alive: the move could not complete "
                                              "until it is back", "broker_not_alive"))
        inflight = state.in_flight.get(key)
        # During a reassignment the metadata lists old + new replicas; compare with where it was.
        base = tuple(inflight.original) if inflight is not None else part.replicas
        if len(target) != len(base) and not allow_rf_change:
            problems.append(Problem(name, f"replication factor change {len(base)} -> {len(target)} "
                                          f"({_fmt(base)} -> {_fmt(target)}) needs allow_rf_change",
                                    "rf_change"))
        min_isr = state.min_isr(move.topic)
        if len(set(target)) < min_isr:
            problems.append(Problem(name, f"would leave {len(set(target))} replica(s), fewer than "
                                          f"min.insync.replicas={min_isr}: producers with acks=all "
                                          "would fail", "below_min_isr"))
        if move.log_dirs is not None:
            if len(move.log_dirs) != len(target):
                problems.append(Problem(name, f"log_dirs has {len(move.log_dirs)} entries but replicas has "
                                              f"{len(target)}", "log_dirs_length"))
            else:
                for b, d in zip(target, move.log_dirs):
                    info = state.brokers.get(b)
                    if d == ANY_LOG_DIR or info is None or not info.alive or not info.log_dirs:
                        continue
                    if d not in info.log_dirs:
                        problems.append(Problem(name, f"log dir {d!r} is not a log dir of broker {b} "
                                                      f"(it has {', '.join(info.log_dirs)})", "unknown_log_dir"))
        live_current = [b for b in part.replicas if b not in part.offline and state.brokers.get(b, None)
                        is not None and state.brokers[b].alive]
        adds = [b for b in target if b not in base]
        if part.leader < 0 or not live_current:
            if adds or tuple(target) != part.replicas:
                problems.append(Problem(name, f"all replicas of {move.name} are offline (replicas "
                                              f"{_fmt(part.replicas)}, leader none): there is no copy to "
                                              "move from", "partition_offline"))
        elif adds and len(part.isr) < min_isr:
            warnings.append(f"{name}: {move.name} is under min ISR now (ISR {_fmt(part.isr)}, "
                            f"min.insync.replicas={min_isr}); the first step adds replicas to restore it")
        own_move = inflight is not None and is_own_in_flight(inflight, key, own_targets)
        if inflight is not None and not own_move:
            problems.append(Problem(name, f"{move.name} is already being reassigned to {_fmt(inflight.target)} "
                                          f"by someone else (no record of {who} or an earlier run of ours "
                                          "submitting it); wait for it to finish or have its owner cancel it",
                                    "in_flight_foreign"))
        if move.original_replicas is not None and not own_move \
                and not _on_the_way(part.replicas, move.original_replicas, target):
            stale.append(f"{move.name} {_fmt(move.original_replicas)} -> now {_fmt(part.replicas)}")
        racks = [state.brokers[b].rack for b in target if b in state.brokers]
        all_racks = {b.rack for b in state.brokers.values() if b.alive and b.rack is not None}
        if len(racks) == len(target) and None not in racks and len(set(racks)) < min(len(target), len(all_racks)):
            warnings.append(f"{name}: target {_fmt(target)} puts its {len(target)} replicas in "
                            f"{len(set(racks))} rack(s) ({', '.join(sorted(set(racks)))}) although "
                            f"{len(all_racks)} racks are available: losing one rack loses more than one copy")
        at_target = tuple(target) == part.replicas and inflight is None
        dirs_ok = all(part.replica_dirs.get(b) == d for b, d in move.wanted_dirs().items())
        if at_target and dirs_ok:
            warnings.append(f"{name}: {move.name} is already at its target {_fmt(target)}; skipped")
        else:
            changes += 1
    if refuse_foreign_in_flight:
        plan_keys = {m.key for m in moves}
        for (t, p), inflight in sorted(state.in_flight.items()):
            if (t, p) not in plan_keys:
                who_else = ("by an earlier run of this project (its record lists the move), not in this plan"
                            if is_own_in_flight(inflight, (t, p), own_targets) else
                            "by someone else (not in this plan)")
                problems.append(Problem(f"{t}-{p}", f"{t}-{p} is being reassigned to {_fmt(inflight.target)} "
                                                    f"{who_else}; two reassignments at once fight over the "
                                                    "throttle: wait for it or cancel it",
                                        "foreign_in_flight_elsewhere"))
    if stale:
        problems.append(Problem("partitions", f"stale plan: {len(stale)} partition(s) changed since the plan was "
                                              f"made (plan's starting replicas -> live): {_short_names(stale)}; "
                                              "make the plan again from a fresh snapshot", "stale_plan"))
    if moves and changes == 0 and not problems:
        warnings.insert(0, f"nothing to move: every partition of the plan is already at its target "
                           f"({len(moves)} partition(s)); no change is made")
    if problems:
        raise PlanValidationError(problems)
    return warnings


# -- run parameters ------------------------------------------------------------------------

@dataclass(frozen=True)
class ReassignParams:
    """Validated run parameters (the DAG params that the domain uses; defaults in :mod:`kafka_reassign.defaults`).

    :param throttle_bytes_per_sec: KIP-73 replication throttle per broker; None = unthrottled
    :param log_dir_throttle_bytes_per_sec: replica.alter.log.dirs.io.max.bytes.per.second
        for brokers with log-dir moves; None = same as throttle_bytes_per_sec
    :param max_partition_movements: steps per batch
    :param max_movements_per_broker: replica additions/removals per broker per batch
    :param max_leader_movements: preferred-leader changes per batch
    :param batch_timeout_minutes: a batch not done by then fails the run
    :param allow_rf_change: accept replication-factor changes
    :param allow_internal_topics: accept moves of internal topics
    :param dry_run: validate and report, write nothing
    :param cancel_on_failure: cancel our in-flight moves when the run fails
    :param stall_window_seconds: lag not falling for this long = stalled
    :param poll_interval_seconds: how often progress is polled
    :param allow_stalling_moves: start moves the pre-flight finds would never catch up at this
        throttle (their produce rate and in-sync traffic exceed it); they stay under-replicated
    :param produce_sample_seconds: measure produce rates over this window before the run
        (0 = do not measure: the stall check needs rates from a snapshot then)
    :param rehearse: rehearse the run on a simulated copy of the cluster first (its prediction
        becomes the estimate; the report travels with the prepared run)
    :param movement_strategy: the order moves start in (:mod:`kafka_reassign.execution.order`)
    """

    throttle_bytes_per_sec: int | None = defaults.THROTTLE_BYTES_PER_SEC
    log_dir_throttle_bytes_per_sec: int | None = defaults.LOG_DIR_THROTTLE_BYTES_PER_SEC
    max_partition_movements: int = defaults.MAX_PARTITION_MOVEMENTS
    max_movements_per_broker: int = defaults.MAX_MOVEMENTS_PER_BROKER
    max_leader_movements: int = defaults.MAX_LEADER_MOVEMENTS
    batch_timeout_minutes: float = defaults.BATCH_TIMEOUT_MINUTES
    allow_rf_change: bool = False
    allow_internal_topics: bool = False
    dry_run: bool = defaults.DRY_RUN
    cancel_on_failure: bool = defaults.CANCEL_ON_FAILURE
    stall_window_seconds: float = defaults.STALL_WINDOW_SECONDS
    poll_interval_seconds: float = defaults.POLL_INTERVAL_SECONDS
    allow_stalling_moves: bool = defaults.ALLOW_STALLING_MOVES
    produce_sample_seconds: float = defaults.PRODUCE_SAMPLE_SECONDS
    rehearse: bool = defaults.REHEARSE
    movement_strategy: str = defaults.MOVEMENT_STRATEGY

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ReassignParams":
        return validate_params(d)


#: Keys DAG runs carry that belong to other layers (planning, connection); ignored here.
FOREIGN_PARAM_KEYS = frozenset({"kafka_conn_id", "plan", "goal", "brokers", "replication_factor",
                                "snapshot", "bootstrap_servers", "run_id"})

MIN_THROTTLE = 1024  # KIP-179: a replication throttle "should be at least 1 KB/s"


def _int_param(problems: list[Problem], key: str, v: Any, lo: int, allow_none: bool = False) -> int | None:
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            v = int(v)  # JSON from a UI form may carry 5.0
        else:
            problems.append(Problem(key, f"must be an integer >= {lo}, got {v!r}", "bad_param"))
            return None
    if v < lo:
        problems.append(Problem(key, f"must be an integer >= {lo}, got {v}", "bad_param"))
        return None
    return v


def _bool_param(problems: list[Problem], key: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    problems.append(Problem(key, f"must be true or false, got {v!r}", "bad_param"))
    return False


def _pos_number(problems: list[Problem], key: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or v != v or v == float("inf"):
        problems.append(Problem(key, f"must be a number > 0, got {v!r}", "bad_param"))
        return 1.0
    return float(v)


def _non_negative(problems: list[Problem], key: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 or v == float("inf"):
        problems.append(Problem(key, f"must be a number >= 0, got {v!r}", "bad_param"))
        return 0.0
    return float(v)


def _strategy_param(problems: list[Problem], v: Any) -> str:
    from kafka_reassign.execution.order import parse_strategy
    if not isinstance(v, str):
        problems.append(Problem("movement_strategy", f"must be a string such as {defaults.MOVEMENT_STRATEGY!r}, "
                                                     f"got {v!r}", "bad_param"))
        return defaults.MOVEMENT_STRATEGY
    try:
        return ",".join(parse_strategy(v))
    except ValueError as exc:
        problems.append(Problem("movement_strategy", str(exc), "bad_param"))
        return defaults.MOVEMENT_STRATEGY


def validate_params(raw: Mapping[str, Any] | ReassignParams | None = None) -> ReassignParams:
    """Check run parameters; raise :class:`ParamError` listing every problem.

    :param raw: a dict with any of :class:`ReassignParams`' fields (missing ones take their
        default; keys of other layers such as ``kafka_conn_id`` are ignored)
    """
    if isinstance(raw, ReassignParams):
        raw = raw.to_json()
    raw = dict(raw or {})
    if not isinstance(raw, dict):
        raise ParamError([Problem("params", "must be an object", "bad_param")])
    defaults = ReassignParams()
    problems: list[Problem] = []
    fields = set(defaults.to_json())
    for k in sorted(set(raw) - fields - FOREIGN_PARAM_KEYS):
        problems.append(Problem(k, f"unknown parameter (known: {', '.join(sorted(fields))})", "unknown_param"))
    get = lambda k: raw.get(k, getattr(defaults, k))  # noqa: E731
    throttle = _int_param(problems, "throttle_bytes_per_sec", get("throttle_bytes_per_sec"), MIN_THROTTLE,
                          allow_none=True)
    log_dir_throttle = _int_param(problems, "log_dir_throttle_bytes_per_sec",
                                  get("log_dir_throttle_bytes_per_sec"), MIN_THROTTLE, allow_none=True)
    out = dict(
        throttle_bytes_per_sec=throttle,
        log_dir_throttle_bytes_per_sec=log_dir_throttle,
        max_partition_movements=_int_param(problems, "max_partition_movements",
                                           get("max_partition_movements"), 1) or 1,
        max_movements_per_broker=_int_param(problems, "max_movements_per_broker",
                                            get("max_movements_per_broker"), 1) or 1,
        max_leader_movements=_int_param(problems, "max_leader_movements", get("max_leader_movements"), 1) or 1,
        batch_timeout_minutes=_pos_number(problems, "batch_timeout_minutes", get("batch_timeout_minutes")),
        allow_rf_change=_bool_param(problems, "allow_rf_change", get("allow_rf_change")),
        allow_internal_topics=_bool_param(problems, "allow_internal_topics", get("allow_internal_topics")),
        dry_run=_bool_param(problems, "dry_run", get("dry_run")),
        cancel_on_failure=_bool_param(problems, "cancel_on_failure", get("cancel_on_failure")),
        stall_window_seconds=_pos_number(problems, "stall_window_seconds", get("stall_window_seconds")),
        poll_interval_seconds=_pos_number(problems, "poll_interval_seconds", get("poll_interval_seconds")),
        allow_stalling_moves=_bool_param(problems, "allow_stalling_moves", get("allow_stalling_moves")),
        produce_sample_seconds=_non_negative(problems, "produce_sample_seconds", get("produce_sample_seconds")),
        rehearse=_bool_param(problems, "rehearse", get("rehearse")),
        movement_strategy=_strategy_param(problems, get("movement_strategy")),
    )
    for k in ("max_partition_movements", "max_movements_per_broker", "max_leader_movements"):
        if out[k] > INT_MAX:
            problems.append(Problem(k, f"must be <= {INT_MAX}", "bad_param"))
    if problems:
        raise ParamError(problems)
    return ReassignParams(**out)
