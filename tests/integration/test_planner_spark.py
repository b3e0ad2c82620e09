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

from kafka_reassign.planning.plan import ReassignmentPlan
from kafka_reassign.planning.spark import plan_file
from kafka_reassign.planning.spark.guard import PlanningTimeout
from kafka_reassign.planning.spark.snapshot_file import header_of, partition_lines, write_lines, write_snapshot_lines
from kafka_sim.generate import GenerateOptions, generate_snapshot

pytestmark = [pytest.mark.spark]

VENV_BIN = Path(sys.executable).parent


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["KAFKA_REASSIGN_SPARK_MASTER"] = "local[2]"
    return env


@pytest.fixture(scope="module")
def spark():
    from kafka_reassign.planning.spark.spark_session import get_spark

    session = get_spark("local[2]", app_name="kafka-reassign-planner-tests")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def snap() -> dict:
    s = generate_snapshot(GenerateOptions(brokers=12, racks=4, topics=10, partitions=16, skew=1.0,
                                          seed=11))
    for i, b in enumerate((13, 14, 15, 16)):  # four empty brokers, one per rack
        s["brokers"].append({"id": b, "rack": sorted({x["rack"] for x in s["brokers"]})[i],
                             "log_dirs": copy.deepcopy(s["brokers"][0]["log_dirs"])})
    for t in s["topics"][:3]:  # tiered topics (KIP-405): remote bytes ride along, never counted as moved
        t["configs"]["remote.storage.enable"] = "true"
        for p in t["partitions"]:
            p["remote_bytes"] = 1_000_000 * (1 + p["partition"])
    return s


@pytest.fixture(scope="module")
def lines(snap, tmp_path_factory) -> str:
    return str(write_snapshot_lines(snap, tmp_path_factory.mktemp("snap") / "snapshot.jsonl"))


def test_spark_reads_the_snapshot_file_and_agrees_with_the_local_engine(spark, lines, snap, monkeypatch):
    created: list[int] = []
    real = type(spark).createDataFrame

    def spy(self, data, *args, **kwargs):
        created.append(len(data))
        return real(self, data, *args, **kwargs)

    monkeypatch.setattr(type(spark), "createDataFrame", spy)
    res = plan_file(lines, "rebalance", spark=spark)
    monkeypatch.undo()
    s = res.summary
    assert s["engine"] == "spark" and s["replica_movements"] > 0
    # the driver only ships brokers-sized and moves-sized frames to Spark, never the replicas
    replicas = sum(len(p["replicas"]) for t in snap["topics"] for p in t["partitions"])
    assert created and max(created) <= max(len(snap["brokers"]), s["replica_movements"]) < replicas
    local = plan_file(lines, "rebalance", engine="local")
    assert res.plan.to_json() == local.plan.to_json()
    assert s["remote_bytes_not_copied"] == local.summary["remote_bytes_not_copied"]
    # the per-broker produce rates (network in and out, leader bytes in) aggregate alike in both engines
    for resource in ("network_in", "leader_bytes_in", "network_out"):
        assert s["balance"][resource] == local.summary["balance"][resource]
    assert s["balance"]["network_in"]["before"] > 1.0
    tiered = {t["name"]: {p["partition"]: p["remote_bytes"] for p in t["partitions"]}
              for t in snap["topics"] if "remote.storage.enable" in t["configs"]}
    assert s["remote_bytes_not_copied"] == sum(tiered.get(m.topic, {}).get(m.partition, 0) for m in res.plan.moves) > 0
    assert s["balance_after"] < s["balance_before"]
    # 160 partitions on 16 brokers: the fullest broker stays above the tolerance, so the bound (for
    # the balance the goal accepts) does not apply: the summary says so and shows no ratio
    assert s["reaches_accepted_balance"] is False and s["moved_over_lower_bound"] is None
    assert any("above the mean utilisation" in w for w in s["warnings"])


def test_network_in_goal_gives_the_same_plan_on_spark_and_local(spark, tmp_path):
    """Hot topics (30x the produce rate): the network-in pass (candidates from each engine, the
    pass on the driver) gives one plan, within the network-in tolerance."""
    s = generate_snapshot(GenerateOptions(brokers=12, racks=3, topics=16, partitions=24, skew=1.0, seed=7))
    for i, t in enumerate(s["topics"]):
        for p in t["partitions"]:
            p["bytes_in_per_sec"] = (30.0 if i < 2 else 1.0) * 1000 * (1 + p["partition"] % 3)
    path = str(write_snapshot_lines(s, tmp_path / "hot.jsonl"))
    on_spark = plan_file(path, "rebalance", spark=spark)
    local = plan_file(path, "rebalance", engine="local")
    assert on_spark.plan.to_json() == local.plan.to_json()
    net = on_spark.summary["balance"]["network_in"]
    assert net == local.summary["balance"]["network_in"]
    assert net["before"] > 2.0 and net["after"] <= 1.10
    # the capacity goals (link caps, a replica cap) shed from the same candidates: one plan too
    caps = {"broker_network_capacity_bytes_per_sec": 1_450_000, "max_replicas_per_broker": 98}
    on_spark = plan_file(path, "rebalance", spark=spark, **caps)
    local = plan_file(path, "rebalance", engine="local", **caps)
    assert on_spark.plan.to_json() == local.plan.to_json() != plan_file(path, "rebalance", engine="local").plan.to_json()
    assert on_spark.summary["replica_capacity"]["fullest_after"] <= 98
    assert on_spark.summary["network_capacity"]["in"]["after"] <= 0.8


def test_measured_consumer_bytes_give_the_same_network_out_plan_on_spark_and_local(spark, tmp_path):
    """Consumers measured on two hot topics (3x the produce rate, and none) and not on the rest: both
    engines weigh network out alike (measured where present, consumer_fanout elsewhere): one plan."""
    s = generate_snapshot(GenerateOptions(brokers=12, racks=3, topics=16, partitions=24, skew=1.0, seed=7))
    for i, t in enumerate(s["topics"]):
        for p in t["partitions"]:
            p["bytes_in_per_sec"] = (30.0 if i < 2 else 1.0) * 1000 * (1 + p["partition"] % 3)
            if i < 2:
                p["consumer_bytes_per_sec"] = (3.0 if i == 0 else 0.0) * p["bytes_in_per_sec"]
    path = str(write_snapshot_lines(s, tmp_path / "measured.jsonl"))
    goals = "rack-aware,capacity,disk,network-in,network-out,leader-count"
    on_spark = plan_file(path, "rebalance", spark=spark, balance_goals=goals)
    local = plan_file(path, "rebalance", engine="local", balance_goals=goals)
    assert on_spark.plan.to_json() == local.plan.to_json()
    out = on_spark.summary["balance"]["network_out"]
    assert out == local.summary["balance"]["network_out"]
    assert out["before"] > 2.0 and out["after"] <= 1.10
    blind = plan_file(str(write_snapshot_lines(s | {"topics": [
        {**t, "partitions": [{k: v for k, v in p.items() if k != "consumer_bytes_per_sec"} for p in t["partitions"]]}
        for t in s["topics"]]}, tmp_path / "blind.jsonl")), "rebalance", engine="local", balance_goals=goals)
    assert blind.summary["balance"]["network_out"] != out  # the measurement changed the figure


def test_search_in_pieces_on_spark_gives_the_local_engines_plan(spark, tmp_path):
    """More search tasks than racks, each piece alone in a Spark partition of its own."""
    from kafka_reassign.planning.spark.data import SparkData

    s = generate_snapshot(GenerateOptions(brokers=18, racks=3, topics=20, partitions=30, skew=1.0, seed=9))
    path = str(write_snapshot_lines(s, tmp_path / "pieces.jsonl"))
    cut = plan_file(path, "rebalance", spark=spark, search_piece_replicas=150)
    local = plan_file(path, "rebalance", engine="local", search_piece_replicas=150)
    assert cut.summary["search_pieces"] == local.summary["search_pieces"] > 3
    assert cut.plan.to_json() == local.plan.to_json() and cut.plan.moves
    data = SparkData(spark, path, header_of(s))
    keys = data._slot_keys(7)
    data.close()
    slots = spark.createDataFrame([(k,) for k in keys], "slot int").repartition(7, "slot")
    assert slots.rdd.glom().map(len).collect() == [1] * 7


def test_same_plan_on_local1_and_local2(spark, lines, tmp_path):
    import kafka_reassign.planning.spark.spark_job as job

    in_process = plan_file(lines, "remove-brokers", spark=spark, brokers=[5])
    out = tmp_path / "plan.json"
    proc = subprocess.run([sys.executable, job.__file__, "--snapshot", lines, "--goal", "remove-brokers",
                           "--brokers", "5", "--spark-master", "local[1]", "--no-chart", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, env=_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert ReassignmentPlan.load(out).to_json() == in_process.plan.to_json()
    assert all(5 not in m.replicas for m in in_process.plan.moves)


def test_bad_rows_are_named_and_no_plan_is_written(spark, snap, tmp_path, capsys):
    from kafka_reassign.planning.spark import command as cli

    rows = list(partition_lines(snap))
    rows[0]["replicas"] = [1, 2, 99]
    del rows[1]["size_bytes"]
    path = write_lines(tmp_path / "bad.jsonl", header_of(snap), rows)
    parser = __import__("argparse").ArgumentParser()
    cli.add_arguments(parser)
    out = tmp_path / "plan.json"
    args = parser.parse_args(["--snapshot", str(path), "--goal", "rebalance", "--out", str(out)])
    assert cli.run(args, spark=spark) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    first, second = rows[0], rows[1]
    assert f"partition {first['topic']}-{first['partition']}: replicas [1,2,99] name brokers" in err
    assert f"partition {second['topic']}-{second['partition']}: has no size_bytes" in err
    assert not out.exists() and not cli.summary_path_for(out).exists()


def test_planning_past_its_timeout_is_cancelled_with_a_clear_error(spark, lines):
    with pytest.raises(PlanningTimeout, match="timeout_seconds=0.2"):
        plan_file(lines, "rebalance", spark=spark, timeout_seconds=0.2)


@pytest.mark.slow
def test_spark_submit_runs_the_planner_job(tmp_path, lines):
    import kafka_reassign.planning.spark.spark_job as job

    out = tmp_path / "plan.json"
    env = _env()
    env.pop("KAFKA_REASSIGN_SPARK_MASTER", None)  # the master comes from spark-submit
    env["PYSPARK_PYTHON"] = sys.executable
    proc = subprocess.run([str(VENV_BIN / "spark-submit"), "--master", "local[2]",
                           "--conf", "spark.ui.enabled=false", job.__file__,
                           "--snapshot", lines, "--goal", "add-brokers", "--brokers", "13,14,15,16",
                           "--out", str(out)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    assert summary["goal"] == "add-brokers" and summary["engine"] == "spark"
    moves = ReassignmentPlan.load(out).moves
    data_moves = [m for m in moves if set(m.replicas) - {13, 14, 15, 16} != set(m.replicas)]
    assert data_moves


def test_topic_spread_relays_give_the_same_plan_on_spark_and_local(spark, tmp_path):
    """The spread pass's relays read each receiver's largest replicas from the engine: the small
    hot-traffic shape whose hottest topic only relays bring within slack plans the same on both."""
    from benchmarks.planner_shapes import generate

    path = tmp_path / "hot.jsonl"
    generate("hot-traffic", 80, 20, 12, path, seed=2)
    on_spark = plan_file(str(path), "rebalance", spark=spark)
    local = plan_file(str(path), "rebalance", engine="local")
    assert on_spark.plan.to_json() == local.plan.to_json()
    assert on_spark.summary["topic_spread"]["after"] == 0
