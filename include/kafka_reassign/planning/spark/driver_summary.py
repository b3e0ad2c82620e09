"""Summary of the driver-side goals (replication-factor, rack-repair, disks, user assignors):
movement, lower bound, balance and the KIP-73 time estimate. The balancing goals' summary is
:mod:`kafka_reassign.planning.spark.report`.

Definitions (also in the README):

* ``replica_movements``: replicas created on a broker that did not hold them (each copies the
  partition once); ``log_dir_movements``: replicas moved between log dirs of one broker.
* ``data_to_move_bytes``: bytes those copies read, inter-broker plus intra-broker.
* ``lower_bound_bytes``: bytes any plan reaching the goal must move (per goal, see goals.py);
  ``moved_over_lower_bound`` = data_to_move_bytes / lower_bound_bytes.
* ``leader_movements``: partitions whose preferred leader (first replica) changes.
* ``balance`` = max broker disk utilisation / mean utilisation (bytes / capacity; mean =
  total bytes / total capacity) over the brokers that hold data after the plan (drained brokers
  are left out of ``balance_after``). 1.0 is perfect; 1.05 = the fullest broker is 5% above the
  mean. ``cv`` (coefficient of variation of utilisation) is reported beside it.
* ``estimated_seconds`` follows KIP-73 with every move in one window: it lasts as long as the
  slowest broker, and a
  broker copies ``max(bytes in, bytes out)`` of the batch at ``min(throttle, NIC) - BytesIn``,
  where BytesIn is the produce rate of the partitions it leads (throttled replication must also
  keep up with new writes). When that rate is <= 0 the move never finishes: a warning says so
  and the estimate is null.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Sequence

from kafka_reassign.planning.spark.assignor import PlanOptions
from kafka_reassign.planning.spark.cluster import Cluster

Placement = Sequence[tuple[Sequence[int], Sequence[str]]]
DEFAULT_NIC = 125_000_000.0


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


def _count_balance(values: dict[int, int] | dict[int, float]) -> float:
    if not values:
        return 1.0
    mean = sum(values.values()) / len(values)
    return (max(values.values()) / mean) if mean else 1.0


def estimate_seconds(cluster: Cluster, batches: list[list[tuple[int, tuple[int, ...], tuple[int, ...]]]],
                     options: PlanOptions, bytes_in_led: dict[int, float],
                     dir_moves: dict[int, float]) -> tuple[float | None, list[str], dict[int, float]]:
    """KIP-73 estimate over sequential batches plus intra-broker log-dir copies.

    :param bytes_in_led: produce bytes/s of the partitions each broker leads (BytesInPerSec)
    :param dir_moves: bytes each broker copies between its own log dirs
    :returns: (seconds or None when some move never finishes, warnings, effective rate per broker)
    """
    warnings: list[str] = []
    rate: dict[int, float] = {}
    for b, info in cluster.brokers.items():
        cap = min(options.throttle_bytes_per_sec or info.network_bytes_per_sec, info.network_bytes_per_sec)
        rate[b] = cap - bytes_in_led.get(b, 0.0)
    involved: set[int] = set()
    total = 0.0
    for batch in batches:
        inc: dict[int, float] = defaultdict(float)
        out: dict[int, float] = defaultdict(float)
        for pi, current, target in batch:
            p = cluster.partitions[pi]
            added = [b for b in target if b not in current]
            if not added:
                continue
            leader = p.leader if p.leader in current else current[0]
            for b in added:
                inc[b] += p.size_bytes
            out[leader] += p.size_bytes * len(added)
            involved.update(added)
            involved.add(leader)
        slow = 0.0
        for b in set(inc) | set(out):
            need = max(inc.get(b, 0.0), out.get(b, 0.0))
            if need > 0 and rate[b] > 0:
                slow = max(slow, need / rate[b])
        total += slow
    dir_rate = options.log_dir_throttle_bytes_per_sec or options.throttle_bytes_per_sec
    # log-dir copies (KIP-113) run on every broker at once, each at the log-dir throttle
    dir_time = 0.0
    for b, nbytes in dir_moves.items():
        if nbytes > 0:
            r = dir_rate or cluster.brokers[b].network_bytes_per_sec
            dir_time = max(dir_time, nbytes / r)
    total += dir_time
    never = sorted(b for b in involved if rate[b] <= 0)
    for b in never:
        thr = options.throttle_bytes_per_sec or cluster.brokers[b].network_bytes_per_sec
        warnings.append(f"throttle {thr:.0f} B/s is at or below broker {b}'s produce bytes-in "
                        f"{bytes_in_led.get(b, 0.0):.0f} B/s: its moves would never finish; "
                        "raise the throttle")
    return (None if never else total), warnings, rate


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
