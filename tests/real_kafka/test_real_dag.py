"""The kafka_reassign DAG end to end on the real Apache Kafka cluster (``dag.test``, SQLite).

The ``kafka_default`` connection points at the local real cluster, as the simulator tests
point it at the simulator. Placement and configs are read back through kcat and
confluent-kafka, never through the tool's admin layer.
"""
from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import airflow_env  # noqa: E402

airflow_env.configure_env()

from kafka_local.load import create_topic, fill  # noqa: E402
from real_kafka_checks import placement  # noqa: E402
from real_kafka_clients import Sampler, admin, alter_set, reassignments, set_configs  # noqa: E402

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

BROKERS = [1, 2, 3, 4, 5, 6]
THROTTLE = 10_000_000
START = {0: [1, 2, 3], 1: [2, 3, 4], 2: [3, 4, 5]}
# p0: every replica replaced (leadership leaves with the old leader); p1: one replica
# replaced and a new preferred leader that was not a replica; p2: only a new preferred leader.
TARGET = {0: [4, 5, 6], 1: [6, 2, 4], 2: [4, 3, 5]}
FAST = {"poll_interval_seconds": 0.5, "batch_timeout_minutes": 3, "stall_window_minutes": 2,
        "produce_sample_seconds": 1}
# An operator's own throttle, set before the run: the run must put it back exactly.
FOREIGN = ("broker", "6", {"follower.replication.throttled.rate": "50000000"})


@pytest.fixture(scope="module")
def airflow_db() -> Path:
    return airflow_env.migrate_once()


@pytest.fixture
def kafka_conn(real_bootstrap: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """kafka_default -> the real cluster, for this test only."""
    for k, v in airflow_env.kafka_conn_env(real_bootstrap).items():
        monkeypatch.setenv(k, v)
    return real_bootstrap


@pytest.fixture
def moving_topic(kafka_conn: str, topic_name) -> str:
    """A 3-partition RF3 topic (min.insync.replicas 2) with about 2 MB in each partition."""
    # A random tag too: a cluster reused across sessions (KAFKA_LOCAL_DIR) keeps older topics.
    name = topic_name(f"dag-{uuid.uuid4().hex[:6]}")
    create_topic(kafka_conn, name, START, {"min.insync.replicas": "2"})
    fill(kafka_conn, name, {p: 2_000_000 for p in START})
    return name


@pytest.fixture
def foreign_throttle(kafka_conn: str) -> Iterator[None]:
    """Set the operator's own throttle before the test; delete it afterwards whatever happened."""
    client = admin(kafka_conn)
    kind, name, values = FOREIGN
    alter_set(client, kind, name, values)
    try:
        yield
    finally:
        alter_set(client, kind, name, {k: None for k in values})


def plan_for(topic: str) -> dict[str, Any]:
    return {"version": 1, "partitions": [{"topic": topic, "partition": p, "replicas": r} for p, r in TARGET.items()]}


def throttled(sample: dict[str, dict[str, str | None]]) -> dict[str, dict[str, str | None]]:
    """The throttle part of one config read-back (rates and throttled-replica lists)."""
    return {res: {k: v for k, v in cfg.items() if "throttled" in k or "io.max.bytes" in k}
            for res, cfg in sample.items() if any("throttled" in k or "io.max.bytes" in k for k in cfg)}


def test_dag_moves_the_plan_with_the_throttle_on_and_restores_every_config(
        airflow_db, kafka_conn, moving_topic, foreign_throttle, capfd) -> None:
    client = admin(kafka_conn)
    before = set_configs(client, BROKERS, [moving_topic])
    assert before["broker 6"]["follower.replication.throttled.rate"] == "50000000"
    with Sampler(lambda: set_configs(client, BROKERS, [moving_topic]), interval=0.2, name="throttle-watch") as watch:
        dr = airflow_env.run_dag({"plan": plan_for(moving_topic), "throttle_bytes_per_sec": THROTTLE,
                                  "max_partition_movements": 2, **FAST})
    out = capfd.readouterr().out
    states = airflow_env.task_states(dr)
    assert dr.state == "success", f"{states}\n{out[-4000:]}"
    assert states["execute"] == "success" and states["throttle_remove"] == "success", states
    assert states["cancel_on_failure"] == "skipped", states
    # The placement (kcat) is the plan, preferred leader first, and nothing is left moving.
    assert placement(kafka_conn, moving_topic) == TARGET
    assert reassignments(kafka_conn) == {}
    # The throttle really was on the brokers while the run was going (read back independently).
    seen = [throttled(s) for _, s in watch.results]
    rate = str(THROTTLE)
    on = [s for s in seen if s.get("broker 1", {}).get("leader.replication.throttled.rate") == rate]
    assert on, f"the run's throttle was never seen on broker 1 in {len(seen)} samples"
    assert any(s.get(f"topic {moving_topic}", {}).get("leader.replication.throttled.replicas") for s in seen)
    # The foreign throttle on broker 6 was replaced by the run's while it ran.
    assert any(s.get("broker 6", {}).get("follower.replication.throttled.rate") == rate for s in seen)
    # Afterwards every config is exactly what it was: the operator's own value back, ours gone.
    assert set_configs(client, BROKERS, [moving_topic]) == before
    # The run's durable record lists the writes with their prior values, and says restored.
    rec = airflow_env.read_record(dr.run_id)
    assert rec is not None and rec.restored, rec
    written = {(c.resource_type, c.name, c.key): c for c in rec.changes}
    assert written[("broker", "1", "leader.replication.throttled.rate")].value == rate
    prior6 = written[("broker", "6", "follower.replication.throttled.rate")]
    assert prior6.prior == "50000000" and prior6.value == rate
    assert "Execution: DONE" in out


def test_dag_dry_run_writes_nothing(airflow_db, kafka_conn, moving_topic, capfd) -> None:
    client = admin(kafka_conn)
    configs_before = set_configs(client, BROKERS, [moving_topic])
    with Sampler(lambda: throttled(set_configs(client, BROKERS, [moving_topic])), name="dry-run-watch") as watch:
        dr = airflow_env.run_dag({"plan": plan_for(moving_topic), "dry_run": True,
                                  "throttle_bytes_per_sec": THROTTLE, **FAST})
    out = capfd.readouterr().out
    states = airflow_env.task_states(dr)
    assert dr.state == "success", f"{states}\n{out[-4000:]}"
    assert states["prepare"] == "success" and states["throttle_set"] == "skipped", states
    assert "DRY RUN" in out and "leader.replication.throttled.rate = '10000000' (was (not set))" in out
    # Nothing moved, nothing is moving, no config was written at any moment of the run.
    assert placement(kafka_conn, moving_topic) == START
    assert reassignments(kafka_conn) == {}
    assert set_configs(client, BROKERS, [moving_topic]) == configs_before
    assert watch.results and all(s == {} for _, s in watch.results), watch.results[-1]
    assert airflow_env.read_record(dr.run_id) is None
