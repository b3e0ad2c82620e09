"""A run with StatsD pointed at a UDP listener emits the project's own metric names
(``airflow dags test`` in a subprocess, Airflow's [metrics] settings, the simulator over TCP)."""
from __future__ import annotations

import socket
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dag_runner import DagRunner  # noqa: E402
from test_dag_reassign import plan_of, six_broker_snapshot  # noqa: E402

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


class UdpListener:
    """Collects StatsD datagrams (``name:value|type[|#tags]``, several per packet)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65535)
            except OSError:
                continue
            self.lines.extend(data.decode(errors="replace").splitlines())

    def __enter__(self) -> "UdpListener":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()

    def values(self, name: str) -> list[float]:
        return [float(line.split(":", 1)[1].split("|", 1)[0]) for line in self.lines
                if line.split(":", 1)[0] == name]


def test_run_emits_the_projects_metrics(tmp_path, sim_cluster):
    cluster = sim_cluster(six_broker_snapshot(), time_scale=10.0)
    plan = plan_of(("orders", 0, [4, 5, 6]), ("clicks", 1, [5, 6]))
    with UdpListener() as udp:
        runner = DagRunner(tmp_path / "airflow", cluster.bootstrap_servers, extra_env={
            "AIRFLOW__METRICS__STATSD_ON": "True", "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
            "AIRFLOW__METRICS__STATSD_PORT": str(udp.port), "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
            "AIRFLOW__KAFKA_REASSIGN__MIN_RETURN_SECONDS": "0"})
        rc, log = runner.run("kafka_reassign", {"plan": plan, "throttle_bytes_per_sec": 10_000_000,
                                                "poll_interval_seconds": 0.2, "batch_timeout_minutes": 2})
        assert rc == 0, log[-3000:]
    names = {line.split(":", 1)[0] for line in udp.lines}
    ours = sorted(n for n in names if n.startswith("airflow.kafka_reassign."))
    print("project metrics:", ours)
    assert udp.values("airflow.kafka_reassign.plan.moves") == [2.0]
    assert udp.values("airflow.kafka_reassign.throttle.rate") == [10_000_000.0]
    assert udp.values("airflow.kafka_reassign.throttle.leftovers")[-1] == 0.0
    assert udp.values("airflow.kafka_reassign.moves.done")[-1] >= 1.0
    assert udp.values("airflow.kafka_reassign.plan.bytes")[0] > 0
    assert any(n.startswith("airflow.ti.") or n.startswith("airflow.dagrun") for n in names)  # Airflow's own too
    # Quiet logs: kafka-python stays at WARNING ([kafka_reassign] kafka_client_log_level).
    client_info = [line for line in log.splitlines() if "[info" in line and "[kafka." in line]
    print(f"log lines: {len(log.splitlines())}, kafka-python INFO lines: {len(client_info)}")
    assert client_info == [], client_info[:5]
