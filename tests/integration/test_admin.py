"""KafkaAdmin round trips against the simulated cluster over real TCP (kafka-python)."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

import pytest

from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.errors import KafkaAdminError
from kafka_reassign.throttle.specs import FOLLOWER_REPLICAS, LEADER_RATE, ConfigChange


@pytest.fixture
def cluster_admin(sim_cluster: Callable[..., Any], snapshot_factory: Callable[..., dict]):
    snap = snapshot_factory(brokers=4, racks=2, topics={
        "orders": {"partitions": 3, "rf": 3, "size_bytes": 4_000_000, "configs": {"min.insync.replicas": "2"}},
        "clicks": {"partitions": 2, "rf": 2, "size_bytes": 1_000_000}})
    cluster = sim_cluster(snap, time_scale=5.0)
    admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers)
    yield cluster, admin
    admin.close()


def test_cluster_state(cluster_admin):
    cluster, admin = cluster_admin
    st = admin.cluster_state()
    assert sorted(st.brokers) == [1, 2, 3, 4] and all(b.alive for b in st.brokers.values())
    assert st.brokers[1].rack == "rack-0" and st.brokers[1].log_dirs == ("/data/d0", "/data/d1")
    p = st.partition("orders", 1)
    assert p.replicas == (2, 3, 4) and set(p.isr) == {2, 3, 4} and p.leader == 2
    assert p.size_bytes == 4_000_000 and p.replica_dirs == {2: "/data/d0", 3: "/data/d0", 4: "/data/d0"}
    assert st.min_isr("orders") == 2 and st.min_isr("clicks") == 1
    assert st.cluster_id and st.in_flight == {}


def test_partition_metadata_answers_the_partitions_asked_only(cluster_admin):
    cluster, admin = cluster_admin
    got = admin.partition_metadata([("orders", 1), ("clicks", 0), ("orders", 9), ("nope", 0)])
    assert sorted(got) == [("clicks", 0), ("orders", 1)]  # no such partition / topic: absent
    whole = {(t.name, p.partition): p for t in admin.topic_metadata(["orders", "clicks"]) for p in t.partitions}
    assert got[("orders", 1)] == whole[("orders", 1)] and got[("clicks", 0)] == whole[("clicks", 0)]
    assert got[("orders", 1)].replicas == (2, 3, 4) and set(got[("orders", 1)].isr) == {2, 3, 4}
    cluster.stop_broker(3)
    after = admin.partition_metadata([("orders", 1)])[("orders", 1)]
    assert 3 not in after.isr and after.offline == (3,)
    assert admin.partition_metadata([]) == {}


def test_configs_set_read_delete(cluster_admin):
    cluster, admin = cluster_admin
    admin.alter_configs([ConfigChange("broker", "2", LEADER_RATE, None, "1234567"),
                         ConfigChange("topic", "orders", FOLLOWER_REPLICAS, None, "0:4")])
    assert cluster.broker_configs(2)[LEADER_RATE] == "1234567"
    got = admin.describe_configs([1, 2], ["orders"], keys=[LEADER_RATE, FOLLOWER_REPLICAS])
    assert got[("broker", "2")][LEADER_RATE] == "1234567"
    assert got[("broker", "1")][LEADER_RATE] is None
    assert got[("topic", "orders")][FOLLOWER_REPLICAS] == "0:4"
    # min.insync.replicas is a topic override too: reported as dynamic, unrequested keys filtered.
    assert set(got[("topic", "orders")]) == {LEADER_RATE, FOLLOWER_REPLICAS}
    admin.alter_configs([ConfigChange("broker", "2", LEADER_RATE, "1234567", None)])
    assert LEADER_RATE not in cluster.broker_configs(2)


def test_reassign_list_cancel_and_elect(cluster_admin):
    cluster, admin = cluster_admin
    # A slow move (throttled) so it is still in flight when listed.
    admin.alter_configs([ConfigChange("broker", str(b), k, None, "100000") for b in (1, 2, 3, 4)
                         for k in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")]
                        + [ConfigChange("topic", "orders", "follower.replication.throttled.replicas", None, "0:4"),
                           ConfigChange("topic", "orders", "leader.replication.throttled.replicas", None,
                                        "0:1,0:2,0:3")])
    res = admin.alter_partition_reassignments({("orders", 0): [4, 1, 2], ("orders", 9): [1, 2, 3]})
    assert res[("orders", 0)] is None
    assert res[("orders", 9)] == "UNKNOWN_TOPIC_OR_PARTITION"
    inflight = admin.list_partition_reassignments()
    assert set(inflight) == {("orders", 0)}
    inf = inflight[("orders", 0)]
    assert inf.adding == (4,) and inf.removing == (3,) and inf.target == (4, 1, 2) and inf.original == (1, 2, 3)
    assert admin.list_partition_reassignments([("clicks", 0)]) == {}
    assert admin.alter_partition_reassignments({("orders", 0): None}) == {("orders", 0): None}
    assert admin.list_partition_reassignments() == {}
    assert cluster.partition_state("orders", 0)["replicas"] == [1, 2, 3]
    assert admin.elect_preferred_leaders([("orders", 0)]) == {("orders", 0): None}


def test_log_dirs_describe_and_alter(cluster_admin):
    cluster, admin = cluster_admin
    rows = admin.describe_log_dirs([1], [("orders", 0)])
    assert [(r.broker, r.path, r.topic, r.partition, r.size, r.is_future) for r in rows] == [
        (1, "/data/d0", "orders", 0, 4_000_000, False)]
    assert admin.alter_replica_log_dirs({("orders", 0, 1): "/data/d1"}) == {("orders", 0, 1): None}
    assert cluster.wait_for(lambda: cluster.partition_state("orders", 0)["log_dirs"][1] == "/data/d1", timeout=20)
    bad = admin.alter_replica_log_dirs({("orders", 0, 1): "/nope"})
    assert bad[("orders", 0, 1)] == "LOG_DIR_NOT_FOUND"


def test_log_dirs_of_many_brokers_in_one_round_skip_a_stopped_one(cluster_admin, caplog):
    cluster, admin = cluster_admin
    keys = [("orders", 0), ("orders", 1), ("clicks", 0)]
    together = admin.describe_log_dirs([1, 2, 3, 4], keys)
    alone = [r for b in [1, 2, 3, 4] for r in admin.describe_log_dirs([b], keys)]
    assert sorted(map(repr, together)) == sorted(map(repr, alone)) and {r.broker for r in together} == {1, 2, 3, 4}
    # Per broker: each is asked about its own partitions only.
    mine = admin.describe_log_dirs([1, 2], {1: [("orders", 0)], 2: [("orders", 1)], 3: [("orders", 2)]})
    assert sorted((r.broker, r.topic, r.partition) for r in mine) == [(1, "orders", 0), (2, "orders", 1)]
    cluster.stop_broker(3)
    with caplog.at_level("WARNING", logger="kafka_reassign.cluster.admin"):
        rows = admin.describe_log_dirs([1, 2, 3, 4], keys)
    assert {r.broker for r in rows} == {1, 2, 4}
    assert "DescribeLogDirs on broker 3 failed" in caplog.text


def test_dead_broker_is_known_but_not_alive(cluster_admin):
    cluster, admin = cluster_admin
    cluster.stop_broker(4)
    deadline = time.monotonic() + 10
    while True:
        st = admin.cluster_state()
        if not st.brokers[4].alive or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert 4 in st.brokers and not st.brokers[4].alive
    assert 4 in st.partition("orders", 1).offline or 4 not in st.partition("orders", 1).isr


def test_unreachable_cluster_is_a_clear_error():
    t0 = time.monotonic()
    with pytest.raises(KafkaAdminError) as info:
        KafkaAdmin(bootstrap_servers="127.0.0.1:1", bootstrap_timeout_ms=500, retry_attempts=2)
    assert "connect failed" in str(info.value)
    assert time.monotonic() - t0 < 15


def test_a_broker_that_stops_answering_costs_one_deadline_not_the_run(sim_cluster, snapshot_factory, caplog):
    """kafka-python waits on a call with no limit of its own; a frozen broker must not hold us."""
    cluster = sim_cluster(snapshot_factory(brokers=3, racks=1, topics={"t": {"partitions": 1, "rf": 3}}))
    # kafka-python's own request timer is set far out, so only the admin's call deadline can end the wait.
    admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=600_000,
                       call_timeout_seconds=2, retry_attempts=2)
    try:
        first = admin.client
        cluster.freeze_broker(2, api_keys=[32])  # DescribeConfigs
        started = time.monotonic()
        with pytest.raises(KafkaAdminError) as err:
            admin.describe_configs([2], [], keys=[LEADER_RATE])
        assert time.monotonic() - started < 30
        assert "no answer within 2 s" in str(err.value)
        assert "kafka-python gave no answer within 2 s" in caplog.text
        # Thawed, the same KafkaAdmin answers, through a new client (the hung one was closed).
        cluster.thaw_broker(2)
        assert admin.describe_configs([2], [], keys=[LEADER_RATE])[("broker", "2")][LEADER_RATE] is None
        assert admin.client is not first
    finally:
        cluster.thaw_broker(2)
        admin.close()


def test_a_broker_frozen_for_a_moment_is_retried_through(sim_cluster, snapshot_factory):
    cluster = sim_cluster(snapshot_factory(brokers=3, racks=1, topics={"t": {"partitions": 1, "rf": 3}}))
    admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=600_000,
                       call_timeout_seconds=1.5, retry_attempts=5)
    try:
        cluster.freeze_broker(3, api_keys=[32, 44])  # DescribeConfigs, IncrementalAlterConfigs
        threading.Timer(2.0, cluster.thaw_broker, args=(3,)).start()
        admin.alter_configs([ConfigChange("broker", "3", LEADER_RATE, None, "777")])
        assert admin.describe_configs([3], [], keys=[LEADER_RATE])[("broker", "3")][LEADER_RATE] == "777"
    finally:
        cluster.thaw_broker(3)
        admin.close()
