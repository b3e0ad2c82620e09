"""``kafka-reassign cancel`` and ``status`` against a simulated cluster over TCP.

cancel must stop the running execute, put that run's in-flight partitions back on their
original replicas in their original order, and restore every throttle config to its prior
value - also when the execute's process was killed and cannot do it itself.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from kafka_reassign.cli.main import main
from kafka_reassign.execution.control import RunControl
from kafka_reassign.execution.store import FileExecutionStore
from kafka_reassign.throttle.record import FileRecordStore

PLAN = [{"topic": "orders", "partition": 0, "replicas": [4, 5, 1]},
        {"topic": "orders", "partition": 1, "replicas": [5, 1, 2]}]
OPERATOR_THROTTLE = {"leader.replication.throttled.rate": "250000000"}


@pytest.fixture
def slow_cluster(sim_cluster: Callable[..., Any], snapshot_factory: Callable[..., dict]):
    """Moves that take minutes at 1 MB/s, and an operator's own throttle on broker 1."""
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.throttle.specs import ConfigChange

    cluster = sim_cluster(snapshot_factory(brokers=5, racks=2, topics={
        "orders": {"partitions": 3, "rf": 3, "size_bytes": 200_000_000, "configs": {"min.insync.replicas": "2"}}}),
        time_scale=1.0)
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.alter_configs([ConfigChange("broker", "1", key, None, value) for key, value in OPERATOR_THROTTLE.items()])
    return cluster


def start_execute(cluster: Any, tmp_path: Path, run_id: str) -> subprocess.Popen:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": PLAN}))
    exe = Path(sys.executable).parent / "kafka-reassign"
    proc = subprocess.Popen([str(exe), "execute", "--bootstrap-server", cluster.bootstrap_servers, "--plan", str(plan),
                             "--throttle", "1MB/s", "--record-dir", str(tmp_path / "rec"), "--run-id", run_id,
                             "--poll-interval-seconds", "0.2", "--produce-sample-seconds", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    saved = FileExecutionStore(tmp_path / "rec")
    # The execute saves its first progress just after submitting its first moves.
    moving = lambda: (all(cluster.partition_state("orders", p)["adding"] for p in (0, 1))  # noqa: E731
                      and bool((saved.load(run_id) or {}).get("progress")))
    if not cluster.wait_for(moving, timeout=90):
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the moves never started:\n{out[-3000:]}\n{err[-3000:]}")
    return proc


def assert_reverted_and_restored(cluster: Any, original: dict[int, list[int]], tmp_path: Path, run_id: str) -> None:
    for p, replicas in original.items():
        state = cluster.partition_state("orders", p)
        assert state["adding"] == [] and state["removing"] == []
        assert state["replicas"] == replicas, f"orders-{p} not back to {replicas} in order"
    assert cluster.broker_configs(1) == OPERATOR_THROTTLE
    assert all(not cluster.broker_configs(b) for b in range(2, 6))
    assert not any("throttled.replicas" in k for k in cluster.topic_configs("orders"))
    assert FileRecordStore(tmp_path / "rec").get(run_id).restored
    assert not list((tmp_path / "rec").glob("running-*")) and not list((tmp_path / "rec").glob("cancel-*"))


def test_cancel_stops_the_running_execute_which_reverts_and_restores(slow_cluster, tmp_path, capsys):
    original = {p: slow_cluster.partition_state("orders", p)["replicas"] for p in (0, 1)}
    proc = start_execute(slow_cluster, tmp_path, "to-cancel")
    try:
        bs, rec = slow_cluster.bootstrap_servers, str(tmp_path / "rec")
        assert main(["status", "--bootstrap-server", bs, "--record-dir", rec]) == 0
        status = capsys.readouterr().out
        assert "run to-cancel: in_progress" in status and "orders-0" in status and "in_flight" in status
        assert "broker 1: leader.replication.throttled.rate=1000000" in status   # the lower of ours and theirs
        assert main(["cancel", "--record-dir", rec]) == 0
        assert "run to-cancel cancelled: in-flight moves reverted" in capsys.readouterr().out
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "cancelled by kafka-reassign cancel" in err and "throttle restored" in out
    assert_reverted_and_restored(slow_cluster, original, tmp_path, "to-cancel")


def test_cancel_after_the_execute_was_killed_reverts_and_restores_itself(slow_cluster, tmp_path, capsys):
    original = {p: slow_cluster.partition_state("orders", p)["replicas"] for p in (0, 1)}
    proc = start_execute(slow_cluster, tmp_path, "killed")
    proc.kill()
    proc.communicate(timeout=60)
    rec = str(tmp_path / "rec")
    assert main(["cancel", "--record-dir", rec]) == 2          # cannot revert without the cluster's address
    assert "give --bootstrap-server" in capsys.readouterr().err
    assert main(["cancel", "--record-dir", rec, "--bootstrap-server", slow_cluster.bootstrap_servers]) == 0
    out = capsys.readouterr().out
    assert "its process" in out and "is gone" in out and "run killed cancelled" in out
    assert_reverted_and_restored(slow_cluster, original, tmp_path, "killed")


def test_cancel_with_nothing_running_says_so(tmp_path, capsys):
    assert main(["cancel", "--record-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"kafka-reassign: error: no running execute in {tmp_path}"


def test_status_of_an_execute_not_yet_saved_shows_the_cluster(sim_cluster, snapshot_factory, tmp_path, capsys):
    """Between registering and its first save an execute has no progress: status says so."""
    cluster = sim_cluster(snapshot_factory(brokers=3, topics={"orders": {"partitions": 1, "rf": 1}}))
    RunControl(tmp_path).register("fresh", PLAN, {})
    assert main(["status", "--bootstrap-server", cluster.bootstrap_servers, "--record-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "run fresh: starting, no progress saved yet" in out and "0 reassignment(s) in progress" in out
    assert main(["status", "--bootstrap-server", cluster.bootstrap_servers, "--record-dir", str(tmp_path),
                 "--run-id", "other"]) == 2
    assert "no saved progress of run 'other'" in capsys.readouterr().err
