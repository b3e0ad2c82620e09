"""The kafka_reassign DAG (``dag.test``) on the real Apache Kafka cluster with a mixed plan: a
partition moving to another broker and one moving between the log dirs of its broker (KIP-113),
the DAG params ``throttle_bytes_per_sec`` and ``log_dir_throttle_bytes_per_sec`` each seen on
its brokers while the moves run. The CLI's version is test_real_mixed_moves.py."""
from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import airflow_env  # noqa: E402

airflow_env.configure_env()

from kafka_local.load import create_topic, fill  # noqa: E402
from real_kafka_checks import placement  # noqa: E402
from real_kafka_clients import Sampler, admin, reassignments, set_configs  # noqa: E402
from real_kafka_moves import replica_dirs  # noqa: E402

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

BROKERS = [1, 2, 3, 4, 5, 6]
START = {0: [1, 2, 3], 1: [5, 6, 1]}
FAST = {"poll_interval_seconds": 0.5, "move_timeout_minutes": 3, "stall_window_minutes": 2,
        "produce_sample_seconds": 0}
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


def test_dag_runs_a_mixed_plan_each_move_under_its_own_throttle(real_bootstrap, local_kafka, topic_name,
                                                               monkeypatch, capfd) -> None:
    airflow_env.migrate_once()
    for k, v in airflow_env.kafka_conn_env(real_bootstrap).items():
        monkeypatch.setenv(k, v)
    bs, client = real_bootstrap, admin(real_bootstrap)
    topic = topic_name(f"dag-mixed-{uuid.uuid4().hex[:6]}")
    create_topic(bs, topic, START)
    fill(bs, topic, {p: 6_000_000 for p in START})
    home = replica_dirs(bs, 5, topic)[(1, False)]
    (other,) = [d for d in local_kafka.brokers[5].log_dirs if d != home]
    plan = {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [4, 2, 3]},
        {"topic": topic, "partition": 1, "replicas": [5, 6, 1], "log_dirs": [other, "any", "any"]}]}
    before = set_configs(client, BROKERS, [topic])
    with Sampler(lambda: set_configs(client, BROKERS, [topic]), interval=0.2, name="mixed-watch") as watch:
        dr = airflow_env.run_dag({"plan": plan, "throttle_bytes_per_sec": 1_000_000,
                                  "log_dir_throttle_bytes_per_sec": 2_000_000, **FAST})
    out = capfd.readouterr().out
    states = airflow_env.task_states(dr)
    assert dr.state == "success", f"{states}\n{out[-4000:]}"
    assert placement(bs, topic) == {0: [4, 2, 3], 1: [5, 6, 1]} and reassignments(bs) == {}
    assert replica_dirs(bs, 5, topic) == {(1, False): other}
    seen = [s for _, s in watch.results]
    # Together at one moment: the replication rate on the broker move's brokers, the log-dir rate
    # on broker 5 only, and neither kind on the brokers of the other.
    together = [s for s in seen if s.get("broker 4", {}).get("leader.replication.throttled.rate") == "1000000"
                and s.get("broker 5", {}).get(LOG_DIR_RATE) == "2000000"]
    assert together, f"both throttles never seen at once in {len(seen)} samples"
    assert all(s.get("broker 5", {}).get("leader.replication.throttled.rate") is None
               and s.get("broker 4", {}).get(LOG_DIR_RATE) is None for s in seen)
    assert set_configs(client, BROKERS, [topic]) == before

