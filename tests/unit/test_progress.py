"""Per-replica progress rows, summary and table (kafka_reassign.progress); stalls: test_executor_state."""
from __future__ import annotations

import json

from kafka_reassign.progress import BatchProgress
from kafka_reassign.state import ClusterState, InFlight, ReplicaLogDir
from kafka_reassign.steps import Batch, StepMove


def state(isr=(1, 2, 3, 4), replicas=(1, 2, 3, 4), alive=(1, 2, 3, 4, 5), bytes_in=0.0):
    return ClusterState.from_snapshot({
        "version": 1, "brokers": [{"id": i, "alive": i in alive} for i in range(1, 6)],
        "topics": [{"name": "orders", "configs": {"min.insync.replicas": "2"}, "partitions": [
            {"partition": 3, "replicas": list(replicas), "isr": list(isr), "leader": 1, "size_bytes": 1000,
             "bytes_in_per_sec": bytes_in}]}]})


BATCH = Batch(0, [StepMove("orders", 3, (1, 2, 3), (4, 1, 2), size_bytes=1000)])
MOVING = {("orders", 3): InFlight((4, 1, 2, 3), adding=(4,), removing=(3,))}


def dirs(new_size):
    rows = [ReplicaLogDir(b, "/d1", "orders", 3, 1000, 0, False) for b in (1, 2, 3)]
    if new_size is not None:
        rows.append(ReplicaLogDir(4, "/d1", "orders", 3, new_size, 0, False))
    return rows


def test_rows_statuses_and_summary():
    prog = BatchProgress.build(BATCH, MOVING, state(isr=(1, 2, 3)), dirs(250), now=10.0)
    by = {r.broker: r for r in prog.rows}
    assert by[4].status_text == "Behind 750 bytes (750 B)" and by[4].role == "adding"
    assert by[1].status_text == "In sync" and by[3].role == "removing" and by[3].status_text == "Leaving"
    assert prog.bytes_total == 1000 and prog.bytes_left == 750 and prog.bytes_moved == 250
    assert not prog.done and prog.pending_partitions == ["orders-3"]
    later = BatchProgress.build(BATCH, MOVING, state(isr=(1, 2, 3)), dirs(750), previous=prog, now=20.0)
    assert later.rate_bytes_per_sec == 50.0 and later.eta_seconds == 5.0
    table = later.format_table()
    assert "Topic" in table and "Behind 250 bytes" in table and "ETA 5 s" in table
    json.dumps(later.to_json())
    assert BatchProgress.from_json(later.to_json()).bytes_left == 250


def test_done_when_at_target_and_in_sync():
    st = state(isr=(4, 1, 2), replicas=(4, 1, 2))
    prog = BatchProgress.build(BATCH, {}, st, dirs(1000)[:2] + [ReplicaLogDir(4, "/d1", "orders", 3, 1000, 0, False)])
    assert prog.done and prog.bytes_left == 0
    assert {r.broker: r.status for r in prog.rows}[3] == "Removed"


def test_offline_and_unknown_and_under_min_isr():
    prog = BatchProgress.build(BATCH, MOVING, state(isr=(1,), alive=(1, 2, 3, 5)), dirs(None))
    by = {r.broker: r for r in prog.rows}
    assert by[4].status == "Offline"
    assert prog.under_min_isr == ["orders-3"] and "UNDER MIN ISR" in prog.summary()


def test_new_replica_not_created_yet_is_behind_by_the_leader_size():
    prog = BatchProgress.build(BATCH, MOVING, state(isr=(1, 2, 3)), dirs(None))
    assert {r.broker: r.bytes_behind for r in prog.rows}[4] == 1000


def test_log_dir_step_catching_up():
    step = StepMove("orders", 3, (1, 2, 3), (1, 2, 3), ("/d2", "any", "any"), size_bytes=1000)
    st = state(isr=(1, 2, 3), replicas=(1, 2, 3))
    rows = dirs(None) + [ReplicaLogDir(1, "/d2", "orders", 3, 400, 12, True)]
    prog = BatchProgress.build(Batch(1, [step]), {}, st, rows)
    row = [r for r in prog.rows if r.broker == 1][0]
    assert row.status_text == "Catching up (log dir, offset lag 12)" and row.bytes_behind == 600
    assert not prog.done
    done = BatchProgress.build(Batch(1, [step]), {}, st,
                               [ReplicaLogDir(1, "/d2", "orders", 3, 1000, 0, False)] + dirs(None)[1:])
    assert done.done
