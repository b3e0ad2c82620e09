"""Summary of the driver-side goals (replication-factor, rack-repair, disks, disk-threshold, user
assignors): movement, lower bound, balance and the KIP-73 time estimate. The balancing goals' summary is
:mod:`kafka_reassign.planning.spark.report`.

Definitions (also in the README):

* ``replica_movements``: replicas created on a broker that did not hold them (each copies the
  partition once); ``log_dir_movements``: replicas moved between log dirs of one broker.
* ``data_to_move_bytes``: bytes those copies read, inter-broker plus intra-broker: the local
  log (``size_bytes``); ``remote_bytes_not_copied``: the moving partitions' bytes in remote
  storage (tiered topics, KIP-405), each partition once: they stay where they are.
* ``lower_bound_bytes``: bytes any plan reaching the goal must move, each goal's own (rack-repair:
  one copy per missing rack; replication-factor: one per missing replica; disks: the bytes above
  each log dir's tolerance edge, ``balance_tolerance`` above its broker's utilisation;
  disk-threshold: the bytes above the threshold on each log dir over it);
  ``moved_over_lower_bound`` = data_to_move_bytes / lower_bound_bytes.
* ``leader_movements``: partitions whose preferred leader (first replica) changes.
* ``leader_bytes_in_balance_before`` / ``_after``: the produce rate a broker leads, max / mean
  (Cruise Control's leader bytes in; 1.0 when the snapshot has no produce rates).
* ``balance`` = max broker disk utilisation / mean utilisation (bytes / capacity; mean =
  total bytes / total capacity) over the brokers that hold data after the plan (drained brokers
  are left out of ``balance_after``). 1.0 is perfect; 1.05 = the fullest broker is 5% above the
  mean. ``cv`` (coefficient of variation of utilisation) is reported beside it.
* ``estimated_seconds`` is the run's own KIP-73 estimate (:mod:`.eta`): the executor's KIP-435
  steps in one sliding window, each move's new replica catching up at the throttle less its
  produce rate and the in-sync replication its leader's quota records (``R - (k+1)P``). The dry
  run shows the same figure for the same snapshot and throttle. When some move never finishes
  a warning names the broker and the estimate is null.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from kafka_reassign.planning.plan import ReassignmentPlan
from kafka_reassign.planning.spark.assignor import PlanOptions
from kafka_reassign.planning.spark.cluster import Cluster
from kafka_reassign.planning.spark.eta import cluster_moves, network_of, plan_eta
from kafka_reassign.planning.spark.targets import count_balance, moved_over_bound

Placement = Sequence[tuple[Sequence[int], Sequence[str]]]


def _stats(values: dict[int, float], caps: dict[int, float]) -> tuple[float, float]:
    """(max util / mean util, coefficient of variation of util)."""
    brokers = [b for b in values if caps.get(b)]
    if not brokers:
        return 1.0, 0.0
    total_cap = sum(caps[b] for b in brokers)
    mean = sum(values[b] for b in brokers) / total_cap if total_cap else 0.0
    utils = [values[b] / caps[b] for b in brokers]
    if mean <= 0:
        return 1.0, 0.0
    avg = sum(utils) / len(utils)
    sd = math.sqrt(sum((u - avg) ** 2 for u in utils) / len(utils))
    return max(utils) / mean, (sd / avg if avg else 0.0)


@dataclass
class Movement:
    """What a plan copies, counted per replica (definitions in the module docstring)."""

    replica_moves: int = 0
    log_dir_moves: int = 0
    leader_moves: int = 0
    data_bytes: float = 0.0


def movement(cluster: Cluster, final: Placement) -> Movement:
    """Replicas created, replicas moved between log dirs, preferred-leader changes, bytes copied.

    :param final: each partition's (replicas, log dirs) after the plan, in cluster order
    """
    out = Movement()
    for p, (reps, dirs) in zip(cluster.partitions, final):
        if tuple(reps) == p.replicas and tuple(dirs) == p.log_dirs:
            continue
        added = [r for r in reps if r not in p.replicas]
        out.replica_moves += len(added)
        out.data_bytes += p.size_bytes * len(added)
        if reps and reps[0] != p.replicas[0]:
            out.leader_moves += 1
        old = dict(zip(p.replicas, p.log_dirs))
        moved_dirs = sum(1 for r, d in zip(reps, dirs) if r in old and old[r] != d)
        out.log_dir_moves += moved_dirs
        out.data_bytes += p.size_bytes * moved_dirs
    return out


def balance_figures(cluster: Cluster, before: Mapping[str, Mapping[int, float]],
                    after: Mapping[str, Mapping[int, float]], drained: set[int]) -> dict[str, float]:
    """Disk balance and cv, replica-count and leader balance before and after (rounded).

    :param drained: brokers left out of the after-figures (remove-brokers)
    """
    caps = {b: cluster.brokers[b].capacity_bytes for b in cluster.brokers}
    live = [b for b in caps if b not in drained]
    bal_before, cv_before = _stats({b: before["bytes"].get(b, 0.0) for b in caps}, caps)
    bal_after, cv_after = _stats({b: after["bytes"].get(b, 0.0) for b in live}, caps)
    figures = {
        "balance_before": bal_before, "balance_after": bal_after, "cv_before": cv_before, "cv_after": cv_after,
        "replica_count_balance_before": count_balance(before["count"], list(caps)),
        "replica_count_balance_after": count_balance(after["count"], live),
        "leader_balance_before": count_balance(before["leaders"], list(caps)),
        "leader_balance_after": count_balance(after["leaders"], live),
    }
    return {k: round(v, 4) for k, v in figures.items()}


def leader_bytes_in_figures(cluster: Cluster, final: Placement, drained: set[int]) -> dict[str, float]:
    """Leader bytes in (the produce rate each broker leads) max / mean before and after, as the
    balancing goals' summary reports it (1.0 when no rate is known).

    :param final: each partition's (replicas, log dirs) after the plan, in cluster order
    :param drained: brokers left out of the after-figure
    """
    before = {b: 0.0 for b in cluster.brokers}
    after = dict(before)
    for p, (reps, _) in zip(cluster.partitions, final):
        before[p.replicas[0]] += p.bytes_in_per_sec or 0.0
        if reps:
            after[reps[0]] += p.bytes_in_per_sec or 0.0
    live = [b for b in cluster.brokers if b not in drained]
    return {"leader_bytes_in_balance_before": round(count_balance(before, list(cluster.brokers)), 4),
            "leader_bytes_in_balance_after": round(count_balance(after, live), 4)}


def build_summary(cluster: Cluster, opts: PlanOptions, final: Placement, reassignment: ReassignmentPlan,
                  before: dict[str, dict], after: dict[str, dict], lower_bound: float | None,
                  warnings: list[str], assignor: str, reached: bool = True) -> dict[str, Any]:
    """The summary dict (keys defined in the module docstring).

    :param final: each partition's (replicas, log dirs) after the plan, in cluster order
    :param reassignment: the plan
    :param before: per-broker aggregates (bytes, count, leaders) before the plan
    :param after: the same after the plan
    :param lower_bound: bytes any plan reaching the goal must move (None: unknown)
    :param warnings: the goal's warnings so far
    :param assignor: the assignor's name
    :param reached: the plan reaches what the lower bound is for (else no ratio is given)
    """
    moved = movement(cluster, final)
    drained = set(opts.brokers) if opts.goal == "remove-brokers" else set()
    moves = cluster_moves(cluster, reassignment)
    # no fixed batches: the executor's window decides, and the estimate is the run's own
    seconds, stall_warnings = plan_eta(moves, opts, network_of(cluster))
    return {
        "goal": opts.goal, "assignor": assignor, "partitions_moved": len(reassignment.moves),
        "replica_movements": moved.replica_moves, "log_dir_movements": moved.log_dir_moves,
        "data_to_move_bytes": round(moved.data_bytes),
        "remote_bytes_not_copied": round(sum(m.remote_bytes for m in moves)),
        "lower_bound_bytes": None if lower_bound is None else round(lower_bound),
        "moved_over_lower_bound": moved_over_bound(moved.data_bytes, lower_bound, reached),
        "leader_movements": moved.leader_moves,
        "batches": None, "batching": "none: the executor's sliding window of KIP-435 steps",
        "balance_metric": "max broker utilisation / mean utilisation (1.0 = perfect)",
        **balance_figures(cluster, before, after, drained),
        **leader_bytes_in_figures(cluster, final, drained),
        "throttle_bytes_per_sec": opts.throttle_bytes_per_sec,
        "estimated_seconds": seconds,
        "warnings": warnings + stall_warnings,
        "brokers": broker_rows(cluster, before, after),
    }


def broker_rows(cluster: Cluster, before: dict[str, dict], after: dict[str, dict]) -> list[dict[str, Any]]:
    rows = []
    for b in sorted(cluster.brokers):
        info = cluster.brokers[b]
        cap = info.capacity_bytes
        rows.append({
            "broker": b, "rack": info.rack, "capacity_bytes": cap,
            "bytes_before": before["bytes"].get(b, 0.0), "bytes_after": after["bytes"].get(b, 0.0),
            "util_before": round(before["bytes"].get(b, 0.0) / cap, 6),
            "util_after": round(after["bytes"].get(b, 0.0) / cap, 6),
            "replicas_before": before["count"].get(b, 0), "replicas_after": after["count"].get(b, 0),
            "leaders_before": before["leaders"].get(b, 0), "leaders_after": after["leaders"].get(b, 0),
        })
    return rows
