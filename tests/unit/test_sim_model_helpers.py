"""Helpers for the ClusterModel unit tests: snapshots, record batches, waiting in manual time."""
from __future__ import annotations

from typing import Any, Callable

from kafka_sim.model import ClusterModel

GB = 1_000_000_000
MB = 1_000_000


def snapshot(brokers: int = 6, racks: int = 3, dirs: int = 2, topics: list[dict[str, Any]] | None = None,
             network: float | None = None, broker_configs: dict[int, dict[str, str]] | None = None) -> dict:
    """A snapshot with brokers 1..N over racks r0.., two dirs /d1 /d2 each.

    :param brokers: broker count
    :param racks: rack count (round robin)
    :param dirs: log dirs per broker
    :param topics: topic entries in snapshot format
    :param network: network_bytes_per_sec of every broker
    :param broker_configs: static configs per broker id
    """
    out = []
    for i in range(1, brokers + 1):
        b: dict[str, Any] = {"id": i, "rack": f"r{(i - 1) % racks}",
                             "log_dirs": [{"path": f"/d{k}", "capacity_bytes": 1e12} for k in range(1, dirs + 1)]}
        if network is not None:
            b["network_bytes_per_sec"] = network
        if broker_configs and i in broker_configs:
            b["configs"] = broker_configs[i]
        out.append(b)
    return {"version": 1, "brokers": out, "topics": topics or []}


def topic(name: str, replicas: list[list[int]], size: float = GB, bytes_in: float = 0.0,
          configs: dict[str, str] | None = None) -> dict:
    """A topic entry whose partition i has replicas[i] (leader first).

    :param name: topic name
    :param replicas: replica list per partition
    :param size: size_bytes of every partition
    :param bytes_in: bytes_in_per_sec of every partition
    :param configs: topic configs
    """
    return {"name": name, "configs": configs or {},
            "partitions": [{"partition": i, "replicas": r, "leader": r[0], "size_bytes": size,
                            "bytes_in_per_sec": bytes_in} for i, r in enumerate(replicas)]}


def manual(snap: dict) -> ClusterModel:
    """A model in manual time (time_scale=0)."""
    return ClusterModel(snap, time_scale=0)


def run_until(model: ClusterModel, cond: Callable[[], bool], step: float = 0.05, limit: float = 10_000.0) -> float:
    """Advance in small steps until ``cond()``; return the simulated time it became true.

    :param model: a manual-time model
    :param cond: condition checked after each step
    :param step: simulated seconds per step
    :param limit: give up (AssertionError) after this much simulated time
    """
    start = model.sim_time()
    while not cond():
        if model.sim_time() - start > limit:
            raise AssertionError(f"condition not met within {limit} simulated seconds")
        model.advance_by(step)
    return model.sim_time()


def done(model: ClusterModel, t: str, p: int) -> Callable[[], bool]:
    """Condition: no reassignment in flight for t-p."""
    return lambda: not model.partition_state(t, p)["adding"] and not model.partition_state(t, p)["removing"]


def batch(values: list[bytes], ts: int = 1_000) -> bytes:
    """A real RecordBatch v2 (kafka-python's builder) holding ``values``.

    :param values: record values
    :param ts: timestamp of the first record (ms)
    """
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=ts + i, key=None, value=v, headers=[])
    return bytes(b.build())


def decode(records: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in a fetch response's record bytes."""
    from kafka.record.memory_records import MemoryRecords

    out = []
    mr = MemoryRecords(records)
    while True:
        b = mr.next_batch()
        if b is None:
            break
        for rec in b:
            out.append((rec.offset, rec.value))
    return out
