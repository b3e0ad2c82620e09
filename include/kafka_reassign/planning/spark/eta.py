"""The plan summary's ``estimated_seconds``: the run's own estimate, fed with what the planner holds.

Both summaries (:mod:`.report` for the balancing goals, :mod:`.driver_summary` for the others)
call :func:`plan_eta`, which is :func:`kafka_reassign.planning.estimate.estimate_plan`: the
KIP-73 model the dry run, the rehearsal's comparison and the UI show (in-sync replication
counted in the throttle, the executor's KIP-435 steps in one sliding window). So a plan gets the
same estimate in its summary as in ``prepare`` on the same snapshot and throttle.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from kafka_reassign.planning.estimate import StallPoint
from kafka_reassign.planning.plan_estimate import PlannedMove, estimate_plan
from kafka_reassign.planning.plan import ReassignmentPlan
from kafka_reassign.planning.spark.assignor import PlanOptions
from kafka_reassign.planning.spark.cluster import Cluster
from kafka_reassign.planning.spark.leaders import _ints
from kafka_reassign.planning.spark.network import columns
from kafka_reassign.units import fmt_bytes

if TYPE_CHECKING:  # pandas is imported where the frames are made
    import pandas as pd

#: Stalled partitions named per warning (the rest are counted).
NAMED_STALLS = 5


def plan_eta(moves: Sequence[PlannedMove], opts: PlanOptions,
             network: Mapping[int, float]) -> tuple[float | None, list[str]]:
    """(estimated seconds rounded to 0.1, None when some move never finishes; stall warnings).

    :param moves: the plan's partition moves
    :param opts: the planner options (throttles)
    :param network: broker -> network bytes/s
    """
    # the summary reads the time only: no source-free bound (a max-flow, seconds at 3M replicas)
    estimate, stalls = estimate_plan(moves, opts.throttle_bytes_per_sec, opts.log_dir_throttle_bytes_per_sec,
                                     network, source_free=False)
    if not math.isinf(estimate.seconds):
        return round(estimate.seconds, 1), []
    # No throttle stall: a broker's network cannot carry a move's produce and in-sync traffic.
    never = sorted(b for b, secs in estimate.broker_seconds.items() if math.isinf(secs))
    return None, stall_warnings(stalls) or [
        f"some moves would never finish: produce and in-sync replication take all the network capacity "
        f"of broker(s) {never}; check network_bytes_per_sec in the snapshot"]


def stall_warnings(stalls: Sequence[StallPoint]) -> list[str]:
    """One warning per broker quota that some moves cannot get past."""
    by_quota: dict[tuple[int, str], list[StallPoint]] = {}
    for s in stalls:
        by_quota.setdefault((s.broker, s.side), []).append(s)
    out = []
    for (broker, side), points in sorted(by_quota.items()):
        names = sorted({p.name for p in points})
        more = f" and {len(names) - NAMED_STALLS} more" if len(names) > NAMED_STALLS else ""
        worst = max(points, key=lambda p: p.needed)
        out.append(f"throttle {fmt_bytes(worst.throttle)}/s is at or below the {fmt_bytes(worst.needed)}/s "
                   f"that produce and in-sync replication take of broker {broker}'s {side.replace('_', '-')} "
                   f"quota: {', '.join(names[:NAMED_STALLS])}{more} would never finish; raise the throttle")
    return out


def cluster_moves(cluster: Cluster, plan: ReassignmentPlan) -> list[PlannedMove]:
    """The plan's moves with what the snapshot says of each partition (driver-side goals)."""
    out = []
    for m in plan.moves:
        p = cluster.partitions[cluster.index[m.key]]
        offline = tuple(b for b in p.replicas if not cluster.brokers[b].alive)
        out.append(PlannedMove(topic=m.topic, partition=m.partition, current=p.replicas, target=m.replicas,
                               size_bytes=p.size_bytes, produce=p.bytes_in_per_sec, leader=p.leader,
                               offline=offline, min_isr=p.min_isr, remote_bytes=p.remote_bytes,
                               current_dirs=p.log_dirs if p.dirs_known else (), log_dirs=m.log_dirs))
    return out


def change_moves(changes: pd.DataFrame, plan: ReassignmentPlan, min_isr: Mapping[str, int]) -> list[PlannedMove]:
    """The plan's moves with the balancing goals' changed partitions.

    :param changes: pandas frame: topic, partition, orig, size_bytes, bytes_in_per_sec, leader, remote_bytes
    :param plan: the plan made of them
    :param min_isr: topic -> min.insync.replicas (1 where absent)
    """
    # Rows by partition, each move made once from its row (a million changes at 3M replicas).
    rows = {(str(r[0]), int(r[1])): r for r in zip(*columns(changes, (
        "topic", "partition", "orig", "size_bytes", "bytes_in_per_sec", "leader", "remote_bytes")))}
    out = []
    for m in plan.moves:
        _t, _p, orig, size, rate, lead, remote = rows[m.key]
        # positional (topic, partition, current, target, size_bytes, produce, leader, offline,
        # min_isr, current_dirs, log_dirs, remote_bytes): a million moves at 3M replicas
        out.append(PlannedMove(m.topic, m.partition, tuple(_ints(orig)), m.replicas, float(size), float(rate),
                               int(lead), (), min_isr.get(m.topic, 1), (), m.log_dirs, float(remote)))
    return out


def min_isr_of(topics: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Topic -> min.insync.replicas from the snapshot's topic entries (``configs``)."""
    return {str(t["name"]): max(1, int((t.get("configs") or {}).get("min.insync.replicas", 1))) for t in topics}


def network_of(cluster: Cluster) -> dict[int, float]:
    """Broker -> network bytes/s of the snapshot (its default where the snapshot does not say)."""
    return {b: info.network_bytes_per_sec for b, info in cluster.brokers.items()}
