"""ISR shrink/expand and min.insync.replicas as Kafka clients see them, over real TCP.

A follower on a link too slow for its partition leaves the ISR after
replica.lag.time.max.ms (Partition.getOutOfSyncReplicas, ReplicaManager's isr-expiration
task) and rejoins once caught up (Partition.maybeExpandIsr); the partition is
under-replicated in Metadata meanwhile, and an acks=all producer gets NOT_ENOUGH_REPLICAS
(Partition.appendRecordsToLeader) when the ISR is below min.insync.replicas.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import pytest

pytest.importorskip("kafka")

from kafka import KafkaAdminClient, KafkaProducer  # noqa: E402
from kafka.errors import NotEnoughReplicasError  # noqa: E402

MB = 1_000_000


def _snapshot(snapshot_factory: Callable[..., dict], min_isr: str) -> dict:
    snap = snapshot_factory(brokers=3, racks=3, topics={
        "hot": {"partitions": 1, "rf": 3, "size_bytes": 50 * MB, "bytes_in_per_sec": 2 * MB,
                "configs": {"min.insync.replicas": min_isr}, "replicas": [[1, 2, 3]]}})
    for b in snap["brokers"]:
        b.setdefault("configs", {})["replica.lag.time.max.ms"] = "4000"
    return snap


def _isr(admin: KafkaAdminClient) -> tuple[list[int], list[int]]:
    (topic,) = admin.describe_topics(["hot"])
    (part,) = topic["partitions"]
    return sorted(part["replica_nodes"]), sorted(part["isr_nodes"])


def _wait(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def test_slow_follower_leaves_isr_and_metadata_shows_under_replicated(sim_cluster: Any,
                                                                      snapshot_factory: Any) -> None:
    cluster = sim_cluster(_snapshot(snapshot_factory, "1"), time_scale=4.0)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        assert _isr(admin) == ([1, 2, 3], [1, 2, 3])
        cluster.set_network(3, 1 * MB)  # broker 3 can fetch 1 of the 2 MB/s written
        start = cluster.sim_time()
        _wait(lambda: _isr(admin) == ([1, 2, 3], [1, 2]))
        # out after replica.lag.time.max.ms, checked every half of it: within 4-6 s (+ polling)
        assert 4.0 <= cluster.sim_time() - start <= 6.0 + 1.0
        cluster.set_network(3, 125 * MB)
        _wait(lambda: _isr(admin) == ([1, 2, 3], [1, 2, 3]))
    finally:
        admin.close()


def test_acks_all_producer_gets_not_enough_replicas_below_min_isr(sim_cluster: Any,
                                                                   snapshot_factory: Any) -> None:
    cluster = sim_cluster(_snapshot(snapshot_factory, "3"), time_scale=4.0)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", retries=0,
                             request_timeout_ms=5000)
    try:
        producer.send("hot", b"while in sync").get(timeout=10)  # ISR 3 >= min.insync.replicas 3
        cluster.set_network(3, 1 * MB)
        _wait(lambda: _isr(admin)[1] == [1, 2])
        with pytest.raises(NotEnoughReplicasError):
            producer.send("hot", b"below min isr").get(timeout=10)
        cluster.set_network(3, 125 * MB)
        _wait(lambda: _isr(admin)[1] == [1, 2, 3])
        producer.send("hot", b"back in sync").get(timeout=10)
    finally:
        producer.close()
        admin.close()
