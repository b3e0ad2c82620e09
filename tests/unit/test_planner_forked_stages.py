"""Driver stages of a big plan in a forked child (the rules and the summary's balance figures beside
the executor order): the same plan, summary and errors as in one process."""
from __future__ import annotations

import os

import pytest

from kafka_reassign.errors import GoalError
from kafka_reassign.planning.forked import Forked
from kafka_reassign.planning.spark import flow, plan
from kafka_sim.generate import GenerateOptions, generate_snapshot
from tests.unit.test_planner_inputs import tiny


def test_forked_computes_in_a_child_and_raises_its_error_here():
    assert Forked(True, os.getpid).result() != os.getpid()
    assert Forked(False, os.getpid).result() == os.getpid()
    with pytest.raises(ZeroDivisionError):
        Forked(True, divmod, 1, 0).result()


def _without_timings(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k not in ("timings", "plan_seconds")}


def test_a_forked_reconcile_gives_the_same_plan_and_summary(monkeypatch):
    snap = generate_snapshot(GenerateOptions(brokers=9, racks=3, topics=12, partitions=20, skew=1.0, seed=5))
    one = plan(snap, "rebalance", engine="local")
    forks: list[int] = []
    monkeypatch.setattr(flow, "processes_for", lambda n: forks.append(n) or 2)
    two = plan(snap, "rebalance", engine="local")
    assert forks and one.plan.moves and one.plan.to_json() == two.plan.to_json()
    assert _without_timings(one.summary) == _without_timings(two.summary)


def test_a_rule_broken_in_the_forked_child_is_raised_before_the_estimate(monkeypatch):
    monkeypatch.setattr(flow, "processes_for", lambda n: 2)
    monkeypatch.setattr(flow, "with_estimate", lambda *a: pytest.fail("estimated a plan that breaks a rule"))
    with pytest.raises(GoalError, match=r"excluded topics \['t'\] keep 1 replicas on"):
        plan(tiny(), "remove-brokers", engine="local", brokers=[1], exclude_topics=["t"])


def test_a_niced_child_runs_at_the_lowest_priority():
    assert Forked(True, os.nice, 0, nice=19).result() == min(19, os.nice(0) + 19)


def _moves(n: int) -> list:
    from kafka_reassign.planning.plan import PartitionMove
    return [PartitionMove("t", p, (p % 5, (p + 1) % 5, (p + 2) % 5)) for p in range(n)]


def test_the_plan_files_text_made_ahead_is_the_text_written(monkeypatch, tmp_path):
    from kafka_reassign.planning import forked
    from kafka_reassign.planning.plan import ReassignmentPlan

    monkeypatch.setattr(forked, "SPLIT_FROM", 10)
    expected = ReassignmentPlan(_moves(50)).dumps(indent=2)
    ahead = ReassignmentPlan(_moves(50))
    ahead.make_text_ahead()
    assert ahead._text_ahead is not None
    ahead.dump(tmp_path / "plan.json")
    assert (tmp_path / "plan.json").read_text() == expected + "\n" and ahead._text_ahead is None
    changed = ReassignmentPlan(_moves(50))
    changed.make_text_ahead()
    changed.moves.pop()  # made ahead of a change: the text is made again
    assert changed.dumps(indent=2) == ReassignmentPlan(_moves(49)).dumps(indent=2)
    small = ReassignmentPlan(_moves(5))
    small.make_text_ahead()  # below the split: nothing forked
    assert small._text_ahead is None


def test_a_plan_not_written_leaves_no_child(monkeypatch):
    from kafka_reassign.planning import forked
    from kafka_reassign.planning.plan import ReassignmentPlan

    monkeypatch.setattr(forked, "SPLIT_FROM", 10)
    p = ReassignmentPlan(_moves(50))
    p.make_text_ahead()
    pid = p._text_ahead[0]._child[0]
    p.discard_text_ahead()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, 0)  # reaped already
