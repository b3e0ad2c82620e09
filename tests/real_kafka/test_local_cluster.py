"""kafka-local itself: the cluster the group runs on is what the issue promises."""
from __future__ import annotations

import os

from kafka_local.load import create_topic, fill
from real_kafka_checks import placement


def test_six_brokers_three_racks_two_log_dirs_each(local_kafka, real_bootstrap) -> None:
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=real_bootstrap)
    try:
        brokers = admin.describe_cluster()["brokers"]
    finally:
        admin.close()
    assert sorted(b["broker_id"] for b in brokers) == [1, 2, 3, 4, 5, 6]
    assert {b["broker_id"]: b["rack"] for b in brokers} == {
        1: "rack-a", 2: "rack-b", 3: "rack-c", 4: "rack-a", 5: "rack-b", 6: "rack-c"}
    assert all(len(spec.log_dirs) == 2 for spec in local_kafka.brokers.values())
    assert all(row["running"] for row in local_kafka.status())


def test_topic_is_created_where_asked_and_filled(real_bootstrap, topic_name) -> None:
    name = topic_name("local")
    create_topic(real_bootstrap, name, {0: [1, 2, 3], 1: [4, 5, 6]})
    assert placement(real_bootstrap, name) == {0: [1, 2, 3], 1: [4, 5, 6]}
    assert fill(real_bootstrap, name, {0: 1_000_000, 1: 500_000}) == 1_500_000


def _kafka_local(*args: str) -> "subprocess.CompletedProcess[str]":
    import subprocess
    import sys
    from pathlib import Path
    exe = Path(sys.executable).parent / "kafka-local"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=300)


def test_stop_and_start_broker_from_the_command_line(local_kafka) -> None:
    d = str(local_kafka.directory)
    stopped = _kafka_local("stop-broker", "6", "--dir", d)
    assert stopped.returncode == 0, stopped.stderr
    row = next(r for r in _status(d) if r["node"] == 6)
    assert not row["running"] and not row["registered"]
    started = _kafka_local("start-broker", "6", "--dir", d)
    assert started.returncode == 0, started.stderr
    row = next(r for r in _status(d) if r["node"] == 6)
    assert row["running"] and row["registered"]


def _status(directory: str) -> list[dict]:
    import json
    out = _kafka_local("status", "--dir", directory)
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_a_refused_config_fails_up_naming_it_and_leaves_no_jvm(tmp_path) -> None:
    from kafka_local.jvm import jvms_of
    failed = _kafka_local("up", "--dir", str(tmp_path), "--brokers", "1", "--config", "num.io.threads=0")
    assert failed.returncode == 2
    assert "format of broker-1 failed" in failed.stderr and "num.io.threads" in failed.stderr
    assert jvms_of(tmp_path) == {}


def test_a_broker_dying_at_start_fails_up_and_leaves_no_jvm(tmp_path) -> None:
    import socket
    from kafka_local.jvm import jvms_of
    # The broker's listener port is taken: it exits at start-up, after the controller started.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        failed = _kafka_local("up", "--dir", str(tmp_path), "--brokers", "1",
                              "--config", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                              "--config", f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}", "--timeout", "120")
    assert failed.returncode == 2
    assert "broker-1 exited during start-up" in failed.stderr
    assert jvms_of(tmp_path) == {}


def test_no_jvm_outlives_its_owner_killed_with_sigkill(tmp_path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time
    from kafka_local.jvm import jvms_of
    # The owner: a process that starts a one-broker cluster with itself as owner, then waits.
    code = ("import sys, time; from kafka_local import LocalKafka; import os; "
            f"LocalKafka({str(tmp_path)!r}, 1, owner_pid=os.getpid()).up(); print('up', flush=True); time.sleep(600)")
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "up"
        assert len(jvms_of(tmp_path)) == 2  # the controller and the broker
    finally:
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
    deadline = time.monotonic() + 30
    while jvms_of(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert jvms_of(tmp_path) == {}, "the watchdog kills the cluster of a dead owner"


def test_down_stops_every_jvm(tmp_path) -> None:
    from kafka_local import LocalKafka
    from kafka_local.jvm import jvms_of
    cluster = LocalKafka(tmp_path, 1, owner_pid=os.getpid())
    cluster.up()
    assert len(jvms_of(tmp_path)) == 2
    down = _kafka_local("down", "--dir", str(tmp_path))
    assert down.returncode == 0 and "stopped 2 JVM(s)" in down.stdout
    assert jvms_of(tmp_path) == {}
