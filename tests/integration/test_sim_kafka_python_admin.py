"""kafka-python's KafkaAdminClient against the simulated cluster, over real TCP.

Tests that need no fault injection or simulator internals also run against a real
cluster when KAFKA_BOOTSTRAP is set (they then only read or write a topic they create).
"""
from __future__ import annotations

import time
import uuid
from typing import Any, Iterator

import pytest

kafka = pytest.importorskip("kafka")
from kafka import KafkaAdminClient, TopicPartition  # noqa: E402
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic  # noqa: E402
from kafka.errors import (  # noqa: E402
    InvalidReplicationAssignmentError, NoReassignmentInProgressError, TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def admin_for() -> Iterator[Any]:
    clients: list[KafkaAdminClient] = []

    def make(bootstrap: str) -> KafkaAdminClient:
        client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000,
                                  client_id="sim-test")
        clients.append(client)
        return client

    yield make
    for c in clients:
        c.close()


def _wait(pred: Any, timeout: float = 15.0, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def test_cluster_metadata_brokers_racks_and_partitions(kafka_bootstrap: str, admin_for: Any,
                                                       real_kafka: bool) -> None:
    admin = admin_for(kafka_bootstrap)
    cluster = admin.describe_cluster()
    assert cluster["cluster_id"]
    assert cluster["controller_id"] in {b["broker_id"] for b in cluster["brokers"]}
    if real_kafka:
        return
    assert sorted(b["broker_id"] for b in cluster["brokers"]) == [1, 2, 3, 4]
    assert {b["broker_id"]: b["rack"] for b in cluster["brokers"]} == {
        1: "rack-0", 2: "rack-1", 3: "rack-0", 4: "rack-1"}
    assert set(admin.list_topics()) >= {"orders", "clicks"}
    (orders,) = admin.describe_topics(["orders"])
    assert orders["error_code"] == 0
    parts = sorted(orders["partitions"], key=lambda p: p["partition_index"])
    assert [p["replica_nodes"] for p in parts] == [[1, 2, 3], [2, 3, 4], [3, 4, 1]]
    assert [p["leader_id"] for p in parts] == [1, 2, 3]
    assert all(sorted(p["isr_nodes"]) == sorted(p["replica_nodes"]) for p in parts)


def test_topic_lifecycle_create_partitions_delete(kafka_bootstrap: str, admin_for: Any) -> None:
    admin = admin_for(kafka_bootstrap)
    name = f"sim-test-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=2,
                                  topic_configs={"retention.ms": "3600000"})])
    assert _wait(lambda: name in admin.list_topics())
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
    admin.create_partitions({name: NewPartitions(total_count=3)})
    assert _wait(lambda: len(admin.describe_topics([name])[0]["partitions"]) == 3)
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    assert configs["topic"][name]["retention.ms"]["value"] == "3600000"
    admin.delete_topics([name])
    assert _wait(lambda: name not in admin.list_topics())


def test_incremental_configs_sources_and_validate_only(sim_cluster: Any, small_snapshot: dict,
                                                        admin_for: Any) -> None:
    cluster = sim_cluster(small_snapshot)
    admin = admin_for(cluster.bootstrap_servers)
    before = cluster.write_count
    # Unset throttle rates are absent from DescribeConfigs (dynamic-only, as in Kafka), so
    # kafka-python's client-side name check must be off to set one: raise_on_unknown=False.
    admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1",
                                        {"leader.replication.throttled.rate": "1000000"})],
                        validate_only=True, raise_on_unknown=False)
    assert cluster.write_count == before, "validate_only must not write"
    admin.alter_configs([
        ConfigResource(ConfigResourceType.BROKER, "1", {"leader.replication.throttled.rate": "1000000"}),
        ConfigResource(ConfigResourceType.TOPIC, "orders",
                       {"leader.replication.throttled.replicas": "0:1,1:2"}),
    ], raise_on_unknown=False)
    assert cluster.write_count > before
    assert cluster.broker_configs(1)["leader.replication.throttled.rate"] == "1000000"
    assert cluster.topic_configs("orders")["leader.replication.throttled.replicas"] == "0:1,1:2"
    described = admin.describe_configs([
        ConfigResource(ConfigResourceType.BROKER, "1", ["leader.replication.throttled.rate"]),
        ConfigResource(ConfigResourceType.TOPIC, "orders", ["leader.replication.throttled.replicas",
                                                            "min.insync.replicas"]),
    ], config_filter="all")
    rate = described["broker"]["1"]["leader.replication.throttled.rate"]
    assert rate["value"] == "1000000"
    assert rate["config_source"] == "DYNAMIC_BROKER_CONFIG"
    lrtr = described["topic"]["orders"]["leader.replication.throttled.replicas"]
    assert lrtr["value"] == "0:1,1:2" and lrtr["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    # Bad values are refused the way Kafka refuses them, and nothing is written.
    before = cluster.write_count
    bad = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "orders",
                                              {"leader.replication.throttled.replicas": "zero:one"})],
                              raise_on_unknown=False)
    assert "InvalidConfigurationError" in str(bad["topic"]["orders"]), bad
    assert cluster.write_count == before
    assert cluster.topic_configs("orders")["leader.replication.throttled.replicas"] == "0:1,1:2"
    # DELETE restores the default.
    admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1",
                                        {"leader.replication.throttled.rate": ("DELETE", None)})])
    assert "leader.replication.throttled.rate" not in cluster.broker_configs(1)


def test_reassignment_listed_while_in_flight_then_completes(sim_cluster: Any, small_snapshot: dict,
                                                             admin_for: Any) -> None:
    # 10 MB at a 20 MB/s follower throttle = 0.5 simulated seconds; time_scale 0.25 -> ~2 s wall.
    cluster = sim_cluster(small_snapshot, time_scale=0.25)
    admin = admin_for(cluster.bootstrap_servers)
    admin.alter_configs([
        ConfigResource(ConfigResourceType.BROKER, "4", {"follower.replication.throttled.rate": "20000000"}),
        ConfigResource(ConfigResourceType.TOPIC, "orders", {"follower.replication.throttled.replicas": "0:4"}),
    ], raise_on_unknown=False)
    result = admin.alter_partition_reassignments({TopicPartition("orders", 0): [4, 2, 3]})
    assert result == {TopicPartition("orders", 0): None}
    inflight = admin.list_partition_reassignments()
    entry = inflight[TopicPartition("orders", 0)]
    assert entry["adding_replicas"] == [4] and entry["removing_replicas"] == [1]
    assert sorted(entry["replicas"]) == [1, 2, 3, 4]
    assert _wait(lambda: not admin.list_partition_reassignments(), timeout=20)
    (orders,) = admin.describe_topics(["orders"])
    p0 = next(p for p in orders["partitions"] if p["partition_index"] == 0)
    assert p0["replica_nodes"] == [4, 2, 3]
    assert p0["leader_id"] in (4, 2, 3)
    assert sorted(p0["isr_nodes"]) == [2, 3, 4]


def test_reassignment_errors_as_kafka_gives_them(sim_cluster: Any, small_snapshot: dict,
                                                 admin_for: Any) -> None:
    cluster = sim_cluster(small_snapshot)
    admin = admin_for(cluster.bootstrap_servers)
    before = cluster.write_count
    res = admin.alter_partition_reassignments({
        TopicPartition("orders", 0): [1, 2, 99],        # unknown broker
        TopicPartition("orders", 1): [2, 2, 3],         # duplicate
        TopicPartition("orders", 2): None,              # nothing to cancel
        TopicPartition("nope", 0): [1, 2, 3],           # unknown topic
    })
    assert res[TopicPartition("orders", 0)] is InvalidReplicationAssignmentError
    assert res[TopicPartition("orders", 1)] is InvalidReplicationAssignmentError
    assert res[TopicPartition("orders", 2)] is NoReassignmentInProgressError
    assert res[TopicPartition("nope", 0)] is UnknownTopicOrPartitionError
    assert cluster.write_count == before


def test_describe_log_dirs_and_move_between_dirs(sim_cluster: Any, small_snapshot: dict,
                                                 admin_for: Any) -> None:
    cluster = sim_cluster(small_snapshot, time_scale=5.0)
    admin = admin_for(cluster.bootstrap_servers)
    dirs = {d["broker"]: d["log_dirs"] for d in admin.describe_log_dirs()}
    assert sorted(dirs) == [1, 2, 3, 4]
    b1 = {d["log_dir"]: d for d in dirs[1]}
    assert set(b1) == {"/data/d0", "/data/d1"}
    replicas_d0 = {(t["name"], p["partition_index"]): p for t in b1["/data/d0"]["topics"]
                   for p in t["partitions"]}
    assert replicas_d0[("orders", 0)]["partition_size"] >= 10_000_000
    assert replicas_d0[("orders", 0)]["offset_lag"] == 0
    assert b1["/data/d0"]["total_bytes"] == 1_000_000_000_000

    res = admin.alter_replica_log_dirs({("orders", 0, 1): "/data/d1"})
    assert all(getattr(e, "errno", 0) == 0 for e in res.values()), res

    def moved() -> bool:
        cur = {d["log_dir"]: d for d in next(x for x in admin.describe_log_dirs(brokers=[1])
                                             if x["broker"] == 1)["log_dirs"]}
        on_d1 = {(t["name"], p["partition_index"], p["is_future_key"])
                 for t in cur["/data/d1"]["topics"] for p in t["partitions"]}
        on_d0 = {(t["name"], p["partition_index"]) for t in cur["/data/d0"]["topics"]
                 for p in t["partitions"]}
        return ("orders", 0, False) in on_d1 and ("orders", 0) not in on_d0

    assert _wait(moved, timeout=30)
    assert cluster.partition_state("orders", 0)["log_dirs"][1] == "/data/d1"


def test_preferred_leader_election(sim_cluster: Any, small_snapshot: dict, admin_for: Any) -> None:
    cluster = sim_cluster(small_snapshot, time_scale=1.0)
    admin = admin_for(cluster.bootstrap_servers)
    cluster.stop_broker(1)
    assert cluster.partition_state("orders", 0)["leader"] != 1
    cluster.start_broker(1)
    assert cluster.wait_for(lambda: 1 in cluster.partition_state("orders", 0)["isr"], timeout=20)
    admin.elect_leaders(0, {"orders": [0]})  # 0 = PREFERRED
    assert cluster.partition_state("orders", 0)["leader"] == 1
