"""The plan summary (one JSON line in the CLI) from brokers-sized loads and the changed partitions.

Definitions (also in the README):

* ``replica_movements``: replicas created on a broker that did not hold them;
  ``data_to_move_bytes``: the bytes those copies read (the local log, ``size_bytes``);
  ``remote_bytes_not_copied``: the moved partitions' bytes in remote storage (tiered topics,
  KIP-405), each partition once: a move leaves them there.
* ``lower_bound_bytes``: the least data any plan must copy to reach the balance every listed
  data goal accepts, the goals together (:mod:`.lower_bound`): disk (every live broker at most
  ``balance_tolerance`` above the mean utilisation, drained brokers empty), network-in (within
  ``network_in_tolerance``) and topic-spread (within ``topic_spread_slack``) when listed; a
  goal's part counts when the plan reaches that goal (``lower_bound_goals``; disk always).
  ``lower_bound_by_goal``: each listed goal's own bound. No plan reaching those balances
  copies less; 0 when the cluster is already within them.
  ``moved_over_lower_bound`` = data moved / it; null when the bound is 0 and data moves, or
  when ``reaches_accepted_balance`` is false (the plan stops above the tolerance, so the bound
  does not apply; a warning says why).
* ``balance`` per resource = the largest broker / the mean over the brokers that hold data
  after the plan: ``disk`` by utilisation (bytes / capacity), ``replicas`` and ``leaders`` by count,
  ``network_in`` by the produce rate a broker receives as leader or follower, ``leader_bytes_in``
  by the produce rate it leads, ``network_out`` by what it sends as leader: the produce rate it
  leads times its followers plus what consumers read (:func:`~.loads.leader_out`: the measured
  ``consumer_bytes_per_sec``, else the rate times ``consumer_fanout``) (from the snapshot's ``bytes_in_per_sec``;
  1.0 when no rate is known). The balancing goals even out ``network_in`` after the disk balance (:mod:`.network`,
  option ``balance_network_in``); its moves count in ``data_to_move_bytes`` like any other.
  ``balance_before`` / ``balance_after`` are the disk figures.
* ``topic_spread`` (before, after, slack): the largest excess of one topic's replicas on a
  placeable broker over its even share ``ceil(replicas / placeable brokers)`` (in proportion to the
  broker's capacity when capacities differ: :class:`.spread.EvenShares`) plus ``topic_spread_slack``; 0 = every movable topic within its slack (:mod:`.spread`, goal topic-spread).
* ``batches``: null - the planner no longer cuts batches; the executor's sliding window of
  KIP-435 steps decides at run time what runs together. The plan file is ordered for it.
* ``estimated_seconds``: the run's own KIP-73 estimate (:mod:`.eta`, the same figure as the dry
  run's on the same snapshot and throttle: produce rates and in-sync replication counted). Null
  when some move never finishes; a warning then names the broker.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka_reassign.planning.plan_estimate import PlannedMove
from kafka_reassign.planning.spark.assignor import PlanOptions
from kafka_reassign.planning.spark.lower_bound import GoalBounds
from kafka_reassign.planning.spark.eta import plan_eta
from kafka_reassign.planning.spark.loads import Loads, network_out
from kafka_reassign.planning.spark.network_capacity import known_links
from kafka_reassign.planning.spark.spread import placeable_capacity, topic_spread
from kafka_reassign.planning.spark.targets import BrokerInfo, Targets, count_balance, moved_over_bound

if TYPE_CHECKING:  # pandas is imported where the frames are made
    import pandas as pd


def share_balance(values: dict[int, float], size: dict[int, float], ids: list[int]) -> float:
    """max utilisation / mean utilisation over ``ids`` (utilisation = value / size; 1.0 = perfect)."""
    total = sum(size[b] for b in ids)
    mean = sum(values.get(b, 0.0) for b in ids) / total if total else 0.0
    return max((values.get(b, 0.0) / size[b] for b in ids), default=0.0) / mean if mean else 1.0


def disk_balance(bytes_: dict[int, float], brokers: dict[int, BrokerInfo], ids: list[int]) -> float:
    """max disk utilisation / mean utilisation over ``ids`` (1.0 = perfect)."""
    return share_balance(bytes_, {b: brokers[b].capacity for b in ids}, ids)


def link_balance(load: dict[int, float], brokers: dict[int, BrokerInfo], ids: list[int]) -> float:
    """max / mean of a network load (in or out) over ``ids``; of its utilisation (load / link
    speed) when every one of them has a link speed, as the network goals even it then."""
    links = known_links(brokers, ids)
    return share_balance(load, links, ids) if links else count_balance(load, ids)


def _movement(changes: pd.DataFrame) -> tuple[int, float, int]:
    """Replica movements, bytes copied, leader changes."""
    n_added = changes["added"].str.len().fillna(0)
    copied = changes["size_bytes"] * n_added
    leaders = int((changes["orig"].str[0] != changes["final"].str[0]).sum())
    return int(n_added.sum()), float(copied.sum()), leaders


def build_summary(opts: PlanOptions, brokers: dict[int, BrokerInfo], t: Targets, before: Loads,
                  after: Loads, changes: pd.DataFrame, moves: list[PlannedMove], nic: dict[int, float],
                  warnings: list[str], bounds: GoalBounds) -> dict[str, Any]:
    """The summary dict (keys documented in the module docstring).

    :param changes: the changed partitions (pandas: topic, partition, orig, final, size_bytes, added)
    :param moves: the plan's moves as the estimate takes them (:func:`.eta.change_moves`)
    :param nic: broker -> network bytes/s
    :param bounds: the listed data goals' lower-bound terms (:func:`.lower_bound.goal_bounds`)
    """
    summary = balance_summary(opts, brokers, t, before, after, changes, bounds)
    summary["warnings"] = warnings + summary["warnings"]
    return with_estimate(summary, opts, moves, nic)


def with_estimate(summary: dict[str, Any], opts: PlanOptions, moves: list[PlannedMove],
                  nic: dict[int, float]) -> dict[str, Any]:
    """``summary`` (of :func:`balance_summary`) with the plan's estimate: its seconds, stall
    warnings first, and the remote bytes its moves leave in place."""
    seconds, stall_warnings = plan_eta(moves, opts, nic)
    summary["remote_bytes_not_copied"] = round(sum(m.remote_bytes for m in moves))
    summary["estimated_seconds"] = seconds
    summary["warnings"] = stall_warnings + summary["warnings"]
    return summary


def balance_summary(opts: PlanOptions, brokers: dict[int, BrokerInfo], t: Targets, before: Loads,
                    after: Loads, changes: pd.DataFrame, bounds: GoalBounds) -> dict[str, Any]:
    """The summary's figures of the loads before and after, every key in its place; the
    estimate's (:func:`with_estimate`) are left at 0, None and no warning."""
    replicas, data, leaders = _movement(changes)
    live = [b for b in brokers if b not in t.drained and brokers[b].alive]
    everyone = sorted(brokers)
    counted = bounds.counted(after)
    bound = bounds.joint(counted)
    reached = disk_balance(after.bytes, brokers, live) <= 1 + opts.balance_tolerance
    balance = {
        "disk": {"before": disk_balance(before.bytes, brokers, everyone),
                 "after": disk_balance(after.bytes, brokers, live)},
        "replicas": {"before": count_balance(before.count, everyone),
                     "after": count_balance(after.count, live)},
        "leaders": {"before": count_balance(before.leaders, everyone),
                    "after": count_balance(after.leaders, live)},
        "network_in": {"before": link_balance(before.net_in, brokers, everyone),
                       "after": link_balance(after.net_in, brokers, live)},
        "leader_bytes_in": {"before": count_balance(before.bytes_in, everyone),
                            "after": count_balance(after.bytes_in, live)},
        "network_out": {"before": link_balance(network_out(before, opts.consumer_fanout), brokers, everyone),
                        "after": link_balance(network_out(after, opts.consumer_fanout), brokers, live)},
    }
    balance = {k: {x: round(y, 4) for x, y in v.items()} for k, v in balance.items()}
    capacity = placeable_capacity(brokers, t)
    return {
        "goal": opts.goal, "assignor": f"builtin:{opts.goal}",
        "partitions_moved": int(len(changes)), "replica_movements": replicas, "log_dir_movements": 0,
        "data_to_move_bytes": round(data), "lower_bound_bytes": round(bound),
        "lower_bound_by_goal": bounds.by_goal(), "lower_bound_goals": counted,
        "remote_bytes_not_copied": 0,
        "moved_over_lower_bound": moved_over_bound(data, bound, reached),
        "reaches_accepted_balance": reached,
        "leader_movements": leaders, "batches": None,
        "batching": "none: the executor's sliding window of KIP-435 steps (plan in executor order)",
        "balance_metric": "max / mean per broker (disk: utilisation = bytes / capacity; 1.0 = perfect)",
        "balance": balance, "balance_goals": list(opts.balance_goals),
        "topic_spread": {"before": topic_spread(before.topic_count, capacity, opts.topic_spread_slack),
                         "after": topic_spread(after.topic_count, capacity, opts.topic_spread_slack),
                         "slack": opts.topic_spread_slack},
        "balance_before": balance["disk"]["before"], "balance_after": balance["disk"]["after"],
        "replica_count_balance_before": balance["replicas"]["before"],
        "replica_count_balance_after": balance["replicas"]["after"],
        "leader_balance_before": balance["leaders"]["before"],
        "leader_balance_after": balance["leaders"]["after"],
        "racks_capped": t.rack_capped,
        "throttle_bytes_per_sec": opts.throttle_bytes_per_sec,
        "estimated_seconds": None,
        "warnings": [],
        "brokers": broker_rows(brokers, before, after),
    }


def broker_rows(brokers: dict[int, BrokerInfo], before: Loads, after: Loads) -> list[dict[str, Any]]:
    """One row per broker for the chart and the UI."""
    rows = []
    for b in sorted(brokers):
        cap = brokers[b].capacity
        rack = brokers[b].rack
        rows.append({
            "broker": b, "rack": None if rack.startswith("__no_rack_") else rack, "capacity_bytes": cap,
            "bytes_before": before.bytes[b], "bytes_after": after.bytes[b],
            "util_before": round(before.bytes[b] / cap, 6), "util_after": round(after.bytes[b] / cap, 6),
            "replicas_before": before.count[b], "replicas_after": after.count[b],
            "leaders_before": before.leaders[b], "leaders_after": after.leaders[b],
        })
    return rows
