"""The planner on a real local Spark session (one session for the whole module), the
`kafka-reassign plan` command line and spark-submit of the planner's Spark job."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_reassign.plan import ReassignmentPlan
from kafka_reassign.planner import _python_aggregates, make_options, plan
from kafka_reassign.planner.cluster import Cluster
from kafka_reassign.planner.constraints import check_constraints, check_goal_scope
from kafka_sim.generate import GenerateOptions, generate_snapshot

pytestmark = [pytest.mark.spark]

VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def spark():
    from kafka_reassign.planner.spark_stats import get_spark

    session = get_spark("local[2]", app_name="kafka-reassign-planner-tests")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def snap() -> dict:
    s = generate_snapshot(GenerateOptions(brokers=12, racks=3, topics=10, partitions=16, skew=1.0,
                                          seed=11, log_dirs=2))
    # three empty brokers to add, in each rack
    for i, b in enumerate((13, 14, 15)):
        s["brokers"].append({"id": b, "rack": ["rack-a", "rack-b", "rack-c"][i],
                             "log_dirs": copy.deepcopy(s["brokers"][0]["log_dirs"])})
    # a few partitions with two replicas in one rack, for rack-repair
    racks = {b["id"]: b["rack"] for b in s["brokers"]}
    for p in s["topics"][0]["partitions"][:3]:
        lead = p["replicas"][0]
        mate = next(b for b in range(1, 13) if racks[b] == racks[lead] and b != lead
                    and b not in p["replicas"])
        p["replicas"][1] = mate
    return s


def test_spark_aggregates_match_a_plain_scan(spark, snap):
    from kafka_reassign.planner.spark_stats import aggregates, replicas_frame

    cluster = Cluster.from_snapshot(snap)
    agg = aggregates(replicas_frame(spark, cluster))
    ref = _python_aggregates(cluster, [(p.replicas, p.log_dirs) for p in cluster.partitions])
    for b in cluster.brokers:
        assert agg.broker_bytes.get(b, 0.0) == pytest.approx(ref["bytes"][b])
        assert agg.broker_count.get(b, 0) == ref["count"][b]
        assert agg.broker_leaders.get(b, 0) == ref["leaders"][b]
        assert agg.broker_bytes_in.get(b, 0.0) == pytest.approx(ref["bytes_in"][b])
    assert {k: v for k, v in ref["dir_bytes"].items() if v} == pytest.approx(agg.dir_bytes)
    assert agg.topic_broker == {k: v for k, v in ref["topic_broker"].items() if v}
    assert sum(agg.rack_bytes.values()) == pytest.approx(sum(ref["bytes"].values()))


GOAL_CASES = [
    ("rebalance", {"exclude_brokers": [13, 14, 15]}),
    ("add-brokers", {"brokers": [13, 14, 15]}),
    ("remove-brokers", {"brokers": [3, 8]}),
    ("replication-factor", {"replication_factor": 4, "topics": ["placeholder"]}),
    ("rack-repair", {}),
    ("disks", {}),
]


@pytest.mark.parametrize("goal, options", GOAL_CASES, ids=[g for g, _ in GOAL_CASES])
def test_every_goal_on_spark(spark, snap, goal, options):
    options = dict(options)
    if "topics" in options:
        options["topics"] = [snap["topics"][2]["name"]]
    res = plan(snap, goal, spark=spark, **options)
    s = res.summary
    assert s["engine"] == "spark"
    cluster = Cluster.from_snapshot(snap)
    opts = make_options(goal, **options)
    assert check_constraints(cluster, res.final, opts, allow_rf_change=goal == "replication-factor") == []
    assert check_goal_scope(cluster, res.final, opts) == []
    assert ReassignmentPlan.from_json(res.plan.to_json()).to_json() == res.plan.to_json()
    # a bound on reaching the goal: when a broker or dir cannot reach its target (the summary
    # warns "stays above"), less than the bound may move
    if not any("stays" in w for w in s["warnings"]):
        assert s["data_to_move_bytes"] >= (s["lower_bound_bytes"] or 0)
    if s["lower_bound_bytes"]:
        assert s["data_to_move_bytes"] <= 1.15 * s["lower_bound_bytes"]
    # the "after" loads come from a Spark aggregation of the final placement: they must agree
    # with a plain scan of it
    ref = _python_aggregates(cluster, res.final)
    for row in s["brokers"]:
        assert row["bytes_after"] == pytest.approx(ref["bytes"][row["broker"]])
        assert row["replicas_after"] == ref["count"][row["broker"]]
    if goal == "rebalance":
        assert s["balance_before"] > 1.5
        # balance over the brokers the goal may use (the summary's covers all brokers)
        rows = [r for r in s["brokers"] if r["broker"] not in (13, 14, 15)]
        mean = sum(r["bytes_after"] for r in rows) / sum(r["capacity_bytes"] for r in rows)
        assert max(r["util_after"] for r in rows) / mean <= 1.04 + 1e-3
    if goal != "rebalance":
        # apart from rebalance's Spark-side candidate pre-selection, the search is identical
        local = plan(snap, goal, engine="local", **options)
        assert local.plan.to_json() == res.plan.to_json()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    env.setdefault("KAFKA_REASSIGN_SPARK_MASTER", "local[2]")
    return env


@pytest.mark.slow
def test_kafka_reassign_plan_command_on_spark(tmp_path, snap):
    sp = tmp_path / "snap.json"
    sp.write_text(json.dumps(snap))
    out = tmp_path / "PLAN.json"
    proc = subprocess.run([str(VENV_BIN / "kafka-reassign"), "plan", "--snapshot", str(sp),
                           "--goal", "remove-brokers", "--brokers", "5", "--throttle", "40000000",
                           "--out", str(out)], capture_output=True, text=True, timeout=300, env=_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1
    summary = json.loads(lines[0])
    assert summary["engine"] == "spark" and summary["replica_movements"] > 0
    assert summary["estimated_seconds"] > 0
    moves = ReassignmentPlan.load(out).moves
    assert moves and all(5 not in m.replicas for m in moves)
    assert (tmp_path / "PLAN.summary.json").exists() and (tmp_path / "PLAN.chart.png").exists()


@pytest.mark.slow
def test_spark_submit_runs_the_planner_job(tmp_path, snap):
    import kafka_reassign.planner.spark_job as job

    sp = tmp_path / "snap.json"
    sp.write_text(json.dumps(snap))
    out = tmp_path / "plan.json"
    env = _env()
    env.pop("KAFKA_REASSIGN_SPARK_MASTER", None)  # the master comes from spark-submit
    env["PYSPARK_PYTHON"] = sys.executable
    proc = subprocess.run([str(VENV_BIN / "spark-submit"), "--master", "local[2]",
                           "--conf", "spark.ui.enabled=false", job.__file__,
                           "--snapshot", str(sp), "--goal", "add-brokers", "--brokers", "13,14,15",
                           "--out", str(out)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    assert summary["goal"] == "add-brokers" and summary["engine"] == "spark"
    moves = ReassignmentPlan.load(out).moves
    assert moves and all({13, 14, 15} & set(m.replicas) for m in moves)
