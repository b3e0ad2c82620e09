"""Pre-flight stall check on the real cluster: a real producer, measured rates, a refused and an accepted throttle.

A partition written at P with k in-sync followers never catches up once the throttle is at or
below about (k+1)P (Kafka counts in-sync followers' fetches in the leader's quota; a little more,
as a catching-up fetch appends only whole batches: planning/catch_up.py). Here one
partition of RF3 is written at about 1 MB/s by a confluent-kafka producer (acks=all), and one
replica of it is to move: k = 2, so the stall point is about 3 MB/s.
"""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from kafka_local.load import create_topic
from kafka_reassign.planning.catch_up import throttle_needed
from real_kafka_checks import placement
from real_kafka_clients import RateProducer, admin, reassignments, set_configs

pytestmark = [pytest.mark.slow]

CLI = str(Path(sys.executable).parent / "kafka-reassign")
BROKERS = [1, 2, 3, 4, 5, 6]
PRODUCE = 1_000_000  # bytes/s
K_IN_SYNC = 2  # [1, 2, 3] -> [1, 2, 6]: followers 2 and 3 stay in sync while 6 catches up
LOW = int(1.5 * PRODUCE)  # above the produce rate, yet below the stall point (k+1)P


def run_cli(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout)


def write_plan(path: Path, topic: str) -> str:
    path.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1, 2, 6]}]}))
    return str(path)


def smallest_named(stderr: str) -> int:
    """The smallest working throttle (bytes/s) the refusal names."""
    m = re.search(r"the smallest throttle that lets every move finish is [^(]+\((\d+)\)", stderr)
    assert m, stderr
    return int(m.group(1))


def cluster_writes_view(bootstrap: str, topic: str) -> dict[str, Any]:
    """What a write to the cluster would change: configs somebody set, reassignments, placement."""
    return {"configs": set_configs(admin(bootstrap), BROKERS, [topic]), "moving": reassignments(bootstrap),
            "placement": placement(bootstrap, topic)}


def test_preflight_measures_a_real_producer_and_refuses_a_stalling_throttle(real_bootstrap, topic_name,
                                                                           tmp_path) -> None:
    topic = topic_name(f"pf-{uuid.uuid4().hex[:6]}")
    create_topic(real_bootstrap, topic, {0: [1, 2, 3]}, {"min.insync.replicas": "2"})
    plan = write_plan(tmp_path / "plan.json", topic)
    before = cluster_writes_view(real_bootstrap, topic)
    with RateProducer(real_bootstrap, topic, 0, PRODUCE) as producer:
        snap_file = tmp_path / "snap.json"
        snap = run_cli("snapshot", "--bootstrap-server", real_bootstrap, "--sample-seconds", "4",
                       "--out", str(snap_file))
        assert snap.returncode == 0, snap.stderr
        measured = _snapshot_rate(snap_file, topic)
        # The tool's measurement (leader log growth) agrees with what the brokers acknowledged.
        assert 0.6 * producer.rate < measured < 1.6 * producer.rate, (measured, producer.rate)
        _offline_refusal(plan, snap_file, topic, measured)
        refused = run_cli("execute", "--bootstrap-server", real_bootstrap, "--plan", plan, "--throttle", str(LOW),
                          "--produce-sample-seconds", "3", "--record-dir", str(tmp_path / "records"))
        after_refusal = cluster_writes_view(real_bootstrap, topic)
        live_smallest = smallest_named(refused.stderr)
        accepted = run_cli("validate", "--bootstrap-server", real_bootstrap, "--plan", plan,
                           "--throttle", str(3 * live_smallest), "--produce-sample-seconds", "3")
    assert not producer.failed, producer.failed[:3]
    # Refused before any write: exit 2, the partition and the smallest working throttle named.
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "pre-flight: moves would stall at this throttle, nothing was written" in refused.stderr
    assert f"{topic}-0" in refused.stderr and "broker(s) 1" in refused.stderr
    assert 0.6 * (K_IN_SYNC + 1) * producer.rate < live_smallest < 1.6 * (K_IN_SYNC + 1) * producer.rate
    assert after_refusal == before
    assert not list((tmp_path / "records").glob("**/*.json")), "a throttle record was written"
    # Above the stall point validate accepts the plan (and writes nothing either).
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert "pre-flight OK: no move stalls at this throttle" in accepted.stdout
    assert cluster_writes_view(real_bootstrap, topic) == before


def _snapshot_rate(path: Path, topic: str) -> float:
    snap = json.loads(path.read_text())
    (t,) = [t for t in snap["topics"] if t["name"] == topic]
    return float(t["partitions"][0]["bytes_in_per_sec"])


def _offline_refusal(plan: str, snap_file: Path, topic: str, measured: float) -> None:
    """validate --snapshot: refused at LOW, naming the stall point of the snapshot's rate, rounded up:
    (k+1)P with the catching-up part counted as real Kafka copies it (planning/catch_up.py)."""
    out = run_cli("validate", "--snapshot", str(snap_file), "--plan", plan, "--throttle", str(LOW))
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"{topic}-0" in out.stderr and "would never finish" in out.stderr
    expected = int(math.floor(throttle_needed(K_IN_SYNC * measured, measured) / 1000.0) + 1) * 1000
    assert abs(smallest_named(out.stderr) - expected) <= 1000, (out.stderr, measured)
