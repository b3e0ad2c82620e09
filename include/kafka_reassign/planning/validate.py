"""Validate the run parameters, before any write (the plan itself: :mod:`kafka_reassign.planning.plan_checks`).

Every problem is collected (not just the first). Kinds of rejection (``Problem.kind``):
bad_param, unknown_param.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from kafka_reassign import defaults
from kafka_reassign.errors import ParamError, PlanValidationError, Problem
from kafka_reassign.planning.plan import ANY_LOG_DIR, ReassignmentPlan, parse_plan_entries
from kafka_reassign.cluster.state import ClusterState, InFlight, TopicPartition
from kafka_reassign.execution.steps import INT_MAX, plan_steps


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
