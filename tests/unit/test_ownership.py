"""The one rule for "which moves in flight are ours", and the throttle kept under them."""
from __future__ import annotations

from kafka_reassign.cluster.state import InFlight, TopicPartition
from kafka_reassign.execution.ownership import is_ours, own_moves_in_flight, ours_among, run_submitted
from kafka_reassign.planning.plan import ReassignmentPlan
from kafka_reassign.run.cancel import cancel_in_flight
from kafka_reassign.throttle.record import MemoryRecordStore, ThrottleRecord
from kafka_reassign.throttle.restore import MOVES_PENDING, restore_after_run
from kafka_reassign.throttle.specs import ConfigChange

# orders-0 moves from [1, 2, 3] to [4, 2, 3]
MOVING = InFlight(replicas=(4, 1, 2, 3), adding=(4,), removing=(1,))


class FakeAdmin:
    """ListPartitionReassignments and AlterPartitionReassignments only (each call recorded)."""

    def __init__(self, in_flight: dict[TopicPartition, InFlight]) -> None:
        self.in_flight = in_flight
        self.listed: list[list[TopicPartition]] = []
        self.altered: list[dict] = []

    def list_partition_reassignments(self, partitions=None) -> dict[TopicPartition, InFlight]:
        self.listed.append(list(partitions or []))
        return {k: v for k, v in self.in_flight.items() if partitions is None or k in partitions}

    def alter_partition_reassignments(self, targets: dict) -> dict:
        self.altered.append(dict(targets))
        return {k: None for k in targets}

    def topic_metadata(self, topics=None) -> list:
        return []


def test_a_move_is_ours_only_when_our_record_lists_its_target():
    key = ("orders", 0)
    assert is_ours(key, MOVING, {key: [(4, 2, 3)]})
    assert is_ours(key, MOVING, {key: [(5, 2, 3), (4, 2, 3)]}), "any target the record lists"
    assert not is_ours(key, MOVING, {key: [(5, 2, 3)]}), "the cluster now moves it elsewhere"
    assert not is_ours(key, MOVING, {("orders", 1): [(4, 2, 3)]})
    assert not is_ours(key, MOVING, {}) and not is_ours(key, MOVING, None)


def test_ours_among_keeps_ours_in_partition_order():
    theirs = InFlight(replicas=(1, 2, 5), adding=(5,))
    got = ours_among({("b", 1): MOVING, ("a", 0): MOVING, ("c", 0): theirs},
                     {("a", 0): [(4, 2, 3)], ("b", 1): [(4, 2, 3)], ("c", 0): [(9, 9, 9)]})
    assert list(got) == [("a", 0), ("b", 1)]


def test_own_moves_in_flight_asks_only_for_what_the_record_lists():
    admin = FakeAdmin({("orders", 0): MOVING, ("orders", 1): MOVING})
    assert own_moves_in_flight(admin, {}) == {} and admin.listed == [], "nothing submitted: no request"
    assert list(own_moves_in_flight(admin, {("orders", 0): [(4, 2, 3)]})) == [("orders", 0)]
    assert admin.listed == [[("orders", 0)]]


def test_run_submitted_reads_the_run_record():
    store = MemoryRecordStore()
    assert run_submitted(store, "r1") == {}
    rec = ThrottleRecord.new("r1", "c", [])
    rec.add_submitted({("orders", 0): [4, 2, 3]})
    store.put(rec)
    assert run_submitted(store, "r1") == {("orders", 0): [(4, 2, 3)]}


def test_cancel_leaves_a_move_to_our_plan_target_that_our_record_does_not_list():
    # Someone else moves orders-0 exactly where our plan goes: not ours, never cancelled.
    admin = FakeAdmin({("orders", 0): MOVING})
    plan = ReassignmentPlan.from_json({"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [4, 2, 3]}]})
    out = cancel_in_flight(admin, plan, submitted={})
    assert out["cancelled"] == [] and out["left"] == ["orders-0"] and admin.altered == []
    out = cancel_in_flight(admin, plan, submitted={("orders", 0): [(4, 2, 3)]})
    assert out["cancelled"] == ["orders-0"] and out["left"] == []
    assert admin.altered[0] == {("orders", 0): None}


def test_restore_after_run_keeps_the_throttle_while_our_moves_are_in_flight():
    store = MemoryRecordStore()
    rec = ThrottleRecord.new("r1", "c", [ConfigChange("broker", "1", "leader.replication.throttled.rate",
                                                      None, "1000")])
    rec.add_submitted({("orders", 0): [4, 2, 3]})
    store.put(rec)
    result = restore_after_run(FakeAdmin({("orders", 0): MOVING}), store, "r1")
    assert set(result.pending) == {MOVES_PENDING} and "orders-0" in result.pending[MOVES_PENDING]
    assert result.changes == [] and not store.get("r1").restored
    assert store.get("r1").pending == result.pending, "left pending for the reconciler"
