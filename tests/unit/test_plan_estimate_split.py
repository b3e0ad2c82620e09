"""A big plan's steps made in two processes: the same loads, in the same order, as in one."""
from __future__ import annotations

import os

import pytest

from kafka_reassign.planning.forked import fork_map
from kafka_reassign.planning.plan_estimate import estimate_plan, move_loads, plan_loads
from tests.unit.test_estimate import MB, _generated_plan


def test_two_processes_make_the_same_loads_in_plan_order():
    # RF changes and 3-replica swaps gain several replicas: which comes first is chosen across every
    # such move, so they must stay together; the generated plan has them in both halves.
    moves = _generated_plan(600, seed=11)
    assert sum(len(set(m.target) - set(m.current)) >= 2 for m in moves[300:]) > 20
    one = move_loads(moves)
    assert plan_loads(moves, split=2) == one
    keys = list(dict.fromkeys(ld.key for ld in one))
    assert keys == [k for m in moves if (k := (m.topic, m.partition)) in set(keys)] and len(one) > len(keys)


@pytest.mark.parametrize("rate", [3 * MB, 20 * MB])
def test_the_split_estimate_is_the_estimate_of_one_process(monkeypatch, rate):
    import kafka_reassign.planning.plan_estimate as pe

    moves = _generated_plan(400, seed=3)
    whole, whole_stalls = estimate_plan(moves, rate, network={3: 5 * MB})
    monkeypatch.setattr(pe, "processes_for", lambda n: 2)
    split, split_stalls = estimate_plan(moves, rate, network={3: 5 * MB})
    assert split.to_json() == whole.to_json() and split_stalls == whole_stalls


def test_fork_map_returns_in_order_and_runs_the_rest_elsewhere():
    pids = fork_map(lambda i: (i, os.getpid()), 3)
    assert [i for i, _ in pids] == [0, 1, 2]
    assert pids[0][1] == os.getpid() and len({p for _, p in pids}) == 3


def test_fork_map_raises_a_childs_error_here():
    def piece(i: int) -> int:
        if i == 1:
            raise ValueError("piece 1 failed")
        return i

    with pytest.raises(ValueError, match="piece 1 failed"):
        fork_map(piece, 2)


def test_fork_map_names_a_child_that_died_without_a_result():
    def piece(i: int) -> int:
        if i == 1:
            os._exit(3)
        return i

    with pytest.raises(RuntimeError, match="without a result"):
        fork_map(piece, 2)
