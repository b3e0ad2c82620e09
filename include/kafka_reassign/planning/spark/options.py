"""Planner options: :func:`make_options` builds and type-checks :class:`PlanOptions`."""
from __future__ import annotations

import dataclasses
from typing import Any

from kafka_reassign.planning.spark.assignor import PlanOptions
from kafka_reassign.errors import GoalError, Problem
from kafka_reassign.planning.spark.goals import GOALS
from kafka_reassign.planning.spark.goals.disk_threshold import percent_problem
from kafka_reassign.planning.goal_order import BALANCE_GOALS, goal_names, order_problems, switches

#: the goals that run on Spark (kafka_reassign.planning.spark.flow); the others run on the driver
BALANCING_GOALS: tuple[str, ...] = ("rebalance", "add-brokers", "remove-brokers")
GOAL_NAMES: tuple[str, ...] = BALANCING_GOALS + tuple(GOALS)
CUSTOM_GOAL = "custom"

_TUPLE_INT = {"brokers", "exclude_brokers"}
_TUPLE_STR = {"topics", "exclude_topics", "broker_network_capacities"}


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
        elif k == "balance_goals":
            v = goal_names(v)
        elif k in _TUPLE_STR:
            if isinstance(v, str):
                v = [x for x in v.split(",") if x.strip()]
            v = tuple(str(x).strip() for x in v)
        kwargs[k] = v
    opts = PlanOptions(**{k: v for k, v in kwargs.items() if k in known})
    problems += _value_problems(opts)
    problems += _resolve_goals(opts, set(kwargs), goal)
    pct_problem = percent_problem(opts.disk_threshold_percent)
    if pct_problem is not None and (goal == "disk-threshold" or opts.disk_threshold_percent is not None):
        problems.append(pct_problem)
    if opts.engine not in ("spark", "local"):
        problems.append(Problem("engine", f"must be 'spark' or 'local', got {opts.engine!r}", "bad_option"))
    if goal not in GOAL_NAMES and not (goal == CUSTOM_GOAL and opts.assignor):
        problems.append(Problem("goal", f"unknown goal {goal!r}: use one of {', '.join(GOAL_NAMES)}"
                                        " (or 'custom' with an assignor)", "unknown_goal"))
    if problems:
        raise GoalError(problems, headline="invalid planner options")
    return opts


def _value_problems(opts: PlanOptions) -> list[Problem]:
    """Out-of-range numbers and non-boolean switches among the options."""
    problems: list[Problem] = []
    for name in ("capacity_ceiling", "network_capacity_ceiling"):
        v = getattr(opts, name)
        if not isinstance(v, (int, float)) or not 0 < v <= 1:
            problems.append(Problem(name, f"must be in (0, 1], got {v!r}", "bad_option"))
    for name in ("balance_tolerance", "count_tolerance", "leader_tolerance", "network_in_tolerance",
                 "leader_bytes_in_tolerance", "network_out_tolerance", "consumer_fanout"):
        v = getattr(opts, name)
        if not isinstance(v, (int, float)) or not v >= 0:  # NaN refused too
            problems.append(Problem(name, f"must be a number >= 0, got {v!r}", "bad_option"))
    if not isinstance(opts.balance_network_in, bool):
        problems.append(Problem("balance_network_in", f"must be true or false, got {opts.balance_network_in!r}",
                                "bad_option"))
    for name in ("max_partition_movements", "max_movements_per_broker", "max_leader_movements",
                 "max_task_replicas"):
        v = getattr(opts, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            problems.append(Problem(name, f"must be an integer >= 1, got {v!r}", "bad_option"))
    v = opts.topic_spread_slack
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        problems.append(Problem("topic_spread_slack", f"must be an integer >= 0, got {v!r}", "bad_option"))
    for name in ("search_piece_replicas", "max_replicas_per_broker"):
        v = getattr(opts, name)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            problems.append(Problem(name, f"must be an integer >= 1, got {v!r}", "bad_option"))
    for name in ("throttle_bytes_per_sec", "log_dir_throttle_bytes_per_sec", "timeout_seconds",
                 "broker_network_capacity_bytes_per_sec"):
        v = getattr(opts, name)
        if v is not None and (not isinstance(v, (int, float)) or v <= 0):
            problems.append(Problem(name, f"must be a positive number of bytes/s, got {v!r}", "bad_option"))
    return problems


def _resolve_goals(opts: PlanOptions, given: set[str], goal: str) -> list[Problem]:
    """Set the goal switches from ``balance_goals`` (one place decides); a switch given by name (as
    before the list existed: ``balance_network_in=False``) drops its goal or adds it last.

    :param given: the option names the caller gave
    :param goal: the plan's kind (the list is checked for the balancing ones)
    """
    names = list(opts.balance_goals)
    for g in BALANCE_GOALS:
        on = getattr(opts, g.switch) if g.switch in given else None
        if on is False and g.name in names:
            names.remove(g.name)
        elif on is True and g.name not in names:
            names.append(g.name)
    opts.balance_goals = tuple(names)
    for switch, on in switches(names).items():
        setattr(opts, switch, on)
    return order_problems(names, moves_data=goal in BALANCING_GOALS)
