"""Plan shapes for the execution-at-scale benchmark (issue 22), written apart from the family the
executor's defaults were tuned on (``benchmarks/rehearsal.py``'s ``_generated`` + ``hottest_moves``).

Every cluster: 4 racks (broker ``i`` of the id order is in rack ``i % 4``), replication factor 3
with one replica per rack on 3 of the 4 racks, chosen at random, the broker uniform inside its
rack; leader = first replica. Partition sizes are lognormal (median ``median``, sigma 1.0);
produce rates are size / 7 days times U(0.5, 1.5), far below any throttle, so nothing stalls.

* ``decommission``: every broker of rack 3 leaves; each of its replicas goes to the rack the
  partition lacks, to that rack's broker with the fewest bytes (largest partitions placed first).
* ``new-brokers``: a fifth of the brokers are new and empty; replicas of old brokers move to the
  emptiest new broker of their own rack until every new broker holds the mean replica bytes.
* ``hot``: 4 hot topics (partitions 8x larger, 20x the produce rate) placed with weight 6 on the
  first quarter of each rack's brokers; every hot replica on such a busiest broker moves to the
  emptiest other broker of its rack. Cold topics (as many partitions) stay put.

A move is one KIP-435 step: one replica added. Every generator stops at exactly ``moves`` of them.
Module name starts with ``scale_``, not ``_``: it has no ``main`` so ``make bench`` skips it.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

RACKS = 4
RF = 3
RETENTION_SECONDS = 7 * 24 * 3600
SIGMA = 1.0
PARTITIONS_PER_TOPIC = 500
SHAPES = ("decommission", "new-brokers", "hot")
HOT_TOPICS = 4
HOT_SIZE, HOT_RATE, HOT_WEIGHT = 8.0, 20.0, 6.0


@dataclass
class Cluster:
    """A generated cluster and the replica sets a plan gives some of its partitions.

    :param brokers: broker ids (rack = index % RACKS)
    :param replicas: (partitions, RF) broker ids, leader first
    :param sizes: bytes per partition
    :param rates: produce bytes/s per partition
    :param topics: topic name per partition
    :param moved: partition index -> its target replica list
    """

    brokers: list[int]
    replicas: np.ndarray
    sizes: np.ndarray
    rates: np.ndarray
    topics: list[str]
    moved: dict[int, list[int]] = field(default_factory=dict)

    def moves(self) -> int:
        """KIP-435 steps of the plan (replicas added)."""
        return sum(len(set(t) - set(self.replicas[i].tolist())) for i, t in self.moved.items())


def _rack_of(brokers: list[int]) -> dict[int, int]:
    return {b: i % RACKS for i, b in enumerate(brokers)}


def _draw(rng: np.random.Generator, n: int, median: float, rate_scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    sizes = np.maximum(1, median * rng.lognormal(0.0, SIGMA, n)).astype(np.int64)
    rates = sizes / RETENTION_SECONDS * rng.uniform(0.5, 1.5, n) * rate_scale
    return sizes, np.round(rates, 1)


def _place(rng: np.random.Generator, n: int, per_rack: list[np.ndarray], weights: list[np.ndarray] | None = None
           ) -> np.ndarray:
    """(n, RF) replicas: 3 random racks of 4, a broker of each (uniform or by ``weights``)."""
    racks = np.argsort(rng.random((n, RACKS)), axis=1)[:, :RF]
    out = np.empty((n, RF), dtype=np.int64)
    for r in range(RACKS):
        mask = racks == r
        ids = per_rack[r]
        p = None if weights is None else weights[r] / weights[r].sum()
        out[mask] = ids[rng.choice(len(ids), size=int(mask.sum()), p=p)]
    return out


def _topic_names(prefix: str, n: int, per_topic: int) -> list[str]:
    return [f"{prefix}-{i // per_topic:03d}" for i in range(n)]


def _loads(brokers: list[int], replicas: np.ndarray, sizes: np.ndarray) -> dict[int, float]:
    load = {b: 0.0 for b in brokers}
    for row, size in zip(replicas.tolist(), sizes.tolist()):
        for b in row:
            load[b] += size
    return load


def _brokers(brokers: int, seed: int) -> tuple[np.random.Generator, list[int], dict[int, int], list[np.ndarray]]:
    """The random generator, broker ids 1..N, rack per broker, and each rack's brokers."""
    ids = list(range(1, brokers + 1))
    rack = _rack_of(ids)
    return np.random.default_rng(seed), ids, rack, [np.array([b for b in ids if rack[b] == r]) for r in range(RACKS)]


def decommission(brokers: int, moves: int, median: float, seed: int) -> Cluster:
    """All brokers of rack 3 leave; ``moves`` partitions have a replica there (exactly)."""
    rng, ids, rack, per_rack = _brokers(brokers, seed)
    n = math.ceil(moves / 0.75 * 1.1) + 100
    replicas = _place(rng, n, per_rack)
    on_leaving = np.asarray(np.isin(replicas, per_rack[RACKS - 1]).any(axis=1))
    n = int(np.searchsorted(np.cumsum(on_leaving), moves) + 1)  # first n partitions hold ``moves`` of them
    replicas, on_leaving = replicas[:n], on_leaving[:n]
    sizes, rates = _draw(rng, n, median)
    cluster = Cluster(ids, replicas, sizes, rates, _topic_names("dc", n, PARTITIONS_PER_TOPIC))
    load = _loads(ids, replicas, sizes)
    heaps = {r: [(load[b], b) for b in per_rack[r].tolist()] for r in range(RACKS - 1)}
    for h in heaps.values():
        heapq.heapify(h)
    for i in sorted(np.flatnonzero(on_leaving).tolist(), key=lambda i: -int(sizes[i])):
        row = replicas[i].tolist()
        lacking = ({0, 1, 2} - {rack[b] for b in row}).pop()
        bytes_, dst = heapq.heappop(heaps[lacking])
        heapq.heappush(heaps[lacking], (bytes_ + float(sizes[i]), dst))
        cluster.moved[i] = [dst if rack[b] == RACKS - 1 else b for b in row]
    return cluster


def new_brokers(brokers: int, moves: int, median: float, seed: int) -> Cluster:
    """A fifth of ``brokers`` are new and empty; old replicas fill them to the mean, ``moves`` at most."""
    rng = np.random.default_rng(seed)
    ids = list(range(1, brokers + 1))
    rack = _rack_of(ids)
    fresh = set(ids[-(brokers // 5):])
    per_rack = [np.array([b for b in ids if rack[b] == r and b not in fresh]) for r in range(RACKS)]
    # Filling the new brokers to the mean takes about len(fresh) / brokers of all replicas.
    n = math.ceil(moves * brokers / (RF * len(fresh)))
    replicas = _place(rng, n, per_rack)
    sizes, rates = _draw(rng, n, median)
    cluster = Cluster(ids, replicas, sizes, rates, _topic_names("nb", n, PARTITIONS_PER_TOPIC))
    load = _loads(ids, replicas, sizes)
    target = sum(load.values()) / brokers
    heaps = {r: [(0.0, b) for b in ids if b in fresh and rack[b] == r] for r in range(RACKS)}
    count = 0
    for i in rng.permutation(n).tolist():
        row = replicas[i].tolist()
        for j, b in enumerate(row):
            h, size = heaps[rack[b]], float(sizes[i])
            if count >= moves or not h or load[b] - size < target or h[0][0] + size > target * 1.02:
                continue
            bytes_, dst = heapq.heappop(h)
            heapq.heappush(h, (bytes_ + size, dst))
            load[b] -= size
            cluster.moved.setdefault(i, list(row))[j] = dst
            count += 1
    return cluster


def hot_topics(brokers: int, moves: int, median: float, seed: int) -> Cluster:
    """Hot topics crowd the first quarter of each rack; ``moves`` of their replicas move off it."""
    rng, ids, rack, per_rack = _brokers(brokers, seed)
    busiest = {b for r in range(RACKS) for b in per_rack[r][: max(1, len(per_rack[r]) // 4)].tolist()}
    weights = [np.where(np.isin(per_rack[r], list(busiest)), HOT_WEIGHT, 1.0) for r in range(RACKS)]
    hot_n = math.ceil(moves / (RF * 0.6)) + 100
    hot = _place(rng, hot_n, per_rack, weights)
    on_busy = np.isin(hot, list(busiest)).sum(axis=1)
    hot_n = int(np.searchsorted(np.cumsum(on_busy), moves) + 1)
    hot, on_busy = hot[:hot_n], on_busy[:hot_n]
    excess = int(on_busy.sum()) - moves  # the last hot partition may hold more than are left to move
    hot_sizes, hot_rates = _draw(rng, hot_n, median * HOT_SIZE, HOT_RATE)
    cold = _place(rng, hot_n, per_rack)
    cold_sizes, cold_rates = _draw(rng, hot_n, median)
    per_topic = math.ceil(hot_n / HOT_TOPICS)
    cluster = Cluster(ids, np.vstack([hot, cold]), np.concatenate([hot_sizes, cold_sizes]),
                      np.concatenate([hot_rates, cold_rates]),
                      _topic_names("hot", hot_n, per_topic) + _topic_names("cold", hot_n, PARTITIONS_PER_TOPIC))
    load = _loads(ids, cluster.replicas, cluster.sizes)
    heaps = {r: [(load[b], b) for b in per_rack[r].tolist() if b not in busiest] for r in range(RACKS)}
    for h in heaps.values():
        heapq.heapify(h)
    for i in sorted(range(hot_n), key=lambda i: -int(hot_sizes[i])):
        row = hot[i].tolist()
        busy = [j for j, b in enumerate(row) if b in busiest]
        if i == hot_n - 1 and excess:
            busy = busy[:len(busy) - excess]
        for j in busy:
            bytes_, dst = heapq.heappop(heaps[rack[row[j]]])
            heapq.heappush(heaps[rack[row[j]]], (bytes_ + float(hot_sizes[i]), dst))
            cluster.moved.setdefault(i, list(row))[j] = dst
    return cluster


GENERATORS = {"decommission": decommission, "new-brokers": new_brokers, "hot": hot_topics}


def snapshot(cluster: Cluster) -> dict[str, Any]:
    """The cluster as a simulator snapshot (docs/FORMATS.md, version 1)."""
    rack = _rack_of(cluster.brokers)
    load = _loads(cluster.brokers, cluster.replicas, cluster.sizes)
    capacity = float(10 ** 9 * math.ceil(max(load.values()) * 3 / 10 ** 9))
    topics: dict[str, list[dict[str, Any]]] = {}
    for i, (row, size, rate) in enumerate(zip(cluster.replicas.tolist(), cluster.sizes.tolist(),
                                              cluster.rates.tolist())):
        parts = topics.setdefault(cluster.topics[i], [])
        parts.append({"partition": len(parts), "replicas": row, "leader": row[0], "size_bytes": int(size),
                      "bytes_in_per_sec": float(rate), "log_dirs": ["/data"] * RF})
    return {"version": 1, "cluster_id": "scale-bench",
            "brokers": [{"id": b, "rack": f"rack-{rack[b]}", "log_dirs": [{"path": "/data", "capacity_bytes": capacity}]}
                        for b in cluster.brokers],
            "topics": [{"name": name, "configs": {"min.insync.replicas": "2"}, "partitions": parts}
                       for name, parts in topics.items()]}


def plan(cluster: Cluster) -> dict[str, Any]:
    """The plan (reassignment JSON) of the cluster's moved partitions."""
    index: dict[str, int] = {}
    position = []
    for name in cluster.topics:
        position.append(index.get(name, 0))
        index[name] = position[-1] + 1
    return {"version": 1, "partitions": [{"topic": cluster.topics[i], "partition": position[i], "replicas": target}
                                         for i, target in sorted(cluster.moved.items())]}
