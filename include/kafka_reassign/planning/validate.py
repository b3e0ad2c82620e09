"""Validate the run parameters, before any write (the plan itself: :mod:`kafka_reassign.planning.plan_checks`).

Every problem is collected (not just the first). Kinds of rejection (``Problem.kind``):
bad_param, unknown_param.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from kafka_reassign import defaults as D
from kafka_reassign.errors import ParamError, Problem
from kafka_reassign.planning.goal_order import DEFAULT_BALANCE_GOALS, goal_names, order_problems


# -- run parameters ------------------------------------------------------------------------

@dataclass(frozen=True)
class ReassignParams:
    """Validated run parameters: one field per row of :data:`kafka_reassign.defaults.RUN_PARAMS`
    (type, default, bounds and meaning are there; a unit test keeps the two in step).

    :param throttle_bytes_per_sec: KIP-73 replication throttle per broker; None = unthrottled
    :param log_dir_throttle_bytes_per_sec: replica.alter.log.dirs.io.max.bytes.per.second
        for brokers with log-dir moves; None = same as throttle_bytes_per_sec
    :param max_partition_movements: moves (KIP-435 steps) in flight in the whole cluster
    :param max_movements_per_broker: moves in flight adding to, removing from or copying from one broker
    :param max_leader_movements: preferred-leader changes in flight
    :param adaptive_concurrency: halve the caps of brokers whose moving partitions lose in-sync
        replicas and grow them back once healthy (:mod:`kafka_reassign.execution.health`)
    :param min_movements_per_broker: the floor adaptive concurrency never shrinks a cap below
    :param move_timeout_minutes: a move not done this long after its submission fails the run
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
    :param leader_sourcing: copy each partition from its least busy in-sync replica, made leader
        first (:mod:`kafka_reassign.execution.sourcing`)
    :param rehearse: rehearse the run on a simulated copy of the cluster first (its prediction
        becomes the estimate; the report travels with the prepared run)
    :param movement_strategy: the order moves start in (:mod:`kafka_reassign.execution.order`)
    :param maintenance_windows: new moves start only inside these (empty: always;
        :mod:`kafka_reassign.execution.windows`)
    :param log_dir_capacity_bytes: log dir capacities the snapshot takes over the reported ones
        (planning only; :mod:`kafka_reassign.cluster.capacities`)
    :param disk_threshold_percent: the disk-threshold goal's X (planning only): every log dir
        ends at most X% of its capacity
    :param adaptive_throttle: each poll, each broker in flight gets its link capacity less its
        client traffic, within the bounds (:mod:`kafka_reassign.throttle.adaptive`)
    :param throttle_min_bytes_per_sec: the adaptive throttle's floor (raised to the pre-flight
        stall point when the run is prepared)
    :param throttle_max_bytes_per_sec: the adaptive throttle's ceiling
    :param broker_network_capacity_bytes_per_sec: a broker's link for the adaptive throttle
    :param broker_network_capacities: ``BROKER=RATE`` entries for brokers whose link differs
    :param balance_goals: the balancing plans' goals, highest priority first (planning only;
        :mod:`kafka_reassign.planning.goal_order`)
    :param consumer_fanout: consumer groups reading each partition (planning only: network out)
    :param max_replicas_per_broker: planning only: the replica-capacity goal's cap (None: no cap)
    """

    throttle_bytes_per_sec: int | None = D.THROTTLE_BYTES_PER_SEC
    log_dir_throttle_bytes_per_sec: int | None = D.LOG_DIR_THROTTLE_BYTES_PER_SEC
    max_partition_movements: int = D.MAX_PARTITION_MOVEMENTS
    max_movements_per_broker: int = D.MAX_MOVEMENTS_PER_BROKER
    max_leader_movements: int = D.MAX_LEADER_MOVEMENTS
    adaptive_concurrency: bool = D.ADAPTIVE_CONCURRENCY
    min_movements_per_broker: int = D.MIN_MOVEMENTS_PER_BROKER
    move_timeout_minutes: float = D.MOVE_TIMEOUT_MINUTES
    allow_rf_change: bool = D.ALLOW_RF_CHANGE
    allow_internal_topics: bool = D.ALLOW_INTERNAL_TOPICS
    dry_run: bool = D.DRY_RUN
    cancel_on_failure: bool = D.CANCEL_ON_FAILURE
    stall_window_seconds: float = D.STALL_WINDOW_SECONDS
    poll_interval_seconds: float = D.POLL_INTERVAL_SECONDS
    allow_stalling_moves: bool = D.ALLOW_STALLING_MOVES
    produce_sample_seconds: float = D.PRODUCE_SAMPLE_SECONDS
    leader_sourcing: bool = D.LEADER_SOURCING
    rehearse: bool = D.REHEARSE
    movement_strategy: str = D.MOVEMENT_STRATEGY
    maintenance_windows: tuple[str, ...] = ()
    log_dir_capacity_bytes: tuple[str, ...] = ()
    disk_threshold_percent: float | None = D.DISK_THRESHOLD_PERCENT
    adaptive_throttle: bool = D.ADAPTIVE_THROTTLE
    throttle_min_bytes_per_sec: int = D.THROTTLE_MIN_BYTES_PER_SEC
    throttle_max_bytes_per_sec: int = D.THROTTLE_MAX_BYTES_PER_SEC
    broker_network_capacity_bytes_per_sec: int | None = None
    broker_network_capacities: tuple[str, ...] = ()
    balance_goals: tuple[str, ...] = DEFAULT_BALANCE_GOALS
    consumer_fanout: float = D.CONSUMER_FANOUT
    max_replicas_per_broker: int | None = None

    def to_json(self) -> dict[str, Any]:
        # Plain JSON: a tuple (the maintenance windows) as the list it reads back as.
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ReassignParams":
        return validate_params(d)


#: Keys DAG runs and callers carry that belong to other layers (planning, connection); ignored here.
FOREIGN_PARAM_KEYS = D.OTHER_LAYER_KEYS


def _int_param(problems: list[Problem], key: str, v: Any, param: D.RunParam) -> int | None:
    lo = int(param.minimum or 0)
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            v = int(v)  # JSON from a UI form may carry 5.0
        else:
            problems.append(Problem(key, f"must be an integer >= {lo}, got {v!r}", "bad_param"))
            return None
    if v < lo:
        problems.append(Problem(key, f"must be an integer >= {lo}, got {v}", "bad_param"))
        return None
    if param.maximum is not None and v > param.maximum:
        problems.append(Problem(key, f"must be <= {param.maximum}", "bad_param"))
        return None
    return v


def _bool_param(problems: list[Problem], key: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    problems.append(Problem(key, f"must be true or false, got {v!r}", "bad_param"))
    return False


def _number_param(problems: list[Problem], key: str, v: Any, param: D.RunParam) -> float:
    lo = param.minimum or 0
    number = not isinstance(v, bool) and isinstance(v, (int, float))
    in_range = number and (v > lo if param.exclusive_minimum else v >= lo) and v != float("inf")
    if not in_range:  # NaN fails both comparisons
        problems.append(Problem(key, f"must be a number {'>' if param.exclusive_minimum else '>='} {lo:g}, "
                                     f"got {v!r}", "bad_param"))
        return float(lo)
    if param.maximum is not None and v > param.maximum:
        problems.append(Problem(key, f"must be a number <= {param.maximum}, got {v!r}", "bad_param"))
        return float(param.maximum)
    return float(v)


def _strategy_param(problems: list[Problem], key: str, v: Any) -> str:
    from kafka_reassign.execution.order import parse_strategy
    if not isinstance(v, str):
        problems.append(Problem(key, f"must be a string such as {D.MOVEMENT_STRATEGY!r}, got {v!r}", "bad_param"))
        return D.MOVEMENT_STRATEGY
    try:
        return ",".join(parse_strategy(v))
    except ValueError as exc:
        problems.append(Problem(key, str(exc), "bad_param"))
        return D.MOVEMENT_STRATEGY


def _windows_param(problems: list[Problem], key: str, v: Any) -> tuple[str, ...]:
    """Maintenance windows: each parsed, none overlapping (:func:`~kafka_reassign.execution.windows.parse_windows`)."""
    from kafka_reassign.execution.windows import parse_windows
    try:
        parse_windows(v)
    except ParamError as exc:
        problems.extend(Problem(key, p.reason, p.kind) for p in exc.problems)
        return ()
    return tuple(v or ())


def _entries_param(problems: list[Problem], key: str, v: Any, name: str) -> tuple[str, ...]:
    """A list of entries that a parser checks, each bad one a problem: log dir capacities
    (:func:`~kafka_reassign.cluster.capacities.parse_capacities`; brokers and dirs are checked against
    the cluster when the snapshot applies them) or per-broker rates
    (:func:`~kafka_reassign.throttle.adaptive.broker_rates`)."""
    from kafka_reassign.cluster.capacities import parse_capacities
    from kafka_reassign.throttle.adaptive import broker_rates

    parse = parse_capacities if name == "log_dir_capacity_bytes" else broker_rates
    try:
        parse(v, key)
    except ParamError as exc:
        problems.extend(exc.problems)
        return ()
    return tuple(v or ())


def _goals_param(problems: list[Problem], v: Any) -> tuple[str, ...]:
    """The goal list: known names, no repeats, hard goals first (:func:`~kafka_reassign.planning.goal_order.order_problems`)."""
    names = goal_names(v)
    found = order_problems(names)
    problems.extend(found)
    return DEFAULT_BALANCE_GOALS if found else names


#: List parameters whose entries a parser checks (the others are maintenance windows).
_PARSED_LISTS = frozenset({"log_dir_capacity_bytes", "broker_network_capacities"})


def _check(problems: list[Problem], key: str, v: Any, param: D.RunParam) -> Any:
    """One value against its row; problems are named ``key`` (the name it was given as)."""
    if v is None and param.nullable:
        return None
    if param.choices:
        return _strategy_param(problems, key, v)
    if param.kind is tuple:
        if param.name in _PARSED_LISTS:
            return _entries_param(problems, key, v, param.name)
        if param.name == "balance_goals":
            return _goals_param(problems, v)
        return _windows_param(problems, key, v)
    if param.kind is bool:
        return _bool_param(problems, key, v)
    if param.kind is int:
        return _int_param(problems, key, v, param)
    return _number_param(problems, key, v, param)


def _take_old_names(raw: dict[str, Any], problems: list[Problem]) -> dict[str, str]:
    """Move values given under a former name to the current one; return current -> name given."""
    given_as: dict[str, str] = {}
    for old, name in D.OLD_NAMES.items():
        if old not in raw:
            continue
        if name in raw:
            problems.append(Problem(old, f"{old} is the old name of {name}: give one of them, not both",
                                    "bad_param"))
            raw.pop(old)
            continue
        raw[name] = raw.pop(old)
        given_as[name] = old
    return given_as


def _check_floor(problems: list[Problem], out: dict[str, Any], given: bool) -> None:
    """The adaptive floor against the per-broker cap: refused above it when given, else clamped to it."""
    floor, cap = out.get("min_movements_per_broker"), out.get("max_movements_per_broker")
    if floor is None or cap is None or floor <= cap:
        return
    if given and out.get("adaptive_concurrency"):
        problems.append(Problem("min_movements_per_broker",
                                f"min_movements_per_broker={floor} is above max_movements_per_broker={cap}: "
                                "the adaptive floor must be at most the per-broker cap", "bad_param"))
    else:  # the default floor under a smaller cap, or a floor adaptive concurrency never uses
        out["min_movements_per_broker"] = cap


def _check_adaptive_throttle(problems: list[Problem], out: dict[str, Any]) -> None:
    """The adaptive throttle's bounds and capacity; the starting rate is clamped into the bounds."""
    low, high = out.get("throttle_min_bytes_per_sec"), out.get("throttle_max_bytes_per_sec")
    if out.get("broker_network_capacity_bytes_per_sec") is None:
        problems.append(Problem("broker_network_capacity_bytes_per_sec", "adaptive_throttle needs each broker's "
                                "network capacity (bytes/s its link carries, less peak consumer traffic)",
                                "bad_param"))
    if out.get("throttle_bytes_per_sec") is None:
        problems.append(Problem("throttle_bytes_per_sec", "adaptive_throttle needs a throttle (the starting "
                                "rate): it adapts a throttle, it cannot run unthrottled", "bad_param"))
    if isinstance(low, int) and isinstance(high, int):
        if low > high:
            problems.append(Problem("throttle_min_bytes_per_sec", f"throttle_min_bytes_per_sec={low} is above "
                                    f"throttle_max_bytes_per_sec={high}", "bad_param"))
        elif isinstance(out.get("throttle_bytes_per_sec"), int):
            out["throttle_bytes_per_sec"] = min(max(out["throttle_bytes_per_sec"], low), high)


def validate_params(raw: Mapping[str, Any] | ReassignParams | None = None) -> ReassignParams:
    """Check run parameters against :data:`kafka_reassign.defaults.RUN_PARAMS`; raise
    :class:`ParamError` listing every problem.

    :param raw: a dict with any of :class:`ReassignParams`' fields (missing ones take their
        default; a former name such as ``batch_timeout_minutes`` stands for the current one; keys
        of other layers such as ``kafka_conn_id`` are ignored)
    """
    if isinstance(raw, ReassignParams):
        raw = raw.to_json()
    if raw is not None and not isinstance(raw, Mapping):
        raise ParamError([Problem("params", "must be an object", "bad_param")])
    values = dict(raw or {})
    problems: list[Problem] = []
    given_as = _take_old_names(values, problems)
    known = [p.name for p in D.RUN_PARAMS]
    for k in sorted(set(values) - set(known) - FOREIGN_PARAM_KEYS):
        problems.append(Problem(k, f"unknown parameter (known: {', '.join(sorted(known))})", "unknown_param"))
    out = {p.name: _check(problems, given_as.get(p.name, p.name), values.get(p.name, p.default), p)
           for p in D.RUN_PARAMS}
    # A DAG run carries every param, defaults included: only a floor other than the default is "given".
    _check_floor(problems, out, given=out["min_movements_per_broker"] != D.MIN_MOVEMENTS_PER_BROKER)
    if out.get("adaptive_throttle") is True:
        _check_adaptive_throttle(problems, out)
    if problems:
        raise ParamError(problems)
    return ReassignParams(**out)
