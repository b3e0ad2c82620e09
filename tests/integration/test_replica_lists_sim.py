"""Throttled-replica lists against the simulator: what the throttle record holds through a failed write."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.errors import KafkaAdminError
from kafka_reassign.execution.steps import StepMove
from kafka_reassign.throttle.record import MemoryRecordStore
from kafka_reassign.throttle.replica_lists import ReplicaThrottle
from kafka_reassign.throttle.restore import restore_throttle
from kafka_reassign.throttle.guard import guard_throttle
from kafka_reassign.throttle.specs import FOLLOWER_REPLICAS, LEADER_REPLICAS, ConfigChange

INCREMENTAL_ALTER_CONFIGS = 44


@pytest.fixture
def lists(sim_cluster: Callable[..., Any], snapshot_factory: Callable[..., dict]):
    snap = snapshot_factory(brokers=4, racks=2, topics={
        "orders": {"partitions": 2, "rf": 2, "size_bytes": 1_000_000},
        "clicks": {"partitions": 1, "rf": 2, "size_bytes": 1_000_000}})
    cluster = sim_cluster(snap, time_scale=0.0)
    admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers, retry_attempts=1, retry_max_seconds=2.0,
                       call_timeout_seconds=2.0)
    yield cluster, admin
    admin.close()


def _values(admin: KafkaAdmin, topic: str) -> dict[str, str | None]:
    return admin.describe_configs(topics=[topic], keys=(LEADER_REPLICAS, FOLLOWER_REPLICAS))[("topic", topic)]


def _step(admin: KafkaAdmin, topic: str, partition: int) -> StepMove:
    (meta,) = admin.topic_metadata([topic])
    current = meta.partitions[partition].replicas
    spare = next(b for b in (1, 2, 3, 4) if b not in current)
    return StepMove(topic, partition, current, (*current, spare), size_bytes=1_000_000)


def test_entries_a_failed_write_was_removing_stay_in_the_record_and_are_restored(lists):
    cluster, admin = lists
    store = MemoryRecordStore()
    throttle = ReplicaThrottle(store, "r1")
    step = _step(admin, "orders", 0)
    throttle.update(admin, [step], {"orders"})
    assert _values(admin, "orders")[FOLLOWER_REPLICAS]  # our entries are set
    for b in (1, 2, 3, 4):
        cluster.freeze_broker(b, [INCREMENTAL_ALTER_CONFIGS])
    try:
        with pytest.raises(KafkaAdminError):
            throttle.update(admin, [], {"orders"})  # the step finished; dropping its entries fails
        for b in (1, 2, 3, 4):  # a restart drops the held write: it never lands
            cluster.stop_broker(b)
            cluster.start_broker(b)
    finally:
        for b in (1, 2, 3, 4):
            cluster.thaw_broker(b)
    assert _values(admin, "orders")[FOLLOWER_REPLICAS]  # still there: the write never landed
    restore_throttle(admin, store, "r1", sleep=lambda s: None)
    assert _values(admin, "orders") == {LEADER_REPLICAS: None, FOLLOWER_REPLICAS: None}


@pytest.mark.parametrize("guarded", [False, True])
def test_the_record_forgets_topics_whose_entries_are_gone(lists, guarded: bool):
    # The record holds what the steps in flight need, not every topic the run ever touched.
    # guarded: someone deletes our list mid-run and the guard writes it again (a second change of
    # the same list in the record); the list still leaves the record when its step finishes.
    cluster, admin = lists
    store = MemoryRecordStore()
    throttle = ReplicaThrottle(store, "r2")
    orders, clicks = _step(admin, "orders", 1), _step(admin, "clicks", 0)
    throttle.update(admin, [orders, clicks], {"orders", "clicks"})
    assert {c.name for c in store.get("r2").changes} == {"orders", "clicks"}
    if guarded:
        ours = _values(admin, "orders")[FOLLOWER_REPLICAS]
        admin.alter_configs([ConfigChange("topic", "orders", FOLLOWER_REPLICAS, ours, None)])  # someone else
        assert guard_throttle(admin, store, "r2").warnings
        assert _values(admin, "orders")[FOLLOWER_REPLICAS] == ours
        assert sum(c.name == "orders" and c.key == FOLLOWER_REPLICAS for c in store.get("r2").changes) == 2
    throttle.update(admin, [clicks], {"orders"})  # orders' step finished: its entries go, once written
    assert {c.name for c in store.get("r2").changes} == {"clicks"}
    assert _values(admin, "orders") == {LEADER_REPLICAS: None, FOLLOWER_REPLICAS: None}
    throttle.update(admin, [], {"clicks"})
    restore_throttle(admin, store, "r2", sleep=lambda s: None)
    assert _values(admin, "clicks") == {LEADER_REPLICAS: None, FOLLOWER_REPLICAS: None}
