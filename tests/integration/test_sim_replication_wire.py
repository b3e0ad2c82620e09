"""Replication physics observed through the wire, as an operator's tools would see it.

Durations are measured in simulated seconds (``cluster.sim_time()``) while the
clients poll over TCP; time scaling keeps each test at a few wall seconds.
"""
from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest

pytest.importorskip("kafka")
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import ConfigResource, ConfigResourceType  # noqa: E402
from kafka.errors import KafkaConnectionError  # noqa: E402

pytestmark = pytest.mark.timeout(180)

MB = 1_000_000


def _admin(cluster: Any) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10000)


def _move_duration(cluster: Any, admin: KafkaAdminClient, tp: TopicPartition, target: list[int],
                   timeout: float = 60.0) -> float:
    """Start a reassignment and poll ListPartitionReassignments until it is gone."""
    start = cluster.sim_time()
    res = admin.alter_partition_reassignments({tp: target})
    assert res == {tp: None}
    deadline = time.monotonic() + timeout
    while admin.list_partition_reassignments([tp]):
        assert time.monotonic() < deadline, "reassignment did not complete"
        time.sleep(0.01)
    return cluster.sim_time() - start


def test_throttled_move_takes_bytes_over_rate(sim_cluster: Any, snapshot_factory: Any) -> None:
    size = 40 * MB
    rate = 10 * MB
    snap = snapshot_factory(brokers=4, topics={"big": {"partitions": 1, "rf": 3, "size_bytes": size}})
    cluster = sim_cluster(snap, time_scale=2.0)
    admin = _admin(cluster)
    try:
        # KIP-73 throttle as kafka-reassign-partitions.sh sets it for moving big-0 from 1 to 4.
        admin.alter_configs([
            ConfigResource(ConfigResourceType.BROKER, str(b), {
                "leader.replication.throttled.rate": str(rate),
                "follower.replication.throttled.rate": str(rate)}) for b in (1, 2, 3, 4)
        ] + [ConfigResource(ConfigResourceType.TOPIC, "big", {
            "leader.replication.throttled.replicas": "0:1,0:2,0:3",
            "follower.replication.throttled.replicas": "0:4"})],
            raise_on_unknown=False)  # unset rates are absent from DescribeConfigs, as in Kafka
        took = _move_duration(cluster, admin, TopicPartition("big", 0), [4, 2, 3])
    finally:
        admin.close()
    # the follower quota's fresh sensor lets one 1 s sample through at once (SimpleRate.windowSize),
    # but the window then grows with the elapsed time, so that second is paid back: bytes / rate,
    # 4 simulated seconds (Apache Kafka 4.3.1, benchmarks/calibration.py: ~S/R plus its overheads)
    expected = size / rate
    assert expected * 0.97 - 0.1 <= took <= expected * 1.03 + 0.15, took
    state = cluster.partition_state("big", 0)
    assert state["replicas"] == [4, 2, 3] and sorted(state["isr"]) == [2, 3, 4]


def test_unthrottled_move_limited_by_network(sim_cluster: Any, snapshot_factory: Any) -> None:
    size = 50 * MB
    net = 25 * MB
    snap = snapshot_factory(brokers=4, topics={"big": {"partitions": 1, "rf": 3, "size_bytes": size}},
                            network_bytes_per_sec=net)
    cluster = sim_cluster(snap, time_scale=2.0)
    admin = _admin(cluster)
    try:
        took = _move_duration(cluster, admin, TopicPartition("big", 0), [4, 2, 3])
    finally:
        admin.close()
    expected = size / net  # 2 simulated seconds
    assert expected * 0.97 - 0.1 <= took <= expected * 1.03 + 0.15, took


def test_cancel_reverts_to_original_replicas(sim_cluster: Any, snapshot_factory: Any) -> None:
    snap = snapshot_factory(brokers=4, topics={"big": {"partitions": 1, "rf": 3, "size_bytes": 100 * MB}})
    cluster = sim_cluster(snap, time_scale=1.0)
    admin = _admin(cluster)
    tp = TopicPartition("big", 0)
    try:
        admin.alter_configs([
            ConfigResource(ConfigResourceType.BROKER, "4", {"follower.replication.throttled.rate": "1000000"}),
            ConfigResource(ConfigResourceType.TOPIC, "big", {"follower.replication.throttled.replicas": "0:4"}),
        ], raise_on_unknown=False)
        assert admin.alter_partition_reassignments({tp: [4, 2, 3]}) == {tp: None}
        assert cluster.partition_state("big", 0)["adding"] == [4]
        time.sleep(0.3)
        assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
        assert admin.list_partition_reassignments() == {}
        (topic,) = admin.describe_topics(["big"])
    finally:
        admin.close()
    state = cluster.partition_state("big", 0)
    # KRaft reverts to "current replicas minus adding" in the current order: during the
    # move the set was [4, 2, 3, 1] (target + removing), so the original set comes back
    # as [2, 3, 1] with broker 1 still leading.
    assert state["replicas"] == [2, 3, 1]
    assert state["adding"] == [] and state["removing"] == []
    assert state["leader"] == 1
    assert _partition_view(topic, 0)["replicas"] == [2, 3, 1]
    assert 4 not in cluster.snapshot()["topics"][0]["partitions"][0]["replicas"]


def _partition_view(topic: dict, index: int) -> dict:
    """Normalise kafka-python's describe_topics partition dict."""
    p = next(p for p in topic["partitions"] if p.get("partition", p.get("partition_index")) == index)
    return {"replicas": p.get("replicas", p.get("replica_nodes")),
            "isr": p.get("isr", p.get("isr_nodes")),
            "leader": p.get("leader", p.get("leader_id"))}


def test_isr_shrinks_on_broker_stop_and_recovers(sim_cluster: Any, small_snapshot: dict) -> None:
    cluster = sim_cluster(small_snapshot, time_scale=1.0)
    host, port = cluster.endpoints[2]
    admin = _admin(cluster)
    try:
        cluster.stop_broker(2)
        # A stopped broker refuses connections, like a dead one.
        with pytest.raises(OSError):
            socket.create_connection((host, port), timeout=2).close()

        def view() -> dict:
            # kafka-python's admin may still pick the dead broker for its next request
            # and raise instead of retrying (as against a real cluster): try again.
            for attempt in range(20):
                try:
                    (topic,) = admin.describe_topics(["orders"])
                    return _partition_view(topic, 1)  # replicas [2, 3, 4], leader 2
                except KafkaConnectionError:
                    if attempt == 19:
                        raise
                    time.sleep(0.1)
            raise AssertionError("unreachable")

        p1 = view()
        assert 2 not in p1["isr"]
        assert p1["leader"] in (3, 4)
        assert p1["replicas"] == [2, 3, 4]
        # KRaft keeps a dead broker registered but fenced.
        for attempt in range(20):
            try:
                described = admin.describe_cluster()
                break
            except KafkaConnectionError:
                time.sleep(0.1)
        fenced = {b["broker_id"]: b["is_fenced"] for b in described["brokers"]}
        assert fenced == {1: False, 2: True, 3: False, 4: False}
        # ...and Metadata lists only the live brokers.
        from confluent_kafka.admin import AdminClient
        md = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(timeout=10)
        assert sorted(md.brokers) == [1, 3, 4]

        cluster.start_broker(2)
        assert cluster.endpoints[2] == (host, port)
        socket.create_connection((host, port), timeout=2).close()
        deadline = time.monotonic() + 20
        while 2 not in view()["isr"]:
            assert time.monotonic() < deadline, "broker 2 never rejoined the ISR"
            time.sleep(0.05)
    finally:
        admin.close()


def test_acks_all_producer_loses_nothing_through_leader_moving_reassignment(
        sim_cluster: Any, snapshot_factory: Any) -> None:
    snap = snapshot_factory(brokers=4, topics={
        "orders": {"partitions": 2, "rf": 3, "size_bytes": 100 * MB,
                   "configs": {"min.insync.replicas": "2"}}})
    cluster = sim_cluster(snap, time_scale=1.0)
    bootstrap = cluster.bootstrap_servers
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2,
                             retries=2**31 - 1, request_timeout_ms=10000, metadata_max_age_ms=1000)
    acked: dict[int, set[bytes]] = {0: set(), 1: set()}
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        i = 0
        while not stop.is_set():
            value = f"r{i}".encode()
            part = i % 2
            fut = producer.send("orders", value=value, partition=part)

            def ok(_md: Any, v: bytes = value, p: int = part) -> None:
                with lock:
                    acked[p].add(v)

            fut.add_callback(ok)
            fut.add_errback(lambda e: errors.append(e))
            i += 1
            time.sleep(0.002)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    admin = _admin(cluster)
    try:
        time.sleep(0.5)
        # Move both leaders away: orders-0 [1,2,3] -> [4,3,2], orders-1 [2,3,4] -> [1,4,3].
        tps = {TopicPartition("orders", 0): [4, 3, 2], TopicPartition("orders", 1): [1, 4, 3]}
        assert admin.alter_partition_reassignments(tps) == {tp: None for tp in tps}
        deadline = time.monotonic() + 60
        while admin.list_partition_reassignments():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.5)
    finally:
        stop.set()
        t.join(10)
        producer.flush(30)
        producer.close(10)
        admin.close()
    assert cluster.partition_state("orders", 0)["leader"] == 4
    assert cluster.partition_state("orders", 1)["leader"] == 1
    total = sum(len(v) for v in acked.values())
    assert total > 100, total

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=3000,
                             fetch_max_wait_ms=100)
    consumer.assign([TopicPartition("orders", 0), TopicPartition("orders", 1)])
    consumer.seek_to_beginning()
    got: dict[int, list[bytes]] = {0: [], 1: []}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(not acked[p] <= set(got[p]) for p in (0, 1)):
        for records in consumer.poll(timeout_ms=500).values():
            for r in records:
                got[r.partition].append(r.value)
    consumer.close()
    for p in (0, 1):
        missing = acked[p] - set(got[p])
        assert not missing, f"partition {p}: {len(missing)} acknowledged records lost"
        # The idempotent producer must not have written duplicates either.
        assert len(got[p]) == len(set(got[p]))
