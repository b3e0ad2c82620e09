"""``kafka-reassign`` against the simulated cluster (in-process main() and the console script)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from kafka_reassign.cli.main import main
from kafka_reassign.throttle.record import FileRecordStore, ThrottleRecord
from kafka_reassign.throttle.specs import ConfigChange

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cluster(sim_cluster: Callable[..., Any], snapshot_factory: Callable[..., dict]):
    return sim_cluster(snapshot_factory(brokers=5, racks=2, topics={
        "orders": {"partitions": 4, "rf": 3, "size_bytes": 10_000_000, "configs": {"min.insync.replicas": "2"}}}),
        time_scale=20.0)


def write_plan(tmp_path: Path, parts: list[dict]) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"version": 1, "partitions": parts}))
    return str(path)


GOOD = [{"topic": "orders", "partition": 0, "replicas": [4, 5, 1]},
        {"topic": "orders", "partition": 1, "replicas": [5, 1, 2], "log_dirs": ["any", "any", "any"]}]
FAST = ["--poll-interval-seconds", "0.05", "--stall-window-seconds", "10", "--batch-timeout-minutes", "1"]


def test_validate_ok_and_bad(cluster, tmp_path, capsys):
    bs = cluster.bootstrap_servers
    assert main(["validate", "--bootstrap-server", bs, "--plan", write_plan(tmp_path, GOOD)]) == 0
    assert "plan OK: 2 partition(s)" in capsys.readouterr().out
    bad = write_plan(tmp_path, [{"topic": "orders", "partition": 7, "replicas": [1, 2, 3]},
                                {"topic": "orders", "partition": 0, "replicas": [1, 2, "3"]}])
    assert main(["validate", "--bootstrap-server", bs, "--plan", bad]) == 2
    err = capsys.readouterr().err
    assert "partitions[0] (orders-7): unknown partition: orders has 4 partitions (0..3)" in err
    assert "partitions[1] (orders-0): replicas[2] must be an integer broker id" in err
    assert cluster.write_count == 0


def test_a_misspelt_topic_is_one_message(cluster, tmp_path, capsys):
    plan = write_plan(tmp_path, [{"topic": "ordres", "partition": 0, "replicas": [4, 5, 1]}])
    assert main(["validate", "--bootstrap-server", cluster.bootstrap_servers, "--plan", plan]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == ["kafka-reassign: error: plan rejected, nothing was written (1 problem):",
                                "  - partitions[0] (ordres-0): unknown topic 'ordres'"]


def test_generate_output_is_accepted_and_drift_is_reported(cluster, tmp_path, capsys):
    bs = cluster.bootstrap_servers
    now = cluster.partition_state("orders", 0)["replicas"]
    then = {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": now, "log_dirs": ["any"] * 3},
                                         {"topic": "orders", "partition": 1, "replicas": [9, 8, 7]}]}
    text = ("Current partition replica assignment\n" + json.dumps(then) + "\n\n"
            "Proposed partition reassignment configuration\n" + json.dumps({"version": 1, "partitions": GOOD}) + "\n")
    path = tmp_path / "generated.txt"
    path.write_text(text)
    assert main(["validate", "--bootstrap-server", bs, "--plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "plan OK: 2 partition(s)" in out
    assert "warning: the cluster changed since the plan was generated: orders-1: [9, 8, 7] then" in out
    assert "orders-0" not in out.split("generated:")[1]
    assert cluster.write_count == 0


def test_snapshot_then_validate_offline(cluster, tmp_path, capsys):
    out = tmp_path / "snap.json"
    assert main(["snapshot", "--bootstrap-server", cluster.bootstrap_servers, "--out", str(out)]) == 0
    snap = json.loads(out.read_text())
    assert len(snap["brokers"]) == 5 and snap["topics"][0]["partitions"][0]["size_bytes"] == 10_000_000
    # the simulator speaks DescribeLogDirs v5 (KIP-1066): no cordon note, and nothing is cordoned yet
    assert "does not support cordons" not in capsys.readouterr().err
    assert not any(d.get("cordoned") for b in snap["brokers"] for d in b["log_dirs"])
    assert main(["validate", "--snapshot", str(out), "--plan", write_plan(tmp_path, GOOD)]) == 0
    assert cluster.write_count == 0


def test_cordon_on_an_older_cluster_is_refused_with_nothing_written(sim_cluster, snapshot_factory, tmp_path,
                                                                    capsys):
    cluster = sim_cluster(snapshot_factory(brokers=3, topics={"orders": {"partitions": 2, "rf": 2}}),
                          cordons=False)  # a Kafka 4.1 cluster: DescribeLogDirs v4
    records = tmp_path / "rec"
    rc = main(["cordon", "--bootstrap-server", cluster.bootstrap_servers, "--brokers", "2",
               "--record-dir", str(records)])
    err = capsys.readouterr().err
    assert rc == 2 and "cordon refused, nothing was written" in err and "needs Kafka 4.3+" in err
    assert cluster.write_count == 0 and not list(records.glob("*.json"))
    rc = main(["uncordon", "--bootstrap-server", cluster.bootstrap_servers, "--brokers", "2",
               "--record-dir", str(records)])
    assert rc == 2 and "no cordon of broker 2 is recorded" in capsys.readouterr().err


def test_execute_dry_run_writes_nothing(cluster, tmp_path, capsys):
    rc = main(["execute", "--bootstrap-server", cluster.bootstrap_servers, "--plan", write_plan(tmp_path, GOOD),
               "--throttle", "5000000", "--dry-run", "--record-dir", str(tmp_path / "rec"), *FAST])
    assert rc == 0
    out = capsys.readouterr().out
    assert "KIP-435 step(s)" in out and "SET    broker 4: follower.replication.throttled.rate = '5000000'" in out
    assert "dry run: nothing written" in out
    assert cluster.write_count == 0


def test_execute_full_run_restores_throttle(cluster, tmp_path, capsys):
    rc = main(["execute", "--bootstrap-server", cluster.bootstrap_servers, "--plan", write_plan(tmp_path, GOOD),
               "--throttle", "20000000", "--max-partition-movements", "1", "--record-dir", str(tmp_path / "rec"),
               "--run-id", "cli-run", *FAST])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert cluster.partition_state("orders", 0)["replicas"] == [4, 5, 1]
    assert cluster.partition_state("orders", 1)["replicas"] == [5, 1, 2]
    assert all(not cluster.broker_configs(b) for b in range(1, 6))
    assert "throttle.replicas" not in json.dumps(cluster.topic_configs("orders"))
    assert FileRecordStore(tmp_path / "rec").get("cli-run").restored
    assert "steps done" in out and "run cli-run finished: 4 step(s) done" in out


@pytest.mark.parametrize("args, fragment", [
    (["--throttle", "0"], "throttle_bytes_per_sec: must be an integer >= 1024, got 0"),
    (["--max-partition-movements", "0"], "max_partition_movements: must be an integer >= 1"),
    (["--batch-timeout-minutes", "-1"], "batch_timeout_minutes: must be a number > 0"),
])
def test_execute_bad_params_exit_2(cluster, tmp_path, capsys, args, fragment):
    rc = main(["execute", "--bootstrap-server", cluster.bootstrap_servers, "--plan", write_plan(tmp_path, GOOD),
               "--record-dir", str(tmp_path / "rec"), *FAST, *args])
    assert rc == 2
    assert fragment in capsys.readouterr().err
    assert cluster.write_count == 0


def test_status_and_restore(cluster, tmp_path, capsys):
    from kafka_reassign.cluster.admin import KafkaAdmin
    bs = cluster.bootstrap_servers
    # A run that died: its record is unrestored and its throttle still set.
    store = FileRecordStore(tmp_path / "rec")
    changes = [ConfigChange("broker", "3", "leader.replication.throttled.rate", None, "1000"),
               ConfigChange("broker", "2", "follower.replication.throttled.rate", None, "1000")]
    store.put(ThrottleRecord.new("dead-run", None, changes))
    with KafkaAdmin(bootstrap_servers=bs) as admin:
        admin.alter_configs(changes + [
            ConfigChange("topic", "orders", "leader.replication.throttled.replicas", None, "2:3,2:4,2:5"),
            ConfigChange("topic", "orders", "follower.replication.throttled.replicas", None, "2:2")])
        admin.alter_partition_reassignments({("orders", 2): [2, 4, 5]})
    assert main(["status", "--bootstrap-server", bs]) == 0
    out = capsys.readouterr().out
    assert "1 reassignment(s) in progress" in out and "orders-2" in out and "in_flight" in out
    assert "broker 3: leader.replication.throttled.rate=1000" in out
    assert main(["restore", "--bootstrap-server", bs, "--record-dir", str(tmp_path / "rec")]) == 0
    out = capsys.readouterr().out
    assert "run dead-run: restored 2 config(s)" in out
    assert not cluster.broker_configs(2) and not cluster.broker_configs(3)
    assert main(["restore", "--bootstrap-server", bs, "--record-dir", str(tmp_path / "rec")]) == 0
    assert "nothing to restore" in capsys.readouterr().out
    assert main(["restore", "--bootstrap-server", bs, "--record-dir", str(tmp_path / "nope")]) == 2


def test_console_script_and_unreachable_cluster(tmp_path):
    exe = Path(sys.executable).parent / "kafka-reassign"
    proc = subprocess.run([str(exe), "validate", "--bootstrap-server", "127.0.0.1:1", "--connect-timeout", "1",
                           "--plan", write_plan(tmp_path, GOOD)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    # One line naming the address: kafka-python's retry chatter stays hidden without -v.
    assert proc.stderr.splitlines() == ["kafka-reassign: error: cannot reach Kafka at 127.0.0.1:1 within 1 s: "
                                        "check the address, the port and that the brokers are up"]
    proc = subprocess.run([str(exe), "execute", "--plan", "x.json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--bootstrap-server" in proc.stderr


def test_sigterm_mid_run_cancels_and_restores(sim_cluster, snapshot_factory, tmp_path):
    import signal
    import time
    cluster = sim_cluster(snapshot_factory(brokers=5, racks=2, topics={
        "orders": {"partitions": 2, "rf": 3, "size_bytes": 200_000_000, "configs": {"min.insync.replicas": "2"}}}),
        time_scale=1.0)
    exe = Path(sys.executable).parent / "kafka-reassign"
    proc = subprocess.Popen([str(exe), "execute", "--bootstrap-server", cluster.bootstrap_servers,
                             "--plan", write_plan(tmp_path, GOOD[:1]), "--throttle", "1000000",
                             "--record-dir", str(tmp_path / "rec"), "--run-id", "term", *FAST],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert cluster.wait_for(lambda: bool(cluster.partition_state("orders", 0)["adding"]), timeout=60)
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "throttle restored" in out
    assert cluster.partition_state("orders", 0)["adding"] == []
    assert cluster.partition_state("orders", 0)["replicas"] == [1, 2, 3]
    assert all(not cluster.broker_configs(b) for b in range(1, 6))
    assert FileRecordStore(tmp_path / "rec").get("term").restored


def test_plan_subcommand_is_delegated(capsys):
    try:
        import kafka_reassign.planning.spark.command  # noqa: F401
    except ImportError:
        assert main(["plan", "--snapshot", "s.json", "--goal", "rebalance", "--out", "p.json"]) == 1
        assert "the planner is not installed" in capsys.readouterr().err
        return
    with pytest.raises(SystemExit) as info:
        main(["plan", "--help"])
    assert info.value.code == 0
    assert "--goal" in capsys.readouterr().out
