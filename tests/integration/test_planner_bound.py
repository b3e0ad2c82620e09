"""The planner's lower bound on every shape of the planner benchmark's generator, on a real local
Spark session: no plan moves less than the least any plan must move to reach the balance the goal
accepts, the bound is above 0 where the cluster is outside the tolerance, and 0 once it is inside.
With the pandas engine (no JVM, a few seconds): the same under every listed data goal together
(disk alone, the default list, with topic-spread).

Small sizes (24 brokers, 2,400 partitions) keep the module under a minute on 2 cores; the shapes,
goals and options are the benchmark's own (:mod:`benchmarks.planner_shapes`)."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from benchmarks.planner import applied
from benchmarks.planner_shapes import SHAPES, TRAFFIC_SHAPES, Shape, _write, evaluate, generate
from kafka_reassign.planning.spark import PlanResult, plan_file

pytestmark = [pytest.mark.spark]

BROKERS, TOPICS, PARTITIONS = 24, 40, 20
TOLERANCE = 0.04  # PlanOptions.balance_tolerance, the default every benchmark run uses
DISK_ONLY = "rack-aware,capacity,disk,leader-count"
WITH_SPREAD = "rack-aware,capacity,disk,network-in,topic-spread,leader-count"


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from kafka_reassign.planning.spark.spark_session import get_spark

    session = get_spark("local[2]", app_name="kafka-reassign-bound-tests")
    yield session
    session.stop()


def _plan(s: Shape, spark: Any, out: Path) -> PlanResult:
    res = plan_file(str(s.path), s.goal, spark=spark, balance_tolerance=TOLERANCE, **s.options)
    out.write_text(json.dumps(res.plan.to_json()), encoding="utf-8")
    return res


@pytest.mark.parametrize("shape", SHAPES)
def test_no_plan_moves_less_than_the_bound(shape: str, spark: Any, tmp_path: Path) -> None:
    s = generate(shape, TOPICS, PARTITIONS, BROKERS, tmp_path / f"{shape}.jsonl")
    res = _plan(s, spark, tmp_path / "plan.json")
    summary = res.summary
    after, _ = applied(s, tmp_path / "plan.json")
    moved = evaluate(s, after)["moved"]  # counted from the plan file, not taken from the summary
    bound = summary["lower_bound_bytes"]
    drains = bool(s.options.get("brokers"))
    assert summary["balance_before"] > 1 + TOLERANCE or drains, "every benchmark shape starts unbalanced"
    assert bound > 0
    assert moved == pytest.approx(summary["data_to_move_bytes"], abs=1)
    assert moved >= bound
    if summary["reaches_accepted_balance"]:
        assert summary["balance_after"] <= 1 + TOLERANCE
        assert summary["moved_over_lower_bound"] == pytest.approx(moved / bound, abs=1e-4)
        assert summary["moved_over_lower_bound"] >= 1.0
        # once inside the tolerance nothing more must move: the bound of the next plan is 0
        inside = dataclasses.replace(s, path=tmp_path / "after.jsonl", replicas=after)
        _write(inside)
        # the pandas engine runs the same search and the same summary: it saves a Spark job
        again = plan_file(str(inside.path), s.goal, engine="local", balance_tolerance=TOLERANCE, **s.options)
        assert again.summary["balance_before"] <= 1 + TOLERANCE or drains
        assert again.summary["lower_bound_bytes"] == 0
    else:
        # the tolerance is out of reach (replica sizes, racks): the summary says so and shows no ratio
        assert summary["moved_over_lower_bound"] is None
        assert any("above the mean utilisation" in w for w in summary["warnings"])


@pytest.mark.parametrize("shape", SHAPES + TRAFFIC_SHAPES)
def test_the_joint_bound_of_the_listed_goals_is_never_above_what_is_moved(shape: str, tmp_path: Path) -> None:
    s = generate(shape, 20, 10, 12, tmp_path / f"{shape}.jsonl")  # 12 brokers, 600 replicas
    disk = None
    for goals in (DISK_ONLY, None, WITH_SPREAD):
        res = plan_file(str(s.path), s.goal, engine="local", balance_tolerance=TOLERANCE, **s.options,
                        **({"balance_goals": goals} if goals else {}))
        out = tmp_path / "plan.json"
        out.write_text(json.dumps(res.plan.to_json()), encoding="utf-8")
        moved = evaluate(s, applied(s, out)[0])["moved"]
        summary, bound = res.summary, res.summary["lower_bound_bytes"]
        by_goal = summary["lower_bound_by_goal"]
        assert moved == pytest.approx(summary["data_to_move_bytes"], abs=1) and moved >= bound > 0
        assert set(by_goal) == {"disk"} | {g for g in ("network-in", "topic-spread") if g in summary["balance_goals"]}
        assert summary["lower_bound_goals"][0] == "disk" and set(summary["lower_bound_goals"]) <= set(by_goal)
        # per broker the largest term of the counted goals: at least each counted goal's own bound
        assert all(bound >= by_goal[g] for g in summary["lower_bound_goals"])
        if disk is None:
            disk = by_goal["disk"]
            assert bound == disk  # disk alone: the disk goal's bound
        assert by_goal["disk"] == disk  # the same snapshot and tolerance whatever else is listed
