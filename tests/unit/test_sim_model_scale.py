"""ClusterModel cost at scale: ticks must stay cheap with 100 brokers and many partitions.

The full 100-broker / 100k-partition figures print with ``-s`` (marked slow); the fast test
uses 20k partitions and generous bounds so a loaded CI machine does not flake.
"""
from __future__ import annotations

import random
import time

import pytest

from kafka_sim.model import ClusterModel


def big_snapshot(brokers: int, topics: int, partitions: int, seed: int = 1) -> dict:
    rng = random.Random(seed)
    bs = [{"id": i, "rack": f"r{i % 5}", "log_dirs": [{"path": "/d1", "capacity_bytes": 4e12},
                                                       {"path": "/d2", "capacity_bytes": 4e12}]}
          for i in range(1, brokers + 1)]
    ts = []
    for t in range(topics):
        parts = []
        for p in range(partitions):
            r = rng.sample(range(1, brokers + 1), 3)
            parts.append({"partition": p, "replicas": r, "leader": r[0], "size_bytes": rng.lognormvariate(20, 1.5),
                          "bytes_in_per_sec": rng.random() * 50_000})
        ts.append({"name": f"topic{t}", "configs": {}, "partitions": parts})
    return {"version": 1, "brokers": bs, "topics": ts}


def measure(m: ClusterModel, moves: int) -> dict[str, float]:
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    for _ in range(200):
        m.advance_by(0.01)
    out["idle_tick_ms"] = (time.perf_counter() - t0) / 200 * 1e3
    items = []
    for topic in list(m.topics.values()):
        for p in topic.partitions:
            if len(items) == moves:
                break
            spare = [b for b in m.brokers if b not in p.replicas]
            items.append((p.topic, p.index, [random.Random(p.index).choice(spare)] + p.replicas[1:]))
    t0 = time.perf_counter()
    res = m.alter_reassignments(items)
    out["alter_ms"] = (time.perf_counter() - t0) * 1e3
    assert all(code == 0 for *_x, code, _msg in res)
    m.incremental_alter_configs(4, "", [("leader.replication.throttled.rate", 0, "50000000"),
                                        ("follower.replication.throttled.rate", 0, "50000000")])
    m.advance_by(0.01)
    t0 = time.perf_counter()
    for _ in range(100):
        m.advance_by(0.01)
    out["moving_tick_ms"] = (time.perf_counter() - t0) / 100 * 1e3
    t0 = time.perf_counter()
    m.describe_log_dirs(1)
    out["describe_log_dirs_ms"] = (time.perf_counter() - t0) * 1e3
    return out


def test_ticks_stay_cheap_with_20k_partitions():
    m = ClusterModel(big_snapshot(100, 40, 500), time_scale=0)
    figures = measure(m, 500)
    print(figures)
    # an idle tick touches no partition; a tick with 500 moves only integrates bytes
    assert figures["idle_tick_ms"] < 1.0
    assert figures["moving_tick_ms"] < 10.0
    assert 400 < len(m.list_reassignments()) <= 500  # the smallest partitions already finished


@pytest.mark.slow
def test_100_brokers_100k_partitions():
    t0 = time.perf_counter()
    m = ClusterModel(big_snapshot(100, 200, 500), time_scale=0)
    build = time.perf_counter() - t0
    figures = measure(m, 1000)
    t0 = time.perf_counter()
    snap = m.snapshot()
    figures["snapshot_ms"] = (time.perf_counter() - t0) * 1e3
    figures["build_s"] = build
    print({k: round(v, 3) for k, v in figures.items()})
    assert sum(len(t["partitions"]) for t in snap["topics"]) == 100_000
    assert build < 30 and figures["moving_tick_ms"] < 20.0
