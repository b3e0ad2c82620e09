"""The balance goals of the balancing plans, by name, in a priority order (Cruise Control's goal list).

A plan of kind rebalance, add-brokers or remove-brokers balances the goals of
``PlanOptions.balance_goals``, an ordered list of names. Hard goals are rules every plan keeps
(they are checked on every changed partition whether listed or not: there is no way to turn them
off); listed, they must come first, as Cruise Control requires its hard goals above every
distribution goal. A distribution goal evens one resource within its tolerance; leaving it out
turns it off. The order is the priority: where two goals touch the same thing, the lower one may
not push the higher one's resource out of its tolerance:

* disk and network-in both move data: network-in after disk keeps every broker within the disk
  tolerance; listed above disk, it is bound by the capacity ceiling only;
* topic-spread moves data too: after disk and network-in it keeps every broker within the disk
  limits of the network-in pass and network in within its tolerance;
* leader-count, leader-bytes-in and network-out all choose preferred leaders (a reorder, no data
  moved): a lower one keeps the higher ones' brokers within their tolerances.

Between a data goal and a leader goal there is nothing to decide: a reorder changes neither
bytes nor network in, and the leader goals run after every move.

No Airflow or Spark import: the CLI, the DAG form and the fleet config validate names here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from kafka_reassign.errors import Problem

HARD, DISTRIBUTION = "hard", "distribution"


@dataclass(frozen=True)
class BalanceGoal:
    """One goal of the list.

    :param name: kebab-case name users list
    :param kind: HARD (a rule) or DISTRIBUTION (balanced within a tolerance)
    :param switch: the PlanOptions switch the list sets (None: always on)
    :param tolerance: the PlanOptions field holding its tolerance or limit
    :param resource: its key in the summary's ``balance`` (None: a rule, or topic-spread, whose
        figure is the summary's ``topic_spread``, an excess count rather than max / mean)
    :param description: one line for help and docs
    """

    name: str
    kind: str
    switch: str | None
    tolerance: str | None
    resource: str | None
    description: str


BALANCE_GOALS: tuple[BalanceGoal, ...] = (
    BalanceGoal("rack-aware", HARD, None, None, None,
                "a partition never spans fewer racks; with racks >= RF at most one replica per rack"),
    BalanceGoal("capacity", HARD, None, "capacity_ceiling", None,
                "no receiving broker or log dir ends above capacity_ceiling of its capacity"),
    BalanceGoal("network-capacity", HARD, None, "network_capacity_ceiling", None,
                "no broker's network in or out is pushed above network_capacity_ceiling of its link "
                "(brokers whose link speed is known)"),
    BalanceGoal("replica-capacity", HARD, None, "max_replicas_per_broker", None,
                "no broker is pushed above max_replicas_per_broker replicas (no cap unless set)"),
    BalanceGoal("disk", DISTRIBUTION, None, "balance_tolerance", "disk",
                "every broker's disk utilisation within balance_tolerance of the mean, least data moved"),
    BalanceGoal("network-in", DISTRIBUTION, "balance_network_in", "network_in_tolerance", "network_in",
                "produce received (as leader or follower) within network_in_tolerance of the mean"),
    BalanceGoal("topic-spread", DISTRIBUTION, "balance_topic_spread", "topic_spread_slack", None,
                "each topic's replicas per broker at most topic_spread_slack above its even share "
                "(redirects, swaps, moves)"),
    BalanceGoal("leader-count", DISTRIBUTION, "balance_leaders", "leader_tolerance", "leaders",
                "preferred-leader counts within leader_tolerance of the mean (reorders, no data moved)"),
    BalanceGoal("leader-bytes-in", DISTRIBUTION, "balance_leader_bytes_in", "leader_bytes_in_tolerance",
                "leader_bytes_in",
                "produce led within leader_bytes_in_tolerance of the mean (reorders, no data moved)"),
    BalanceGoal("network-out", DISTRIBUTION, "balance_network_out", "network_out_tolerance", "network_out",
                "sent as leader (produce x followers + what consumers read: measured, else produce x "
                "consumer_fanout) within network_out_tolerance of the mean (reorders, no data moved)"),
)
GOALS_BY_NAME: dict[str, BalanceGoal] = {g.name: g for g in BALANCE_GOALS}
#: every goal, in the order of the table above (Cruise Control's default goals cover the same
#: resources): a user moving from it keeps network out, leader bytes in and topic spread
DEFAULT_BALANCE_GOALS: tuple[str, ...] = tuple(g.name for g in BALANCE_GOALS)


def goal_names(value: Any) -> tuple[str, ...]:
    """The names of a list, a tuple or comma lists (the CLI repeats its flag, a form may give
    "disk,network-in"); None is the default list."""
    if value is None:
        return DEFAULT_BALANCE_GOALS
    items = [value] if isinstance(value, str) else list(value)
    return tuple(n.strip() for item in items for n in str(item).split(",") if n.strip())


def order_problems(names: Sequence[str], moves_data: bool = True) -> list[Problem]:
    """What is wrong with a goal list: unknown or repeated names, a distribution goal above a hard
    one, or no disk goal in a balancing plan (one problem each, one line each).

    :param names: the list, highest priority first
    :param moves_data: the plan is a balancing one (rebalance, add-brokers, remove-brokers)
    """
    problems = []
    unknown = [n for n in names if n not in GOALS_BY_NAME]
    if unknown:
        problems.append(Problem("balance_goals", f"unknown goal {', '.join(map(repr, unknown))}: the known "
                                                 f"goals are {', '.join(GOALS_BY_NAME)}", "unknown_goal"))
    twice = sorted({n for n in names if list(names).count(n) > 1})
    if twice:
        problems.append(Problem("balance_goals", f"goal {', '.join(map(repr, twice))} is listed more than once",
                                "duplicate_goal"))
    known = [(n, GOALS_BY_NAME[n].kind) for n in names if n in GOALS_BY_NAME]
    hard_at = [i for i, (_, kind) in enumerate(known) if kind == HARD]
    above = [n for i, (n, kind) in enumerate(known) if kind == DISTRIBUTION and hard_at and i < hard_at[-1]]
    if above:
        problems.append(Problem("balance_goals", f"distribution goal {above[0]!r} is above hard goal "
                                                 f"{known[hard_at[-1]][0]!r}: hard goals come first (as in "
                                                 "Cruise Control)", "goal_order"))
    if moves_data and "disk" not in names:
        problems.append(Problem("balance_goals", "the disk goal is the move search of every balancing plan: "
                                                 "keep 'disk' in the list", "goal_order"))
    return problems


def switches(names: Iterable[str]) -> dict[str, bool]:
    """The PlanOptions switches the list sets: on for a listed goal, off for the others."""
    listed = set(names)
    return {g.switch: g.name in listed for g in BALANCE_GOALS if g.switch}


def ranks_above(names: Sequence[str], higher: str, lower: str) -> bool:
    """Both goals are listed and ``higher`` comes first."""
    return higher in names and lower in names and list(names).index(higher) < list(names).index(lower)


def capacities_over(summary: Mapping[str, Any]) -> dict[str, float]:
    """The hard capacity goals a cluster breaks before the plan and the plan improves, from a
    plan summary (``network_capacity``: the fullest link each way over the ceiling;
    ``replica_capacity``: the fullest broker over the cap): the scheduled rebalance acts on them
    whatever its threshold (a rule broken that no plan improves does not trigger it)."""
    out: dict[str, float] = {}
    net = summary.get("network_capacity") or {}
    for way in ("in", "out"):
        fig = net.get(way) or {}
        if fig and fig["before"] > net["ceiling"] and fig["after"] < fig["before"]:
            out[f"network-capacity ({way})"] = float(fig["before"])
    rep = summary.get("replica_capacity") or {}
    cap = rep.get("max_replicas_per_broker")
    if cap is not None and rep["fullest_before"] > cap and rep["fullest_after"] < rep["fullest_before"]:
        out["replica-capacity"] = float(rep["fullest_before"])
    return out


def resources_over(balance: Mapping[str, Mapping[str, Any]], names: Sequence[str], threshold: float,
                   when: str = "before") -> dict[str, float]:
    """The listed distribution goals whose resource is above ``threshold`` (max / mean) in a plan
    summary's ``balance``: what the scheduled rebalance acts on.

    :param balance: the summary's ``balance`` (resource -> {"before", "after"})
    :param names: the goal list the plan was made with
    :param when: "before" or "after"
    """
    out = {}
    for name in names:
        goal = GOALS_BY_NAME.get(name)
        figure = balance.get(goal.resource or "", {}).get(when) if goal else None
        if figure is not None and float(figure) > threshold:
            out[name] = float(figure)
    return out
