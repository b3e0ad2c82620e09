"""kafka_reassign.throttle.reconciler against the simulated cluster over TCP (no Airflow).

A "dead run" here prepares, records and writes its throttle and submits a batch, then
never tears down - what a killed worker leaves. (The DAG-level test kills a real process.)
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import pytest

from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.run.prepare import prepare
from kafka_reassign.run.reassign import executor_for
from kafka_reassign.throttle.apply import apply_throttle
from kafka_reassign.throttle.reconciler import reconcile
from kafka_reassign.throttle.record import FileRecordStore
from kafka_reassign.throttle.specs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from sim_snapshots import dynamic_configs


def _wait_idle(admin: KafkaAdmin, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while admin.list_partition_reassignments():
        assert time.monotonic() < deadline, "reassignment did not finish"
        time.sleep(0.2)


@pytest.fixture
def setup(sim_cluster: Callable[..., Any], snapshot_factory: Callable[..., dict], tmp_path: Path):
    snapshot = snapshot_factory(brokers=4, racks=2, topics={
        "orders": {"partitions": 3, "rf": 3, "size_bytes": 40_000_000, "configs": {"min.insync.replicas": "2"}},
        "clicks": {"partitions": 2, "rf": 2, "size_bytes": 5_000_000},
    })
    cluster = sim_cluster(snapshot, time_scale=1.0)
    admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers.split(","))
    # Someone else's throttles, set before our run: a rate on broker 4 and a replica list on clicks.
    from kafka_reassign.throttle.specs import ConfigChange
    admin.alter_configs([ConfigChange("broker", "4", LEADER_RATE, None, "70000000"),
                         ConfigChange("topic", "clicks", FOLLOWER_REPLICAS, None, "0:3")])
    store = FileRecordStore(tmp_path / "records")
    yield cluster, admin, store
    admin.close()


def _dead_run(admin: KafkaAdmin, store: FileRecordStore, run_id: str, targets: dict[int, list[int]],
              rate: int = 10_000_000) -> Any:
    plan = {"version": 1, "partitions": [{"topic": "orders", "partition": p, "replicas": r}
                                         for p, r in targets.items()]}
    prepared = prepare(admin, plan, {"throttle_bytes_per_sec": rate, "max_partition_movements": 10}, run_id=run_id)
    apply_throttle(admin, prepared, store, run_id)
    executor_for(prepared, run_id, store).tick(admin)  # the first window goes out, with its replica lists
    return prepared  # ...and the worker dies here: no teardown


def test_restores_dead_run_and_leaves_foreign_alone(setup: Any) -> None:
    cluster, admin, store = setup
    before = dynamic_configs(cluster)
    _dead_run(admin, store, "dead-run-1", {0: [4, 2, 3]})
    during = dynamic_configs(cluster)
    assert during["broker 1"].get(LEADER_RATE) == "10000000"
    assert during["broker 4"][LEADER_RATE] == "10000000"      # ours is lower: it wins while we run
    assert "0:4" in during["topic orders"][FOLLOWER_REPLICAS]

    # While the move is in flight, the reconciler must not touch anything.
    writes = cluster.write_count
    report = reconcile(admin, store)
    assert any(r == "dead-run-1" and "moves still in flight" in why for r, why in report.left_alone), report.summary()
    assert not report.foreign or {f.owner for f in report.in_use} == {"dead-run-1"}
    assert cluster.write_count == writes
    assert store.list_unrestored()[0].run_id == "dead-run-1"

    _wait_idle(admin)
    report = reconcile(admin, store)
    print(report.summary())
    assert [r.run_id for r in report.restored] == ["dead-run-1"]
    assert not store.list_unrestored()
    assert dynamic_configs(cluster) == before, "configs differ from before the dead run"
    foreign = {(f.resource_type, f.name, f.key, f.value) for f in report.foreign}
    assert foreign == {("broker", "4", LEADER_RATE, "70000000"), ("topic", "clicks", FOLLOWER_REPLICAS, "0:3")}

    # Idempotent: a second pass writes nothing and still reports the foreign throttles.
    writes = cluster.write_count
    again = reconcile(admin, store)
    assert not again.restored and len(again.foreign) == 2
    assert cluster.write_count == writes


def test_active_run_left_alone_and_dry_run_writes_nothing(setup: Any) -> None:
    cluster, admin, store = setup
    _dead_run(admin, store, "still-running", {1: [1, 3, 4]})
    _wait_idle(admin)
    writes = cluster.write_count
    report = reconcile(admin, store, active_run_ids={"still-running"})
    assert not report.restored
    assert ("still-running", "run still active; its throttle is in use") in report.left_alone
    assert {s.owner for s in report.in_use} == {"still-running"}
    assert cluster.write_count == writes

    dry = reconcile(admin, store, dry_run=True)
    assert [r.run_id for r in dry.restored] == ["still-running"] and dry.restored[0].changes
    assert cluster.write_count == writes and store.list_unrestored()


def test_remove_foreign_when_asked_is_recorded(setup: Any) -> None:
    cluster, admin, store = setup
    report = reconcile(admin, store, remove_foreign=True, reconciler_run_id="reconciler/manual-1")
    assert len(report.foreign_removed) == 2
    assert LEADER_RATE not in cluster.broker_configs(4)
    assert FOLLOWER_REPLICAS not in cluster.topic_configs("clicks")
    rec = store.get("reconciler/manual-1")
    assert rec is not None and rec.restored   # a log of what was removed, not something to undo automatically
    assert {(c.key, c.prior) for c in rec.changes} == {(LEADER_RATE, "70000000"), (FOLLOWER_REPLICAS, "0:3")}


def test_two_dead_runs_on_one_key_end_at_the_oldest_prior(setup: Any) -> None:
    cluster, admin, store = setup
    before = dynamic_configs(cluster)
    _dead_run(admin, store, "dead-a", {0: [4, 2, 3]}, rate=30_000_000)
    _wait_idle(admin)
    # A second run that did not adopt the first record (e.g. another tool version): stacks on top.
    plan = {"version": 1, "partitions": [{"topic": "orders", "partition": 2, "replicas": [2, 4, 1]}]}
    prepared = prepare(admin, plan, {"throttle_bytes_per_sec": 20_000_000}, run_id="dead-b")
    apply_throttle(admin, prepared, store, "dead-b", adopt_stale_records=False)
    executor_for(prepared, "dead-b", store).tick(admin)
    _wait_idle(admin)
    report = reconcile(admin, store)
    assert [r.run_id for r in report.restored] == ["dead-b", "dead-a"]
    assert dynamic_configs(cluster) == before
