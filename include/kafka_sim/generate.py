"""Generate realistic cluster snapshots (the simulator's scenarios, the planner's input).

A generated cluster has brokers spread over racks, each with one or more log dirs;
topics whose partition sizes follow a lognormal distribution (a few big partitions,
many small ones, as in real clusters) and whose produce rates follow the sizes
(roughly size / retention). Replicas are placed rack-aware. With ``skew`` 0 the
placement is balanced the way Kafka's own assignment is (rack-alternating round
robin); with ``skew`` > 0 a "hot" third of the brokers receives replicas and
leaders more often, so a rebalance is worthwhile. Same arguments and seed, same
snapshot.
"""
from __future__ import annotations

import math
import random
import string
import uuid
from dataclasses import dataclass

_TOPIC_WORDS = ["orders", "payments", "clicks", "sessions", "inventory", "shipments", "audit",
                "metrics", "logs", "users", "carts", "search", "ads", "events", "billing",
                "notifications", "profiles", "recommendations", "fraud", "telemetry"]


@dataclass(frozen=True)
class GenerateOptions:
    """Inputs of :func:`generate_snapshot`.

    :param brokers: number of brokers (ids 1..N)
    :param racks: number of racks (brokers spread round-robin)
    :param topics: number of topics
    :param partitions: partitions per topic
    :param replication_factor: replicas per partition
    :param skew: 0 = balanced; >0 concentrates replicas/leaders on a hot third of the brokers
    :param seed: random seed (deterministic output)
    :param log_dirs: log dirs per broker
    :param median_partition_bytes: median partition size (lognormal)
    :param size_sigma: lognormal sigma of partition sizes
    :param retention_seconds: retention the produce rates are derived from
    :param disk_fill: target average disk usage used to size log dirs (0..1)
    """

    brokers: int = 6
    racks: int = 3
    topics: int = 4
    partitions: int = 8
    replication_factor: int = 3
    skew: float = 0.0
    seed: int = 0
    log_dirs: int = 1
    median_partition_bytes: float = 1e9
    size_sigma: float = 1.0
    retention_seconds: float = 7 * 24 * 3600
    disk_fill: float = 0.5

    def validate(self) -> None:
        """Raise ValueError naming the first bad option."""
        rules = [
            (self.brokers >= 1, "brokers must be >= 1"),
            (1 <= self.racks <= self.brokers, "racks must be between 1 and the number of brokers"),
            (self.topics >= 0, "topics must be >= 0"),
            (self.partitions >= 1, "partitions must be >= 1"),
            (1 <= self.replication_factor <= self.brokers,
             "replication-factor must be between 1 and the number of brokers"),
            (self.skew >= 0, "skew must be >= 0"),
            (self.log_dirs >= 1, "log-dirs must be >= 1"),
            (self.median_partition_bytes > 0 and self.size_sigma >= 0,
             "partition size parameters must be positive"),
            (0 < self.disk_fill <= 1, "disk-fill must be in (0, 1]"),
        ]
        for ok, message in rules:
            if not ok:
                raise ValueError(message)


def _rack_name(i: int) -> str:
    # rack-a, rack-b, ... then rack-aa style for many racks
    letters = string.ascii_lowercase
    name = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        name = letters[r] + name
    return f"rack-{name}"


def _topic_names(n: int, rng: random.Random) -> list[str]:
    words = list(_TOPIC_WORDS)
    rng.shuffle(words)
    names = []
    for i in range(n):
        word = words[i % len(words)]
        names.append(word if i < len(words) else f"{word}-{i // len(words)}")
    return names


def _rack_alternating(broker_ids: list[int], rack_of: dict[int, str]) -> list[int]:
    """Kafka's rack-alternating broker order: one broker from each rack in turn."""
    by_rack: dict[str, list[int]] = {}
    for b in broker_ids:
        by_rack.setdefault(rack_of[b], []).append(b)
    racks = sorted(by_rack)
    out: list[int] = []
    i = 0
    while len(out) < len(broker_ids):
        for r in racks:
            if i < len(by_rack[r]):
                out.append(by_rack[r][i])
        i += 1
    return out


def _balanced_replicas(order: list[int], rack_of: dict[int, str], n_parts: int, rf: int,
                       rng: random.Random) -> list[list[int]]:
    """Kafka-like assignment: round robin start, shifted followers, one replica per rack."""
    n = len(order)
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out = []
    for p in range(n_parts):
        if p > 0 and (p + start) % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [order[first]]
        racks = {rack_of[order[first]]}
        j = 0
        distinct_racks = len(set(rack_of.values()))
        while len(replicas) < rf:
            cand = order[(first + 1 + (shift + j) % (n - 1)) % n] if n > 1 else order[0]
            j += 1
            if cand in replicas:
                if j > 4 * n:
                    break
                continue
            if rack_of[cand] in racks and len(racks) < distinct_racks and j <= 2 * n:
                continue
            replicas.append(cand)
            racks.add(rack_of[cand])
        out.append(replicas)
    return out


def _skewed_replicas(broker_ids: list[int], rack_of: dict[int, str], weights: dict[int, float],
                     n_parts: int, rf: int, rng: random.Random) -> list[list[int]]:
    """Weighted choice per replica, preferring racks not used yet by the partition."""
    out = []
    distinct_racks = len(set(rack_of.values()))
    for _ in range(n_parts):
        replicas: list[int] = []
        used_racks: set[str] = set()
        while len(replicas) < rf:
            cands = [b for b in broker_ids if b not in replicas
                     and (rack_of[b] not in used_racks or len(used_racks) >= distinct_racks)]
            if not cands:
                cands = [b for b in broker_ids if b not in replicas]
            pick = rng.choices(cands, weights=[weights[b] for b in cands])[0]
            replicas.append(pick)
            used_racks.add(rack_of[pick])
        out.append(replicas)
    return out


def generate_snapshot(opts: GenerateOptions) -> dict:
    """Build a snapshot dict (docs/FORMATS.md, version 1).

    :param opts: generation options (validated here)
    """
    opts.validate()
    rng = random.Random(opts.seed)
    broker_ids = list(range(1, opts.brokers + 1))
    rack_of = {b: _rack_name((b - 1) % opts.racks) for b in broker_ids}
    hot = set(broker_ids[: max(1, math.ceil(opts.brokers / 3))]) if opts.skew > 0 else set()
    weights = {b: (1.0 + 3.0 * opts.skew if b in hot else 1.0) for b in broker_ids}
    order = _rack_alternating(broker_ids, rack_of)

    topics = []
    used: dict[tuple[int, int], float] = {(b, d): 0.0 for b in broker_ids for d in range(opts.log_dirs)}
    for name in _topic_names(opts.topics, rng):
        if opts.skew > 0:
            assignment = _skewed_replicas(broker_ids, rack_of, weights, opts.partitions,
                                          opts.replication_factor, rng)
        else:
            assignment = _balanced_replicas(order, rack_of, opts.partitions,
                                            opts.replication_factor, rng)
        # Per-topic scale: some topics are much busier than others.
        topic_scale = rng.lognormvariate(0.0, 0.5)
        parts = []
        for p, replicas in enumerate(assignment):
            size = int(opts.median_partition_bytes * topic_scale * rng.lognormvariate(0.0, opts.size_sigma))
            if opts.skew > 0 and replicas[0] in hot:
                # Hot leaders also carry the bigger, busier partitions.
                size = int(size * (1.0 + opts.skew))
            rate = size / opts.retention_seconds * rng.uniform(0.5, 1.5)
            dirs = []
            for b in replicas:
                d = min(range(opts.log_dirs), key=lambda i, b=b: (used[(b, i)], i))
                used[(b, d)] += size
                dirs.append(f"/var/lib/kafka/data-{d}")
            parts.append({"partition": p, "replicas": replicas, "leader": replicas[0],
                          "size_bytes": size, "bytes_in_per_sec": round(rate, 1), "log_dirs": dirs})
        configs = {"min.insync.replicas": str(min(2, opts.replication_factor - 1) or 1),
                   "retention.ms": str(int(opts.retention_seconds * 1000))}
        topics.append({"name": name, "configs": configs, "partitions": parts})

    # Size disks so the average broker sits at disk_fill; the hottest may be fuller.
    per_dir = max(used.values()) if used else 0.0
    avg_dir = sum(used.values()) / len(used) if used else 0.0
    capacity = max(avg_dir / opts.disk_fill, per_dir / 0.95, 1e9)
    capacity = float(10 ** 9 * math.ceil(capacity / 10 ** 9))
    brokers = [{"id": b, "rack": rack_of[b],
                "log_dirs": [{"path": f"/var/lib/kafka/data-{d}", "capacity_bytes": capacity}
                             for d in range(opts.log_dirs)]} for b in broker_ids]
    cluster_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    return {"version": 1, "cluster_id": cluster_id, "brokers": brokers, "topics": topics}


def broker_load(snapshot: dict) -> dict[int, dict[str, float]]:
    """Replica bytes, replica count and leader count per broker (to show the skew).

    :param snapshot: snapshot dict
    """
    load = {b["id"]: {"bytes": 0.0, "replicas": 0, "leaders": 0} for b in snapshot["brokers"]}
    for t in snapshot["topics"]:
        for p in t["partitions"]:
            for b in p["replicas"]:
                load[b]["bytes"] += p["size_bytes"]
                load[b]["replicas"] += 1
            load[p["leader"]]["leaders"] += 1
    return load
