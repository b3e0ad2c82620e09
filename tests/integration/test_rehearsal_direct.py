"""The rehearsal's direct admin side by side with the wire: the same calls on the same simulated
cluster, through kafka-python over TCP and answered in-process, give equal results."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import pytest

from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.errors import KafkaAdminError
from kafka_reassign.rehearsal.direct import DirectAdmin
from kafka_reassign.throttle.specs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS, ConfigChange

TOPICS = {"orders": {"partitions": 3, "rf": 3, "size_bytes": 40_000_000, "configs": {"min.insync.replicas": "2"}},
          "clicks": {"partitions": 2, "rf": 2, "size_bytes": 10_000_000}}
KEYS = [("orders", 0), ("orders", 1), ("orders", 2), ("clicks", 0), ("clicks", 1), ("orders", 9), ("nope", 0)]


@pytest.fixture
def pair(sim_cluster: Callable[..., Any], snapshot_factory: Callable[..., dict]):
    """One simulated cluster on virtual time, a wire KafkaAdmin and a DirectAdmin of it."""
    cluster = sim_cluster(snapshot_factory(brokers=5, racks=2, topics=TOPICS), time_scale=0.0)
    wire, direct = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers), DirectAdmin(cluster)
    yield cluster, wire, direct
    wire.close()
    direct.close()


def _throttled_moves(admin: Any) -> None:
    """Two moves held in flight by a low throttle, one adding a replica on broker 5."""
    rates = [ConfigChange("broker", str(b), k, None, "100000") for b in range(1, 6) for k in (LEADER_RATE, FOLLOWER_RATE)]
    lists = [ConfigChange("topic", "orders", LEADER_REPLICAS, None, "*"),
             ConfigChange("topic", "orders", FOLLOWER_REPLICAS, None, "*")]
    admin.alter_configs(rates + lists)
    assert admin.alter_partition_reassignments({("orders", 0): [5, 2, 3], ("orders", 1): [2, 3, 5]}) == {
        ("orders", 0): None, ("orders", 1): None}


def _reads(admin: Any, answering: tuple[int, ...] = (1, 2, 3, 4, 5)) -> dict[str, Any]:
    """Every read the direct admin answers itself, in the domain's types (configs of ``answering`` brokers)."""
    brokers = [1, 2, 3, 4, 5]
    return {
        "listing": admin.list_partition_reassignments(),
        "listing of some": admin.list_partition_reassignments(KEYS),
        "partitions": admin.partition_metadata(KEYS),
        "topics": admin.topic_metadata(None),
        "named topics": admin.topic_metadata(["orders", "nope", "bad name!"]),
        "log dirs": sorted(map(repr, admin.describe_log_dirs(brokers))),
        "log dirs of some": sorted(map(repr, admin.describe_log_dirs(brokers, KEYS))),
        "log dirs per broker": sorted(map(repr, admin.describe_log_dirs(brokers, {1: KEYS[:2], 5: KEYS[:1]}))),
        "configs": admin.describe_sourced(answering, ["orders", "clicks", "nope"], [LEADER_RATE, FOLLOWER_REPLICAS,
                                                                                 "min.insync.replicas"]),
        "every config": admin.describe_configs([answering[-1]], ["orders"]),
        # The controller a broker names is a random live broker at each request, as in KRaft; a
        # cluster's id is its own (twin clusters are compared too).
        "state": replace(admin.cluster_state(), controller_id=-1, cluster_id=""),
    }


def test_reads_agree_with_the_wire_at_rest_in_flight_and_with_a_broker_stopped(pair) -> None:
    cluster, wire, direct = pair
    assert _reads(direct) == _reads(wire)
    _throttled_moves(wire)
    # and a copy between broker 3's log dirs (KIP-113), slowed so its future replica lags
    wire.alter_configs([ConfigChange("broker", "3", "replica.alter.log.dirs.io.max.bytes.per.second", None, "100000")])
    assert wire.alter_replica_log_dirs({("orders", 2, 3): "/data/d1"}) == {("orders", 2, 3): None}
    cluster.model.advance_by(30.0)  # part of the copies made: sizes, lag and ISR differ from the start
    in_flight = _reads(wire)
    assert set(in_flight["listing"]) == {("orders", 0), ("orders", 1)}
    assert any("is_future=True" in r and "size=40000000" not in r for r in in_flight["log dirs"])
    assert _reads(direct) == in_flight
    cluster.stop_broker(4)
    stopped = _reads(wire, answering=(1, 2, 3, 5))
    assert 4 not in {int(r.split("broker=")[1].split(",")[0]) for r in stopped["log dirs"]}
    assert _reads(direct, answering=(1, 2, 3, 5)) == stopped
    cluster.stop_broker(2)
    cluster.stop_broker(3)  # clicks-1 (replicas 2, 3) has no live replica: no leader
    offline = _reads(wire, answering=(1, 5))
    assert offline["partitions"][("clicks", 1)].leader == -1
    assert _reads(direct, answering=(1, 5)) == offline
    # A stopped broker's configs: asked over the wire, failing as they do there.
    with pytest.raises(KafkaAdminError) as by_wire:
        wire.describe_configs([4], [], [LEADER_RATE])
    with pytest.raises(KafkaAdminError) as by_direct:
        direct.describe_configs([4], [], [LEADER_RATE])
    assert str(by_direct.value) == str(by_wire.value)
    # Everything was answered here, but the stopped broker's log dirs: asked over the wire (and failed).
    assert set(direct.direct_calls) == {"ListPartitionReassignments", "Metadata", "DescribeLogDirs", "DescribeConfigs"}


def _write_results(admin: Any) -> list[Any]:
    """The same writes, valid and refused; each one's result or error."""
    def outcome(fn: Callable[[], Any]) -> Any:
        try:
            return fn(), admin.list_partition_reassignments()  # the listing follows every change
        except KafkaAdminError as exc:
            return ("KafkaAdminError", exc.error_name, str(exc))
        except ValueError as exc:
            return ("ValueError", str(exc))
    return [
        outcome(lambda: _throttled_moves(admin)),
        outcome(lambda: admin.alter_partition_reassignments({
            ("orders", 2): [1, 1, 2], ("clicks", 0): [1, 9], ("orders", 7): [1, 2, 3], ("clicks", 1): None})),
        outcome(lambda: admin.alter_partition_reassignments({("orders", 2): []})),
        outcome(lambda: admin.alter_partition_reassignments({("clicks", 0): [1, 2, 3]})),  # a replication factor change
        outcome(lambda: admin.alter_partition_reassignments({("orders", 1): None, ("orders", 0): [5, 2, 4]})),
        outcome(lambda: admin.alter_configs([ConfigChange("broker", "1", LEADER_RATE, None, "not a number")])),
        outcome(lambda: admin.alter_configs([ConfigChange("topic", "orders", "no.such.config", None, "1")])),
        outcome(lambda: admin.alter_configs([ConfigChange("topic", "nope", FOLLOWER_REPLICAS, None, "0:1")])),
        outcome(lambda: admin.alter_configs([ConfigChange("broker", "2", LEADER_RATE, None, "5")], validate_only=True)),
        outcome(lambda: admin.alter_configs([ConfigChange("broker", "3", FOLLOWER_RATE, "100000", None),
                                             ConfigChange("topic", "orders", LEADER_REPLICAS, "*", "0:1,1:2")])),
    ]


def test_writes_agree_with_the_wire_on_twin_clusters(sim_cluster, snapshot_factory) -> None:
    snap = snapshot_factory(brokers=5, racks=2, topics=TOPICS)
    one, two = sim_cluster(snap, time_scale=0.0), sim_cluster(snap, time_scale=0.0)
    with KafkaAdmin(bootstrap_servers=one.bootstrap_servers) as wire, DirectAdmin(two) as direct, \
            KafkaAdmin(bootstrap_servers=two.bootstrap_servers) as reader:
        by_wire, by_direct = _write_results(wire), _write_results(direct)
        assert by_direct == by_wire
        refused, listing = by_wire[1]
        assert listing[("orders", 0)].target == (5, 2, 3)
        assert by_wire[3][1][("clicks", 0)].target == (1, 2, 3)
        assert by_wire[4][1][("orders", 0)].target == (5, 2, 4) and ("orders", 1) not in by_wire[4][1]
        assert refused[("orders", 2)] == refused[("clicks", 0)] == "INVALID_REPLICATION_ASSIGNMENT"  # kafka-python's name of code 39
        assert refused[("orders", 7)] == "UNKNOWN_TOPIC_OR_PARTITION"
        assert refused[("clicks", 1)] == "NO_REASSIGNMENT_IN_PROGRESS"
        assert by_wire[2][0] == "ValueError" and by_wire[5][0] == "KafkaAdminError"
        assert direct.direct_calls["AlterPartitionReassignments"] == 4 and direct.direct_calls["IncrementalAlterConfigs"] == 6
        # The two clusters are in the same state, read over the wire on both.
        assert _reads(reader) == _reads(wire)


def test_a_rehearsal_predicts_the_same_over_the_wire_and_directly(snapshot_factory) -> None:
    from kafka_reassign.rehearsal.rehearse import rehearse
    snap = snapshot_factory(brokers=8, racks=4, topics={
        "orders": {"partitions": 12, "rf": 3, "size_bytes": 30_000_000, "bytes_in_per_sec": 200_000,
                   "configs": {"min.insync.replicas": "2"}},
        "clicks": {"partitions": 6, "rf": 2, "size_bytes": 8_000_000}})
    moves = [{"topic": "orders", "partition": p, "replicas": [(p + i) % 8 + 1 for i in (3, 4, 5)]} for p in range(12)]
    moves += [{"topic": "clicks", "partition": p, "replicas": [(p + 5) % 8 + 1, (p + 6) % 8 + 1]} for p in range(6)]
    moves[0]["log_dirs"] = ["/data/d1", "any", "any"]
    params = {"throttle_bytes_per_sec": 5_000_000, "poll_interval_seconds": 2.0, "max_movements_per_broker": 3}
    wire = rehearse(snap, {"version": 1, "partitions": moves}, params, direct=False).to_json()
    direct = rehearse(snap, {"version": 1, "partitions": moves}, params).to_json()
    assert wire["outcome"] == "done" and wire["predicted_seconds"] > 0
    for run in (wire, direct):
        for cost in ("cpu_seconds", "wall_seconds", "text"):  # the text prints the costs
            run.pop(cost)
        run["estimate"]["detail"].pop("cpu_seconds")
    assert direct == wire
