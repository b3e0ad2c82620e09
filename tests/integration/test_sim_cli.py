"""`kafka-sim serve` and `kafka-sim ctl` as separate processes."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
import pytest

pytestmark = pytest.mark.timeout(120)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _free_port_block(count: int = 16) -> int:
    """A base port whose next ``count`` ports are free, below the ephemeral range (32768+),
    so client sockets opened meanwhile by other processes cannot take one of them."""
    import random

    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 32000 - count)
        socks = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no block of free ports found")


def _serve(snapshot_path: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafka_sim.cli", "serve", "--snapshot", str(snapshot_path), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("BOOTSTRAP="):
        proc.kill()
        raise AssertionError(f"no BOOTSTRAP line: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    return proc, line.strip().split("=", 1)[1]


def _ctl(control: str, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafka_sim.cli", "ctl", "--control", control, *words],
                          capture_output=True, text=True, timeout=30)


@pytest.fixture
def snapshot_file(tmp_path: Path, small_snapshot: dict) -> Path:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(small_snapshot))
    return path


def test_serve_prints_bootstrap_once_and_stops_on_sigterm(snapshot_file: Path) -> None:
    proc, bootstrap = _serve(snapshot_file, "--time-scale", "10")
    try:
        addrs = bootstrap.split(",")
        assert len(addrs) == 4
        for a in addrs:
            host, port = a.rsplit(":", 1)
            socket.create_connection((host, int(port)), timeout=5).close()
        from confluent_kafka.admin import AdminClient
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
        assert sorted(md.brokers) == [1, 2, 3, 4]
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert out.strip() == "", "exactly one line on stdout"
    host, port = addrs[0].rsplit(":", 1)
    with pytest.raises(OSError):
        socket.create_connection((host, int(port)), timeout=2).close()


def test_serve_sigint_and_fixed_ports(snapshot_file: Path) -> None:
    base = _free_port_block()
    proc, bootstrap = _serve(snapshot_file, "--port", str(base))
    try:
        assert bootstrap.split(",")[0] == f"127.0.0.1:{base}"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=20)
    assert proc.returncode == 0


def test_control_port_faults(snapshot_file: Path) -> None:
    cport = _free_port()
    proc, bootstrap = _serve(snapshot_file, "--control-port", str(cport))
    control = f"127.0.0.1:{cport}"
    try:
        addr2 = bootstrap.split(",")[1]
        host, port = addr2.rsplit(":", 1)
        r = _ctl(control, "stop-broker", "2")
        assert r.returncode == 0 and r.stdout.strip() == "OK stop-broker 2", r
        with pytest.raises(OSError):
            socket.create_connection((host, int(port)), timeout=2).close()
        state = json.loads(_ctl(control, "state").stdout)
        assert state["brokers"]["2"]["alive"] is False
        assert state["under_replicated"] > 0
        from kafka import KafkaAdminClient
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
        try:
            from kafka.errors import KafkaConnectionError
            described = None
            for _ in range(20):  # the client may first try the dead broker; retry like a tool would
                try:
                    described = admin.describe_cluster()
                    break
                except KafkaConnectionError:
                    time.sleep(0.1)
            assert described is not None
            fenced = {b["broker_id"]: b["is_fenced"] for b in described["brokers"]}
            assert fenced == {1: False, 2: True, 3: False, 4: False}
        finally:
            admin.close()
        r = _ctl(control, "start-broker", "2")
        assert r.returncode == 0 and "OK" in r.stdout
        socket.create_connection((host, int(port)), timeout=2).close()
        assert _ctl(control, "stop-broker", "99").returncode == 1
        assert _ctl(control, "explode").returncode == 1
        snap = json.loads(_ctl(control, "snapshot").stdout)
        assert {t["name"] for t in snap["topics"]} == {"orders", "clicks"}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
    assert proc.returncode == 0


def test_serve_rejects_missing_snapshot(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "kafka_sim.cli", "serve", "--snapshot",
                        str(tmp_path / "nope.json")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "cannot read snapshot" in r.stderr
