"""Cluster shapes for the planner benchmark, written straight to snapshot-lines files.

Every shape: 4 racks, replication factor 3 (one replica per rack, 3 of the 4 racks), lognormal
topic sizes (partitions of a topic vary +-20% around the topic's size), and skew inside each
rack: broker ``k`` of a rack (by id) is chosen with weight ``1 / (k + 1) ** SKEW``, so the
lower-numbered brokers of every rack are the fullest. On top of that:

* ``skew``: only that;
* ``new-brokers``: 30% more brokers, empty (spread over the racks);
* ``remove``: 10% of the brokers (spread over the racks) are drained (remove-brokers goal);
* ``hetero``: broker capacities of 1x, 2x and 4x a base, the same mix in every rack
  (utilisation = bytes / capacity);
* ``hot``: 5 hot topics, 15x the typical size, placed on the two favoured brokers of each rack.
* ``hot-traffic`` (not tuned on; ``TRAFFIC_SHAPES``): sizes as ``skew``, but 5% of the topics
  take 50x the produce rate of the rest (short retention: busy, not big), placed on the two
  favoured brokers of each rack. Disk balance alone does not even out network in there.

Produce rates (``bytes_in_per_sec``) are a partition's size over a week, except in ``hot-traffic``.

Capacities are set so that the mean utilisation is at most 45% and no broker starts above 80%. Numpy draws everything in bulk;
the file is written with plain string formatting (a 1.5M-replica file takes a few seconds).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SHAPES = ("skew", "new-brokers", "remove", "hetero", "hot")
#: Shapes whose network load is not proportional to their bytes (the planner was not tuned on them).
TRAFFIC_SHAPES = ("hot-traffic",)
WEEK_SECONDS = 604800
RACKS = 4
RF = 3
SKEW = 0.6
MEAN_UTIL = 0.45


@dataclass
class Shape:
    """A generated cluster: the file, the goal and options to plan it with, and its arrays."""

    path: Path
    goal: str
    options: dict[str, Any]
    brokers: np.ndarray          # broker ids
    rack: np.ndarray             # rack index per broker (same order as ``brokers``)
    capacity: np.ndarray         # bytes per broker
    replicas: np.ndarray         # (partitions, RF) broker ids, leader first
    sizes: np.ndarray            # bytes per partition
    topic_of: np.ndarray         # topic index per partition
    part_of: np.ndarray          # partition index per partition
    rates: np.ndarray | None = None  # produce bytes/s per partition (None: size over a week)

    def produce_rates(self) -> np.ndarray:
        return self.rates if self.rates is not None else self.sizes / WEEK_SECONDS


def _place(rng: np.random.Generator, n_parts: int, old_ids: np.ndarray, hot_mask: np.ndarray) -> np.ndarray:
    per_rack = [old_ids[old_ids % RACKS == r] for r in range(RACKS)]
    racks = np.argsort(rng.random((n_parts, RACKS)), axis=1)[:, :RF]
    n = min(len(x) for x in per_rack)
    w = 1.0 / (np.arange(n) + 1.0) ** SKEW
    pick = rng.choice(n, size=(n_parts, RF), p=w / w.sum())
    pick[hot_mask] = rng.integers(0, 2, size=(int(hot_mask.sum()), RF))
    table = np.stack([x[:n] for x in per_rack])          # (racks, n) broker ids
    return table[racks, pick]


def generate(shape: str, topics: int, partitions: int, brokers: int, out: Path,
             seed: int = 42) -> Shape:
    """Write one shape's snapshot-lines file.

    :param brokers: brokers holding data (new-brokers adds 30% empty ones on top)
    """
    rng = np.random.default_rng(seed)
    old_ids = np.arange(brokers)
    n_new = int(round(brokers * 0.3)) if shape == "new-brokers" else 0
    ids = np.arange(brokers + n_new)
    topic_size = rng.lognormal(mean=np.log(2e8), sigma=1.2, size=topics)
    hot_topics = rng.choice(topics, size=5, replace=False) if shape == "hot" else np.array([], int)
    topic_size[hot_topics] = np.percentile(topic_size, 90) * 15
    busy = rng.choice(topics, size=max(1, topics // 20), replace=False) if shape == "hot-traffic" \
        else np.array([], int)
    topic_of = np.repeat(np.arange(topics), partitions)
    part_of = np.tile(np.arange(partitions), topics)
    sizes = np.round(topic_size[topic_of] * rng.uniform(0.8, 1.2, size=len(topic_of)))
    favoured = np.isin(topic_of, hot_topics) | np.isin(topic_of, busy)
    replicas = _place(rng, len(topic_of), old_ids, favoured)
    rates = sizes / WEEK_SECONDS * np.where(np.isin(topic_of, busy), 50.0, 1.0) if len(busy) else None
    load = np.bincount(replicas.ravel(), weights=np.repeat(sizes, RF), minlength=len(ids))
    # every rack gets the same mix of disk sizes (brokers are bought rack by rack)
    weight = np.array([1.0, 2.0, 4.0])[(ids // RACKS) % 3] if shape == "hetero" else np.ones(len(ids))
    base = max(load.sum() / (MEAN_UTIL * weight.sum()), float((load / weight).max()) / 0.8)
    capacity = np.round(weight * base)  # no broker starts above 80% full
    goal, options = "rebalance", {}
    if shape == "remove":
        drained = ids[::9][: max(1, brokers // 10)]  # step 9: spread over the 4 racks
        goal, options = "remove-brokers", {"brokers": [int(b) for b in drained]}
    shape_obj = Shape(out, goal, options, ids, ids % RACKS, capacity, replicas, sizes, topic_of, part_of, rates)
    _write(shape_obj)
    return shape_obj


def _write(s: Shape) -> None:
    header = {"snapshot_lines": 1, "version": 1,
              "brokers": [{"id": int(b), "rack": f"rack-{int(r)}",
                           "log_dirs": [{"path": "/var/kafka", "capacity_bytes": float(c)}]}
                          for b, r, c in zip(s.brokers, s.rack, s.capacity)],
              "topics": [{"name": f"topic-{t}", "configs": {"min.insync.replicas": "2"}}
                         for t in range(int(s.topic_of.max()) + 1)]}
    with open(s.path, "w", encoding="utf-8") as f:
        f.write(json.dumps(header, separators=(",", ":")) + "\n")
        rows = zip(s.topic_of.tolist(), s.part_of.tolist(), s.replicas.tolist(), s.sizes.tolist(),
                   s.produce_rates().tolist())
        f.writelines(f'{{"topic":"topic-{t}","partition":{p},"replicas":[{r[0]},{r[1]},{r[2]}],'
                     f'"size_bytes":{int(z)},"bytes_in_per_sec":{w:.1f}}}\n'
                     for t, p, r, z, w in rows)


def round_robin(s: Shape, seed: int = 7) -> np.ndarray:
    """Replicas as Kafka's ``--generate`` proposes them: brokers in rack-alternating order, a
    random start per topic, each partition's replicas on consecutive brokers of that order (so on
    distinct racks); it ignores sizes and where replicas are now. Drained brokers are left out."""
    rng = np.random.default_rng(seed)
    keep = s.brokers[~np.isin(s.brokers, s.options.get("brokers", []))]
    per_rack = [keep[s.rack[keep] == r] for r in range(RACKS)]
    order = np.array([x[i] for i in range(max(len(x) for x in per_rack)) for x in per_rack if i < len(x)])
    n = len(order)
    start = rng.integers(0, n, size=int(s.topic_of.max()) + 1)
    first = (start[s.topic_of] + s.part_of) % n
    return order[(first[:, None] + np.arange(RF)[None, :]) % n]


def evaluate(s: Shape, replicas: np.ndarray) -> dict[str, float]:
    """Data moved, disk balance (max / mean utilisation) and leader balance of an assignment."""
    live = ~np.isin(s.brokers, s.options.get("brokers", []))
    load = np.bincount(replicas.ravel(), weights=np.repeat(s.sizes, RF), minlength=len(s.brokers))
    util = load / s.capacity
    mean = load[live].sum() / s.capacity[live].sum()
    leaders = np.bincount(replicas[:, 0], minlength=len(s.brokers))[live]
    moved = sum(float((s.sizes * (~(replicas[:, [j]] == s.replicas).any(axis=1))).sum())
                for j in range(RF))
    return {"moved": moved, "balance": float(util[live].max() / mean),
            "leader_balance": float(leaders.max() / leaders.mean())}
