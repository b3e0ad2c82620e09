"""No loss on the real cluster: moves and preferred-leader changes while real clients produce and consume.

An idempotent acks=all confluent-kafka producer writes a numbered sequence into each partition
and a consumer reads along, in threads, while ``kafka-reassign execute`` carries out a plan
that moves replicas and changes every partition's preferred leader (Kafka moves leadership
itself where the old leader leaves; elsewhere the tool's preferred leader election does).
Every acknowledged record must be read exactly once and in order, and no moving partition's
ISR, sampled through metadata requests, may fall below min.insync.replicas.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
import pytest

from kafka_local.load import create_topic, fill
from real_kafka_checks import placement
from real_kafka_clients import Sampler, SequenceClients, admin, partitions, reassignments, wait_for

pytestmark = [pytest.mark.slow]

CLI = str(Path(sys.executable).parent / "kafka-reassign")
MIN_ISR = 2
THROTTLE = "500KB/s"
FILL = 8_000_000  # bytes a moving partition holds: over 500 kB/s x 12 s + 1 MiB, the leader quota's burst
START = {0: [1, 2, 3], 1: [2, 3, 4], 2: [3, 4, 5], 3: [4, 5, 6]}
# Racks: 1,4 = a; 2,5 = b; 3,6 = c. Every target keeps one replica per rack.
TARGET = {
    0: [2, 1, 3],  # same replicas, new preferred leader: only the tool's election moves leadership
    1: [5, 3, 4],  # the leader 2 leaves: Kafka moves leadership when the reassignment completes
    2: [1, 3, 5],  # a new replica becomes preferred leader while the old leader 3 stays
    3: [6, 2, 4],  # a follower is replaced and another follower becomes preferred leader
}


def execute(bootstrap: str, plan_file: Path, record_dir: Path) -> subprocess.CompletedProcess[str]:
    """kafka-reassign execute: two moves at a time, polling twice a second, at a throttle far above the
    in-sync traffic of the test's producer.

    The leader's quota sensor weighs bytes over its 11-12 s span, so a copy smaller than that span's
    allowance (plus one 1 MiB fetch) goes at once and is listed as moving for a sample or two at
    most (seen: one sample of 0.1 s). Each copy (``FILL``) is larger, so it stays in flight about
    one span, for many ISR samples."""
    return subprocess.run([CLI, "execute", "--bootstrap-server", bootstrap, "--plan", str(plan_file),
                           "--throttle", THROTTLE, "--max-partition-movements", "2", "--poll-interval-seconds",
                           "0.5", "--produce-sample-seconds", "1", "--stall-window-seconds", "120",
                           "--batch-timeout-minutes", "3", "--record-dir", str(record_dir)],
                          capture_output=True, text=True, timeout=400)


def test_no_acknowledged_record_is_lost_or_duplicated_during_moves(real_bootstrap, topic_name, tmp_path) -> None:
    topic = topic_name(f"nl-{uuid.uuid4().hex[:6]}")
    create_topic(real_bootstrap, topic, START, {"min.insync.replicas": str(MIN_ISR)})
    fill(real_bootstrap, topic, {p: FILL for p in TARGET if set(TARGET[p]) != set(START[p])})
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r} for p, r in TARGET.items()]}))
    client = admin(real_bootstrap)
    with Sampler(lambda: partitions(client, topic), interval=0.1, name="isr-watch") as watch:
        with SequenceClients(real_bootstrap, topic, len(START), pause=0.02) as clients:
            wait_for(lambda: all(len(clients.read[p]) > 20 for p in START), 60, "records read before the run")
            run = execute(real_bootstrap, plan_file, tmp_path / "records")
            time.sleep(1.0)  # records after the run too
            clients.stop()
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "throttles restored" in run.stdout
    # The plan is in place, each partition led by its preferred leader, nothing left moving.
    assert placement(real_bootstrap, topic) == TARGET
    assert reassignments(real_bootstrap) == {}
    wait_for(lambda: {p: v["leader"] for p, v in partitions(client, topic).items()} == {p: r[0] for p, r in
                                                                                      TARGET.items()},
             30, f"leaders of {topic} are the preferred ones")
    _assert_exactly_once_in_order(clients)
    _assert_isr_never_below_min(watch)


def _assert_exactly_once_in_order(clients: SequenceClients) -> None:
    assert not clients.errors, clients.errors[:3]
    for p, acked in clients.acked.items():
        read = clients.read[p]
        assert len(acked) > 100, f"partition {p}: only {len(acked)} records acknowledged"
        assert acked == sorted(acked), f"partition {p}: acknowledgements out of order"
        # Exactly once, in order: what was read is the acknowledged sequence, no gap, no repeat.
        assert read == acked, f"partition {p}: read {len(read)} records, acknowledged {len(acked)}"


def _assert_isr_never_below_min(watch: Sampler) -> None:
    samples = [s for _, s in watch.results]
    assert len(samples) > 20, f"only {len(samples)} ISR samples ({len(watch.errors)} errors)"
    # A partition is moving while Kafka lists more replicas than its replication factor (adding ones).
    moving = {p for s in samples for p, v in s.items() if len(v["replicas"]) > len(START[p])}
    assert {1, 2, 3} <= moving, f"moves not seen in flight: {moving}"
    smallest = {p: min(len(s[p]["isr"]) for s in samples if p in s) for p in START}
    assert all(n >= MIN_ISR for n in smallest.values()), smallest
    leaders = {p: {s[p]["leader"] for s in samples if p in s} for p in START}
    assert all(-1 not in seen for seen in leaders.values()), f"a partition had no leader: {leaders}"
