"""A 20,000-partition plan through the real DAG (dag.test, SQLite) on the simulator over TCP.

The run must complete with a constant number of task instances: no task per batch, nothing
that can reach Airflow's map limit, however large the plan.
"""
from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import airflow_env  # noqa: E402

airflow_env.configure_env()
os.environ.setdefault("AIRFLOW__KAFKA_REASSIGN__ADMIN_RETRY_ATTEMPTS", "2")
os.environ.setdefault("AIRFLOW__KAFKA_REASSIGN__ADMIN_RETRY_MAX_SECONDS", "3")

from test_dag_reassign import airflow_db, kafka_conn  # noqa: E402,F401

pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.timeout(1800)]

PARTITIONS = 20_000


def big_cluster_and_plan() -> tuple[dict, dict]:
    """30 brokers, 20k RF-3 partitions of 1 MB; the plan moves one replica of each partition."""
    from kafka_sim.generate import GenerateOptions, generate_snapshot

    snap = generate_snapshot(GenerateOptions(brokers=30, racks=3, topics=20, partitions=PARTITIONS // 20,
                                             replication_factor=3, seed=3))
    rng = random.Random(3)
    ids = [b["id"] for b in snap["brokers"]]
    moves = []
    for t in snap["topics"]:
        t["configs"] = {}
        for p in t["partitions"]:
            p["size_bytes"], p["bytes_in_per_sec"] = 1_000_000, 0
            reps = list(p["replicas"])
            reps[-1] = rng.choice([b for b in ids if b not in reps])
            moves.append({"topic": t["name"], "partition": p["partition"], "replicas": reps})
    return snap, {"version": 1, "partitions": moves}


def test_20000_partition_plan_completes_with_a_constant_number_of_task_instances(airflow_db, sim_cluster,
                                                                                 kafka_conn):
    snap, plan = big_cluster_and_plan()
    cluster = sim_cluster(snap, time_scale=50.0)
    kafka_conn(cluster)
    dr = airflow_env.run_dag({"plan": plan, "throttle_bytes_per_sec": 500_000_000,
                              "max_partition_movements": 5000, "max_movements_per_broker": 500,
                              "poll_interval_seconds": 0.5, "produce_sample_seconds": 0,
                              "batch_timeout_minutes": 20, "stall_window_minutes": 10})
    states = airflow_env.task_states(dr)
    assert dr.state == "success", states
    assert len(states) <= 20, states
    assert states["execute"] == "success"
    from kafka_reassign_airflow.record_store import VariableExecutionStore

    saved = VariableExecutionStore().load(dr.run_id)
    assert saved["progress"]["steps_done"] == saved["progress"]["steps_total"] == PARTITIONS
    # Counters and the pages still worked on: nothing left once every step is done.
    assert saved["state"]["counts"]["d"] == PARTITIONS and saved["state"]["pages"] == {}
    # Prepare stored the steps once, in pages of 500; execute read them from there a page at a time.
    head = airflow_env.xcom(dr, "prepare", "paged")["book"]
    assert head["steps"] == PARTITIONS and head["pages"] == PARTITIONS // 500
    last = airflow_env.xcom(dr, "prepare", f"steps-page-{head['pages'] - 1}")
    assert len(last) == 500 and {e[1]["topic"] for e in last} <= {t["name"] for t in snap["topics"]}
    wrong = [e for e in plan["partitions"]
             if cluster.partition_state(e["topic"], e["partition"])["replicas"] != e["replicas"]]
    assert wrong == []
