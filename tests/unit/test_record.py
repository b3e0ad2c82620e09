"""Durable throttle records (kafka_reassign.throttle.record)."""
from __future__ import annotations

import json
import os

import pytest

from kafka_reassign.errors import ThrottleRecordError
from kafka_reassign.throttle.record import FileRecordStore, MemoryRecordStore, RecordStore, ThrottleRecord
from kafka_reassign.throttle.specs import ConfigChange

CHANGES = [ConfigChange("broker", "1", "leader.replication.throttled.rate", None, "1000"),
           ConfigChange("topic", "orders", "leader.replication.throttled.replicas", "0:1", "0:1,3:2")]


@pytest.mark.parametrize("make", [lambda p: FileRecordStore(p / "records"), lambda p: MemoryRecordStore()])
def test_store_protocol(tmp_path, make):
    store = make(tmp_path)
    assert isinstance(store, RecordStore)
    assert store.get("run-1") is None
    rec = ThrottleRecord.new("manual__2026-11-21T23:31:00+00:00", "cluster-a", CHANGES)
    store.put(rec)
    got = store.get(rec.run_id)
    assert got == rec
    assert [r.run_id for r in store.list_unrestored()] == [rec.run_id]
    store.mark_restored(rec.run_id)
    store.mark_restored(rec.run_id)  # idempotent
    assert store.get(rec.run_id).restored and store.list_unrestored() == []


def test_file_store_is_atomic_and_portable(tmp_path):
    store = FileRecordStore(tmp_path)
    rec = ThrottleRecord.new("scheduled__2026:x/y", "c", CHANGES)
    store.put(rec)
    files = os.listdir(tmp_path)
    assert files == [store.path_for(rec.run_id).name], "no temp files left behind"
    assert "/" not in files[0] and ":" not in files[0]
    data = json.loads((tmp_path / files[0]).read_text())
    assert data["changes"][1]["prior"] == "0:1" and data["version"] == 1
    # A second store on the same directory (another process) sees it.
    assert FileRecordStore(tmp_path).get(rec.run_id) == rec


def test_unreadable_record_is_a_clear_error(tmp_path):
    store = FileRecordStore(tmp_path)
    store.path_for("bad").write_text("{not json")
    with pytest.raises(ThrottleRecordError, match="cannot read throttle record"):
        store.get("bad")


def test_mark_restored_unknown_run(tmp_path):
    with pytest.raises(ThrottleRecordError, match="no throttle record"):
        FileRecordStore(tmp_path).mark_restored("nope")


def test_submitted_keeps_only_the_moves_still_in_flight():
    rec = ThrottleRecord.new("r", "c", [])
    assert rec.add_submitted({("t", 0): [4, 2, 3], ("t", 1): [5, 3, 1]})
    assert not rec.add_submitted({("t", 0): [4, 2, 3]})  # nothing new
    # t-1 finished; t-0 gets its next step: t-1 goes, t-0 keeps both of its targets
    assert rec.add_submitted({("t", 0): [4, 5, 3]}, moving=[("t", 0)])
    assert rec.submitted == {("t", 0): ((4, 2, 3), (4, 5, 3))}
    assert rec.add_submitted({}, moving=[])  # everything finished: dropping is a change too
    assert rec.submitted == {}
    assert ThrottleRecord.from_json(rec.to_json()) == rec


def test_submitted_moving_as_a_set_or_any_iterable_alike():
    a, b = ThrottleRecord.new("r", "c", []), ThrottleRecord.new("r", "c", [])
    for rec, moving in ((a, {("t", 0)}), (b, iter([("t", 0)]))):
        rec.add_submitted({("t", 0): [1, 2], ("t", 1): [2, 3], ("t", 2): [3, 4]})
        assert rec.add_submitted({("t", 2): [3, 5]}, moving=moving)  # t-1 finished; t-2 is being submitted
    assert a.submitted == b.submitted == {("t", 0): ((1, 2),), ("t", 2): ((3, 4), (3, 5))}


def test_memory_store_hands_out_copies_that_survive_a_json_round_trip():
    store = MemoryRecordStore()
    rec = ThrottleRecord.new("r", "c", [ConfigChange("topic", "t", "follower.replication.throttled.replicas",
                                                     None, "0:1")])
    rec.add_submitted({("t", 0): [1, 2]})
    store.put(rec)
    rec.changes.clear()
    rec.add_submitted({("t", 0): [9]})
    got = store.get("r")
    assert got is not None and len(got.changes) == 1 and got.submitted == {("t", 0): ((1, 2),)}
    assert rec.submitted == {("t", 0): ((1, 2), (9,))}
    got.pending["topic t"] = "unreachable"
    assert store.get("r").pending == {}
    assert ThrottleRecord.from_json(json.loads(json.dumps(got.to_json()))) == got
