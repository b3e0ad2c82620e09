"""A cluster-wide default throttle (``kafka-configs --entity-default``) against the simulator over TCP.

The default is set with the request Kafka's own tool sends (IncrementalAlterConfigs of the
BROKER resource named ""); each broker reports it with the source DYNAMIC_DEFAULT_BROKER_CONFIG.
A default lower than the run's rate is theirs: nothing is written over it. A higher one is
overridden per broker for the run, guarded, and the override deleted afterwards.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

import pytest

from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.run.prepare import prepare
from kafka_reassign.throttle.apply import apply_throttle
from kafka_reassign.throttle.restore import restore_throttle
from kafka_reassign.throttle.record import FileRecordStore
from kafka_reassign.throttle.specs import (BROKER_KEYS, CLUSTER_DEFAULT, FOLLOWER_RATE, LEADER_RATE, ConfigChange,
                                     Inherited)
from kafka_reassign.throttle.guard import expected_throttle, guard_throttle, throttle_drift

PLAN = {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [4, 5, 6]}]}


def set_cluster_default(admin: KafkaAdmin, values: Mapping[str, str | None]) -> None:
    """IncrementalAlterConfigs of the BROKER resource "" (kafka-python's alter_configs wants a broker id)."""
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient
    ops = {k: (AlterConfigOp.DELETE, None) if v is None else (AlterConfigOp.SET, v) for k, v in values.items()}
    request = KafkaAdminClient._alter_configs_request([ConfigResource(ConfigResourceType.BROKER, "", ops)],
                                                      incremental=True)
    manager = admin.client._manager

    async def send() -> Any:
        return await manager.send(request)
    response = manager.run(send)
    assert [r.error_code for r in response.responses] == [0]


@pytest.fixture
def env(sim_cluster: Callable[..., Any], snapshot_factory: Callable[..., dict], tmp_path: Path):
    topics = {"orders": {"partitions": 2, "rf": 3, "size_bytes": 20_000_000, "configs": {"min.insync.replicas": "2"}}}
    cluster = sim_cluster(snapshot_factory(brokers=6, racks=3, topics=topics), time_scale=20.0)
    admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers)
    yield cluster, admin, FileRecordStore(tmp_path / "records")
    admin.close()


def per_broker(cluster: Any) -> dict[int, dict[str, str]]:
    """Per-broker dynamic values of every broker that has any."""
    return {b: cfg for b in range(1, 7) if (cfg := cluster.broker_configs(b))}


def test_the_simulator_reports_the_default_on_every_broker_with_its_source(env):
    cluster, admin, _ = env
    set_cluster_default(admin, {LEADER_RATE: "1000000"})
    admin.alter_configs([ConfigChange("broker", "2", LEADER_RATE, None, "3000000")])
    assert cluster.broker_configs("") == {LEADER_RATE: "1000000"}
    read = admin.describe_sourced([1, 2], [], keys=BROKER_KEYS)
    assert read.values[("broker", "1")] == {k: None for k in BROKER_KEYS}, "no per-broker value on broker 1"
    assert read.inherited[("broker", "1")] == {LEADER_RATE: Inherited("1000000", CLUSTER_DEFAULT)}
    assert read.values[("broker", "2")][LEADER_RATE] == "3000000" and ("broker", "2") not in read.inherited
    assert admin.read_configs([1], [], keys=BROKER_KEYS).inherited == {("broker", "1"): read.inherited[("broker", "1")]}
    assert admin.describe_configs([1], [], keys=BROKER_KEYS)[("broker", "1")][LEADER_RATE] is None


def test_a_lower_default_is_kept_as_theirs(env):
    cluster, admin, store = env
    set_cluster_default(admin, {LEADER_RATE: "1000000"})
    prepared = prepare(admin, PLAN, {"throttle_bytes_per_sec": 2_000_000})
    brokers = sorted(prepared.throttle_spec.rate_brokers)
    assert not [c for c in prepared.throttle_changes if c.key == LEADER_RATE]
    report = prepared.report()
    assert all(f"broker {b}: {LEADER_RATE} is already 1.0 MB/s (cluster default), lower than ours" in report
               for b in brokers), report
    rec = apply_throttle(admin, prepared, store, "low")
    assert not [c for c in rec.changes if c.key == LEADER_RATE], "nothing of theirs recorded to restore"
    assert {b: cfg.get(LEADER_RATE) for b, cfg in per_broker(cluster).items()} == {b: None for b in brokers}
    assert guard_throttle(admin, store, "low").intact, "the default in force is not a deleted throttle"
    restore_throttle(admin, store, "low")
    assert per_broker(cluster) == {} and cluster.broker_configs("") == {LEADER_RATE: "1000000"}


def test_a_higher_default_is_overridden_guarded_and_given_back(env):
    cluster, admin, store = env
    set_cluster_default(admin, {FOLLOWER_RATE: "40000000"})
    prepared = prepare(admin, PLAN, {"throttle_bytes_per_sec": 2_000_000})
    rec = apply_throttle(admin, prepared, store, "high")
    ours = [c for c in rec.changes if c.key == FOLLOWER_RATE]
    assert ours and all(c.prior is None and c.inherited == Inherited("40000000") for c in ours)
    assert "(was (not set), cluster default '40000000' in force)" in prepared.report()
    # Our override on broker 4 deleted: the 40 MB/s default would let the copy run faster: put back.
    admin.alter_configs([ConfigChange("broker", "4", FOLLOWER_RATE, "2000000", None)])
    assert throttle_drift(admin, expected_throttle(store.get("high")))
    guarded = guard_throttle(admin, store, "high")
    assert [(c.name, c.prior, c.value) for c in guarded.reapplied] == [("4", None, "2000000")]
    assert "is None (cluster default '40000000' in force)" in guarded.warnings[0]
    assert cluster.broker_configs(4)[FOLLOWER_RATE] == "2000000"
    # The default lowered below ours and our override on broker 5 deleted: throttled more, left alone.
    set_cluster_default(admin, {FOLLOWER_RATE: "1000000"})
    admin.alter_configs([ConfigChange("broker", "5", FOLLOWER_RATE, "2000000", None)])
    assert guard_throttle(admin, store, "high").intact
    assert throttle_drift(admin, expected_throttle(store.get("high"))) == []
    restore_throttle(admin, store, "high")
    assert per_broker(cluster) == {}, "every override of ours deleted: the default is in force again"
    assert cluster.broker_configs("") == {FOLLOWER_RATE: "1000000"}
