"""The disk-threshold goal (issue 20) on small generated clusters: every log dir ends under the
threshold, dirs under it lose nothing, moved >= the lower bound and close to it; bad thresholds
are refused before anything is written; the goal is reachable from the CLI and the DAG params."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.disk_threshold import after, generate
from kafka_reassign import defaults
from kafka_reassign.cli.main import main
from kafka_reassign.errors import GoalError
from kafka_reassign.planning.spark import plan

Dir = tuple[int, str]


def _loads(snapshot: dict[str, Any], placement: list[tuple[Any, Any]]) -> dict[Dir, float]:
    sizes = [p["size_bytes"] for t in snapshot["topics"] for p in t["partitions"]]
    out: dict[Dir, float] = {(b["id"], d["path"]): 0.0 for b in snapshot["brokers"] for d in b["log_dirs"]}
    for size, (reps, dirs) in zip(sizes, placement):
        for b, d in zip(reps, dirs):
            out[(b, d)] += size
    return out


def _caps(snapshot: dict[str, Any]) -> dict[Dir, float]:
    return {(b["id"], d["path"]): d["capacity_bytes"] for b in snapshot["brokers"] for d in b["log_dirs"]}


def _replica_sets(placement: list[tuple[Any, Any]]) -> list[set[Dir]]:
    return [set(zip(reps, dirs)) for reps, dirs in placement]


@pytest.mark.parametrize("dirs_per_broker, seed", [(1, 3), (2, 4), (3, 5)])
def test_every_dir_ends_under_and_dirs_under_lose_nothing(dirs_per_broker: int, seed: int) -> None:
    snapshot = generate(partitions=150, brokers=12, racks=3, dirs_per_broker=dirs_per_broker,
                        over_share=0.25, seed=seed)
    before = [(p["replicas"], p["log_dirs"]) for t in snapshot["topics"] for p in t["partitions"]]
    result = plan(snapshot, "disk-threshold", disk_threshold_percent=80, engine="local")
    final = after(snapshot, result)
    caps, load0, load1 = _caps(snapshot), _loads(snapshot, before), _loads(snapshot, final)
    over = {k for k in caps if load0[k] > 0.8 * caps[k]}
    assert over, "the generator must put some dirs over the threshold"
    assert all(load1[k] <= 0.8 * caps[k] + 1e-6 for k in caps), "a dir ends above 80%"
    # a dir under the threshold keeps every replica it held (it may only receive)
    for old, new in zip(_replica_sets(before), _replica_sets(final)):
        assert {rd for rd in old - new if rd not in over} == set()
    s = result.summary
    bound = sum(load0[k] - 0.8 * caps[k] for k in over)
    assert s["lower_bound_bytes"] == round(bound)
    assert s["data_to_move_bytes"] >= s["lower_bound_bytes"] > 0
    assert s["moved_over_lower_bound"] <= 1.10
    assert s["warnings"] == [] or all("above 80%" not in w for w in s["warnings"])
    # rack diversity never drops: generated partitions span 3 racks and still do
    racks = {b["id"]: b["rack"] for b in snapshot["brokers"]}
    assert all(len({racks[r] for r in reps}) == 3 for reps, _ in final)


def test_cordoned_dirs_and_excluded_brokers_are_respected() -> None:
    snapshot = generate(partitions=150, brokers=12, racks=3, dirs_per_broker=2, over_share=0.25, seed=4)
    caps = _caps(snapshot)
    before = [(p["replicas"], p["log_dirs"]) for t in snapshot["topics"] for p in t["partitions"]]
    load0 = _loads(snapshot, before)
    over = sorted(k for k in caps if load0[k] > 0.8 * caps[k])
    excluded = over[0][0]
    for b in snapshot["brokers"]:  # cordon /data/1 on every broker: only /data/0 or other brokers
        b["log_dirs"][1]["cordoned"] = True
    result = plan(snapshot, "disk-threshold", disk_threshold_percent=80, engine="local",
                  exclude_brokers=[excluded])
    final = after(snapshot, result)
    for old, new in zip(_replica_sets(before), _replica_sets(final)):
        assert all(d == "/data/0" for _, d in new - old), "a replica landed on a cordoned dir"
        assert {rd for rd in old ^ new if rd[0] == excluded} == set(), "the excluded broker changed"
    assert any(f"broker {excluded}" in w and "excluded or dead" in w for w in result.summary["warnings"])
    # the excluded broker's full dirs are out of reach: not in the bound
    caps_over = [k for k in over if k[0] != excluded]
    assert result.summary["lower_bound_bytes"] == round(sum(load0[k] - 0.8 * caps[k] for k in caps_over))


def test_a_threshold_no_plan_can_reach_is_warned_and_has_no_ratio() -> None:
    snapshot = generate(partitions=150, brokers=12, racks=3, dirs_per_broker=2, seed=6)
    result = plan(snapshot, "disk-threshold", disk_threshold_percent=30, engine="local")
    s = result.summary
    assert s["lower_bound_bytes"] > 0 and s["moved_over_lower_bound"] is None
    assert any("stay above 30%" in w for w in s["warnings"])


@pytest.mark.parametrize("bad", [0, -5, 100.5, 150, None, True])
def test_a_bad_threshold_is_refused_by_the_planner(bad: Any) -> None:
    snapshot = generate(partitions=30, brokers=6, racks=3, dirs_per_broker=1, seed=1)
    with pytest.raises(GoalError, match="disk_threshold_percent"):
        plan(snapshot, "disk-threshold", disk_threshold_percent=bad, engine="local")


def test_cli_plan_takes_the_goal_and_refuses_a_threshold_above_100(tmp_path: Path, capsys) -> None:
    pytest.importorskip("kafka_reassign.planning.spark.command")
    snap = tmp_path / "snapshot.json"
    snap.write_text(json.dumps(generate(partitions=60, brokers=6, racks=3, dirs_per_broker=2,
                                        over_share=0.25, seed=2)))
    out = tmp_path / "plan.json"
    base = ["plan", "--snapshot", str(snap), "--goal", "disk-threshold", "--out", str(out),
            "--engine", "local", "--no-chart"]
    assert main([*base, "--disk-threshold-percent", "150"]) == 2
    assert "disk_threshold_percent" in capsys.readouterr().err and not out.exists()
    assert main(base) == 2  # the goal without a threshold
    assert "disk_threshold_percent" in capsys.readouterr().err and not out.exists()
    assert main([*base, "--disk-threshold-percent", "80"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["goal"] == "disk-threshold" and summary["lower_bound_bytes"] > 0
    assert json.loads(out.read_text())["partitions"]


@pytest.mark.parametrize("value, fragment", [("0", "must be a number > 0"), ("101", "must be a number <= 100")])
def test_execute_refuses_a_bad_threshold_with_zero_writes(sim_cluster, snapshot_factory, tmp_path: Path,
                                                          capsys, value: str, fragment: str) -> None:
    cluster = sim_cluster(snapshot_factory(brokers=3, racks=1, topics={"t": {"partitions": 1, "rf": 2}}))
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [2, 3]}]}))
    rc = main(["execute", "--bootstrap-server", cluster.bootstrap_servers, "--plan", str(plan_path),
               "--record-dir", str(tmp_path / "rec"), "--disk-threshold-percent", value])
    assert rc == 2
    assert f"disk_threshold_percent: {fragment}" in capsys.readouterr().err
    assert cluster.write_count == 0


def test_dag_params_and_planner_flags_come_from_the_row() -> None:
    from airflow.sdk.definitions.param import ParamValidationError
    from kafka_reassign_airflow.conf_check import conf_problems
    from kafka_reassign_airflow.params import GOALS, reassign_params

    assert "disk-threshold" in GOALS
    params = reassign_params()
    param = params["disk_threshold_percent"]
    assert param.schema["exclusiveMinimum"] == 0 and param.schema["maximum"] == 100
    assert param.resolve(80) == 80
    for bad in (0, 150):
        with pytest.raises(ParamValidationError):
            param.resolve(bad)
    dag_defaults = {k: p.value for k, p in reassign_params().items()}  # resolve() kept 80 above
    assert any("goal 'disk-threshold' needs 'disk_threshold_percent'" in p
               for p in conf_problems("kafka_reassign", dag_defaults, {"goal": "disk-threshold"}))
    assert conf_problems("kafka_reassign", dag_defaults, {"goal": "disk-threshold", "disk_threshold_percent": 80}) == []
    assert defaults.planner_flags({"disk_threshold_percent": 80.0}) == ["--disk-threshold-percent", "80.0"]


def test_the_dag_planning_task_hands_the_threshold_to_the_planner(tmp_path: Path) -> None:
    from kafka_reassign.planning.spark.command import main as plan_main
    from kafka_reassign_airflow.operators.planning import PLANNER_LIMITS, PlannerSubmitOperator

    assert "disk_threshold_percent" in PLANNER_LIMITS
    op = PlannerSubmitOperator(task_id="plan_x", goal="disk-threshold", brokers=None, replication_factor=None,
                               limits={"disk_threshold_percent": 80.0, "throttle_bytes_per_sec": 20_000_000})
    snap = tmp_path / "snapshot.json"
    snap.write_text(json.dumps(generate(partitions=60, brokers=6, racks=3, dirs_per_broker=2,
                                        over_share=0.25, seed=2)))
    args = op.planner_args(str(snap), str(tmp_path / "plan.json"))
    assert args[args.index("--disk-threshold-percent") + 1] == "80.0"
    assert plan_main([*args, "--engine", "local", "--no-chart"]) == 0
    summary = json.loads((tmp_path / "plan.summary.json").read_text())
    assert summary["goal"] == "disk-threshold" and summary["moved_over_lower_bound"] <= 1.10
