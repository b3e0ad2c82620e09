"""What a notification says about a run's leftovers (brokers, keys, exact undo commands)."""
from __future__ import annotations

from kafka_reassign.throttle.notices import leftover_throttle_text, run_summary_text
from kafka_reassign.throttle.record import ThrottleRecord
from kafka_reassign.throttle.specs import ConfigChange


def _record(restored: bool = False) -> ThrottleRecord:
    rec = ThrottleRecord.new("manual__1", "c1", [
        ConfigChange("broker", "3", "leader.replication.throttled.rate", None, "50000000"),
        ConfigChange("broker", "3", "follower.replication.throttled.rate", "9000000", "50000000"),
        ConfigChange("broker", "12", "leader.replication.throttled.rate", None, "50000000"),
        ConfigChange("topic", "orders", "leader.replication.throttled.replicas", "5:6", "0:1,0:2,5:6"),
    ])
    rec.restored = restored
    return rec


def test_leftovers_name_each_broker_and_give_exact_undo_commands():
    lines = leftover_throttle_text(_record(), "b1:9092")
    text = "\n".join(lines)
    assert lines[0] == "Throttle left behind by run manual__1: broker(s) 3, 12; topic(s) orders."
    assert "kafka_throttle_reconciler" in text
    # A prior value is put back, a key that was not set is deleted; list values are bracketed.
    assert ("kafka-configs.sh --bootstrap-server b1:9092 --entity-type brokers --entity-name 3 --alter "
            "--add-config 'follower.replication.throttled.rate=9000000' "
            "--delete-config leader.replication.throttled.rate") in text
    assert "--entity-type topics --entity-name orders --alter --add-config 'leader.replication.throttled.replicas=5:6'" in text


def test_a_partial_restore_names_only_the_pending_broker():
    rec = _record()
    rec.pending = {"broker 12": "unreachable (UnknownBrokerIdError: 12)"}
    lines = leftover_throttle_text(rec, "b1:9092")
    assert lines[0] == "Throttle left behind by run manual__1: broker(s) 12."


def test_a_restored_record_leaves_nothing_to_say():
    assert leftover_throttle_text(_record(restored=True)) == []
    assert leftover_throttle_text(None) == []
    subject, body = run_summary_text(dag_id="kafka_reassign", run_id="r1", state="failed",
                                     failed_tasks=["batches.wait"], error="stalled", record=_record(True))
    assert subject == "[kafka-reassign] kafka_reassign r1: FAILED"
    assert "Failed task(s): batches.wait." in body and "No throttle of this run is left" in body


def test_the_subject_shouts_when_a_throttle_is_left():
    subject, body = run_summary_text(dag_id="kafka_reassign", run_id="r1", state="failed", record=_record())
    assert subject.endswith("THROTTLE LEFT ON THE CLUSTER")
    assert "broker(s) 3, 12" in body
