"""Small explicit snapshots and simulator read-backs for tests (pytest puts tests/ on sys.path)."""
from __future__ import annotations

from typing import Any


def make_snapshot(brokers: int = 4, racks: int = 2, topics: dict[str, dict[str, Any]] | None = None,
                  dirs_per_broker: int = 2, capacity_bytes: float = 1e12,
                  network_bytes_per_sec: float | None = None) -> dict:
    """A small explicit snapshot; each topic spec may give partitions, rf, size_bytes, configs.

    :param brokers: broker count (ids 1..N)
    :param racks: rack count (round robin)
    :param topics: name -> {"partitions": n, "rf": r, "size_bytes": s, "bytes_in_per_sec": x,
                    "configs": {...}, "replicas": [[...], ...]}
    :param dirs_per_broker: log dirs per broker
    :param capacity_bytes: capacity of each log dir
    :param network_bytes_per_sec: optional per-broker network capacity
    """
    if topics is None:
        topics = {"orders": {"partitions": 3, "rf": 3, "size_bytes": 10_000_000},
                  "clicks": {"partitions": 2, "rf": 2, "size_bytes": 5_000_000}}
    ids = list(range(1, brokers + 1))
    out_brokers = []
    for b in ids:
        entry: dict[str, Any] = {
            "id": b, "rack": f"rack-{(b - 1) % racks}",
            "log_dirs": [{"path": f"/data/d{d}", "capacity_bytes": capacity_bytes}
                         for d in range(dirs_per_broker)]}
        if network_bytes_per_sec is not None:
            entry["network_bytes_per_sec"] = network_bytes_per_sec
        out_brokers.append(entry)
    out_topics = []
    for name, spec in topics.items():
        n = spec.get("partitions", 1)
        rf = spec.get("rf", 3)
        explicit = spec.get("replicas")
        parts = []
        for p in range(n):
            replicas = list(explicit[p]) if explicit else [ids[(p + i) % brokers] for i in range(rf)]
            parts.append({"partition": p, "replicas": replicas, "leader": replicas[0],
                          "size_bytes": spec.get("size_bytes", 1_000_000),
                          "bytes_in_per_sec": spec.get("bytes_in_per_sec", 0),
                          "log_dirs": ["/data/d0"] * len(replicas)})
        out_topics.append({"name": name, "configs": dict(spec.get("configs", {})),
                           "partitions": parts})
    return {"version": 1, "brokers": out_brokers, "topics": out_topics}


def dynamic_configs(cluster: Any) -> dict[str, dict[str, str]]:
    """Every dynamic broker and topic config of a simulated cluster, for before/after checks."""
    snap = cluster.snapshot()
    out = {f"broker {b['id']}": dict(cluster.broker_configs(b["id"])) for b in snap["brokers"]}
    out.update({f"topic {t['name']}": dict(cluster.topic_configs(t["name"])) for t in snap["topics"]})
    return out
