"""Tiered storage (KIP-405, KIP-1023) end to end on the simulator.

Tiered storage is exercised on the simulator, not on real Kafka: Kafka's test remote storage
(LocalTieredStorage) is not loaded here. The simulator keeps a tiered partition's remote part
out of its log (DescribeLogDirs reports the local log only, a new replica copies only it, as a
Kafka 4.x follower starts at the last tiered offset) and answers ListOffsets -2/-4/-1 over both
parts, which is all the tool reads of a tiered topic.

One cluster: ``logs`` tiered (2 MB local, 300 MB remote per partition) and ``plain`` untiered.
"""
from __future__ import annotations

import pytest

from kafka_reassign.cli.main import main
from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.cluster.snapshot import load_snapshot, read_cluster_snapshot
from kafka_reassign.planning.estimate import Estimate
from kafka_reassign.planning.spark import plan
from kafka_reassign.rehearsal.rehearse import rehearse
from kafka_reassign.run.prepare import prepare
from kafka_reassign.run.reassign import run_reassignment
from kafka_reassign.throttle.record import MemoryRecordStore
from sim_snapshots import make_snapshot

MB = 1_000_000
LOCAL, REMOTE, THROTTLE = 2 * MB, 300 * MB, 1 * MB
FAST = {"poll_interval_seconds": 0.05, "stall_window_seconds": 30, "batch_timeout_minutes": 5}
MOVE = {"version": 1, "partitions": [{"topic": "logs", "partition": 0, "replicas": [3, 4]},
                                     {"topic": "plain", "partition": 0, "replicas": [3, 4]}]}


def _cluster_snapshot() -> dict:
    snap = make_snapshot(brokers=4, racks=2, dirs_per_broker=1, topics={
        "logs": {"partitions": 2, "rf": 2, "size_bytes": LOCAL, "configs": {"remote.storage.enable": "true"},
                 "replicas": [[1, 2], [2, 1]]},
        "plain": {"partitions": 2, "rf": 2, "size_bytes": LOCAL, "replicas": [[1, 2], [2, 1]]}})
    for p in snap["topics"][0]["partitions"]:
        p["remote_bytes"] = REMOTE
    return snap


@pytest.fixture
def tiered(sim_cluster):
    cluster = sim_cluster(_cluster_snapshot(), time_scale=10.0)
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers, client_id="tiered") as admin:
        yield cluster, admin


def test_snapshot_plan_and_estimate_count_the_local_bytes_and_show_the_remote_ones(tiered, tmp_path, capsys):
    cluster, admin = tiered
    out = tmp_path / "snap.json"
    assert main(["snapshot", "--bootstrap-server", cluster.bootstrap_servers, "--out", str(out)]) == 0
    assert "600.0 MB in remote storage (tiered topics: moves do not copy it)" in capsys.readouterr().out
    snap = load_snapshot(out)
    topics = {t["name"]: t for t in snap["topics"]}
    assert topics["logs"]["configs"]["remote.storage.enable"] == "true"
    for p in topics["logs"]["partitions"]:  # estimated from ListOffsets -2/-4/-1: within rounding
        assert p["size_bytes"] == pytest.approx(LOCAL, rel=0.01)
        assert p["remote_bytes"] == pytest.approx(REMOTE, rel=0.01)
    assert all("remote_bytes" not in p for p in topics["plain"]["partitions"])
    assert "remote.storage.enable" not in topics["plain"]["configs"]

    planned = plan(snap, "remove-brokers", engine="local", throttle_bytes_per_sec=THROTTLE, brokers=[1])
    s = planned.summary
    assert s["data_to_move_bytes"] == pytest.approx(LOCAL * s["replica_movements"], rel=0.01)
    assert s["remote_bytes_not_copied"] == pytest.approx(REMOTE * 2, rel=0.01)  # both logs partitions move
    assert s["estimated_seconds"] < 60, "the local bytes at 1 MB/s, not the remote ones"

    prepared = prepare(admin, MOVE, {"throttle_bytes_per_sec": THROTTLE, "dry_run": True}, produce_rates={})
    est = Estimate.from_json(prepared.estimate)
    assert est.bytes_total == pytest.approx(4 * LOCAL, rel=0.01)  # two new replicas of each partition
    assert est.detail["remote_bytes"] == pytest.approx(REMOTE, rel=0.01)  # logs-0 only: plain is untiered
    assert "in remote storage not copied" in prepared.report()
    assert cluster.write_count == 0


def test_a_real_move_copies_only_the_local_log(tiered):
    cluster, admin = tiered
    store = MemoryRecordStore()
    start = cluster.sim_time()
    # no produce to sample (nobody writes): the simulated time is the moving time
    result = run_reassignment(admin, MOVE, {"throttle_bytes_per_sec": THROTTLE, **FAST}, store, run_id="tiered",
                              produce_rates={})
    took = cluster.sim_time() - start
    assert result.progress is not None and result.progress.outcome == "done"
    assert result.progress.bytes_total == pytest.approx(4 * LOCAL, rel=0.05)
    state = cluster.partition_state("logs", 0)
    assert state["replicas"] == [3, 4] and all(state["sizes"][b] == pytest.approx(LOCAL, rel=0.01) for b in (3, 4))
    # broker 1 leads both partitions and sends 4 local copies of 2 MB at 1 MB/s: about 8 s;
    # copying the 300 MB remote part too would take 300 s and more
    expected = Estimate.from_json(result.prepared.estimate).seconds
    assert 0.5 * expected <= took <= 3 * expected + 5, (took, expected)
    assert took < REMOTE / THROTTLE / 10


def test_rehearsal_moves_the_local_bytes_and_reports_the_remote_ones(tiered):
    cluster, admin = tiered
    report = rehearse(read_cluster_snapshot(admin), MOVE, {"throttle_bytes_per_sec": THROTTLE})
    assert report.outcome == "done" and report.predicted_seconds is not None
    assert report.bytes_total == pytest.approx(4 * LOCAL, rel=0.01)
    assert report.predicted_seconds < REMOTE / THROTTLE / 10
    assert "in remote storage, not copied" in report.format().splitlines()[0]
