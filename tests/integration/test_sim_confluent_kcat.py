"""librdkafka-based clients (confluent-kafka, kcat) against the simulated cluster.

librdkafka is a client nobody here wrote: if it negotiates versions, reads metadata,
alters configs, produces and consumes, the simulator's wire format is right.
"""
from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from typing import Any

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType,
)

pytestmark = pytest.mark.timeout(120)


def _wait(pred: Any, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.05)


def test_confluent_admin_metadata_cluster_and_configs(sim_cluster: Any, small_snapshot: dict) -> None:
    cluster = sim_cluster(small_snapshot)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    md = admin.list_topics(timeout=10)
    assert sorted(md.brokers) == [1, 2, 3, 4]
    assert {"orders", "clicks"} <= set(md.topics)
    orders = md.topics["orders"]
    assert orders.error is None
    assert sorted(orders.partitions) == [0, 1, 2]
    assert orders.partitions[1].replicas == [2, 3, 4]
    assert orders.partitions[1].leader == 2
    assert sorted(orders.partitions[1].isrs) == [2, 3, 4]

    desc = admin.describe_cluster(request_timeout=10).result(10)
    assert desc.cluster_id
    assert sorted((n.id, n.rack) for n in desc.nodes) == [
        (1, "rack-0"), (2, "rack-1"), (3, "rack-0"), (4, "rack-1")]
    assert desc.controller is not None

    res = ConfigResource(ResourceType.BROKER, "2", incremental_configs=[
        ConfigEntry("follower.replication.throttled.rate", "5000000",
                    incremental_operation=AlterConfigOpType.SET)])
    for fut in admin.incremental_alter_configs([res]).values():
        fut.result(10)
    assert cluster.broker_configs(2)["follower.replication.throttled.rate"] == "5000000"

    topic_res = ConfigResource(ResourceType.TOPIC, "orders")
    (fut,) = admin.describe_configs([topic_res]).values()
    entries = fut.result(10)
    assert "min.insync.replicas" in entries
    assert "retention.ms" in entries
    (fut,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, "2")]).values()
    broker_entries = fut.result(10)
    assert broker_entries["follower.replication.throttled.rate"].value == "5000000"


def test_confluent_create_topic_then_produce_and_consume(sim_cluster: Any, small_snapshot: dict) -> None:
    cluster = sim_cluster(small_snapshot)
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = f"ck-{uuid.uuid4().hex[:6]}"
    for fut in admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=3)]).values():
        fut.result(10)
    assert _wait(lambda: name in admin.list_topics(timeout=5).topics)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    acked: list[tuple[int, int, bytes]] = []

    def on_delivery(err: Any, msg: Any) -> None:
        assert err is None, err
        acked.append((msg.partition(), msg.offset(), msg.value()))

    for i in range(300):
        producer.produce(name, value=f"v{i}".encode(), key=str(i).encode(), on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(20) == 0
    assert len(acked) == 300

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sim-test",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(name, p, OFFSET_BEGINNING) for p in range(3)])
    seen: set[tuple[int, int]] = set()
    values: set[bytes] = set()
    deadline = time.monotonic() + 30
    while len(values) < 300 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        seen.add((msg.partition(), msg.offset()))
        values.add(msg.value())
    consumer.close()
    assert values == {f"v{i}".encode() for i in range(300)}
    assert seen == {(p, o) for p, o, _ in acked}


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_kcat_lists_brokers_and_partitions(sim_cluster: Any, small_snapshot: dict) -> None:
    cluster = sim_cluster(small_snapshot)
    out = subprocess.run(["kcat", "-L", "-b", cluster.bootstrap_servers, "-m", "10"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    assert " 4 brokers:" in out
    for b, (host, port) in cluster.endpoints.items():
        assert f"broker {b} at {host}:{port}" in out
    assert 'topic "orders" with 3 partitions:' in out
    assert "partition 1, leader 2, replicas: 2,3,4, isrs: 2,3,4" in out
    assert 'topic "clicks" with 2 partitions:' in out


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_kcat_produce_and_consume(sim_cluster: Any, small_snapshot: dict) -> None:
    cluster = sim_cluster(small_snapshot)
    b = cluster.bootstrap_servers
    lines = "".join(f"line-{i}\n" for i in range(50))
    subprocess.run(["kcat", "-P", "-b", b, "-t", "clicks", "-p", "0", "-X", "acks=all"],
                   input=lines, text=True, timeout=30, check=True)
    out = subprocess.run(["kcat", "-C", "-b", b, "-t", "clicks", "-p", "0", "-o", "beginning",
                          "-e", "-q"], capture_output=True, text=True, timeout=30, check=True).stdout
    assert out.split() == [f"line-{i}" for i in range(50)]
