"""KIP-435 steps (kafka_reassign.execution.steps); the executor's window: test_executor_state."""
from __future__ import annotations

import json
import random

import pytest

from kafka_reassign.planning.plan import PartitionMove
from kafka_reassign.cluster.state import ClusterState
from kafka_reassign.execution.steps import StepMove, plan_all_steps, plan_steps, steps_from_rows, steps_to_rows


def snapshot(n_brokers=6, partitions=None, min_isr="2"):
    parts = partitions or {}
    return {"version": 1,
            "brokers": [{"id": i, "rack": "abc"[i % 3], "log_dirs": [{"path": "/d1", "capacity_bytes": 10**12},
                                                                    {"path": "/d2", "capacity_bytes": 10**12}]}
                        for i in range(1, n_brokers + 1)],
            "topics": [{"name": t, "configs": {"min.insync.replicas": min_isr},
                        "partitions": [{"partition": i, "replicas": r, "leader": r[0], "size_bytes": s,
                                        "log_dirs": ["/d1"] * len(r)}
                                       for i, (r, s) in enumerate(ps)]}
                       for t, ps in parts.items()]}


def test_kip435_example_one_in_one_out_new_leader_first():
    steps = plan_steps([1, 2, 3], [4, 5, 6], min_isr=2)
    assert steps == [[4, 1, 2], [4, 5, 1], [4, 5, 6]]


def test_already_at_target_and_reorder_only():
    assert plan_steps([1, 2, 3], [1, 2, 3], 2) == []
    assert plan_steps([1, 2, 3], [3, 1, 2], 2) == [[3, 1, 2]]


def test_replication_factor_increase_from_below_min_isr_adds_enough_at_once():
    # RF 1 -> 3 with min ISR 2: the first step brings the list to 2 (KIP-435's exception).
    steps = plan_steps([1], [2, 3, 4], min_isr=2)
    assert len(steps[0]) >= 2 and steps[-1] == [2, 3, 4]
    for s in steps:
        assert len(s) >= 2 or s == steps[0] and len(s) >= 2


def test_lowering_rf_never_goes_below_min_isr():
    steps = plan_steps([1, 2, 3, 4], [5, 6], min_isr=2)
    assert steps[-1] == [5, 6]
    assert all(len(s) >= 2 for s in steps)
    steps = plan_steps([1, 2, 3, 4, 5], [1, 2, 3], min_isr=3)
    assert steps == [[1, 2, 3, 4], [1, 2, 3]]


def test_offline_replicas_are_dropped_first():
    steps = plan_steps([1, 2, 3], [1, 4, 5], min_isr=2, offline=[2])
    assert 2 not in steps[0]


@pytest.mark.parametrize("seed", range(300))
def test_invariants_random(seed):
    rng = random.Random(seed)
    brokers = list(range(1, 10))
    cur = rng.sample(brokers, rng.randint(1, 5))
    tgt = rng.sample(brokers, rng.randint(1, 5))
    min_isr = rng.randint(1, 3)
    steps = plan_steps(cur, tgt, min_isr)
    if cur == tgt:
        assert steps == []
        return
    assert steps[-1] == tgt
    floor = min(min_isr, len(tgt))
    prev = cur
    for i, s in enumerate(steps):
        assert len(set(s)) == len(s), s
        assert len(s) >= min(floor, len(s)) and (len(s) >= floor or len(prev) < floor)
        added = [b for b in s if b not in prev]
        dropped = [b for b in prev if b not in s]
        assert len(dropped) <= 1
        # One replica at a time, except to lift a list below min ISR up to it.
        assert len(added) <= max(1, floor - len(prev) + len(dropped))
        prev = s
    if tgt[0] not in cur:
        assert steps[0][0] == tgt[0], "the new preferred leader comes in first and leads the list"


def test_steps_for_moves_include_a_log_dir_step():
    snap = snapshot(partitions={"orders": [([1, 2, 3], 1000)]})
    state = ClusterState.from_snapshot(snap)
    move = PartitionMove("orders", 0, (1, 2, 3), ("/d2", "any", "any"))
    (step,) = plan_all_steps([move], state)
    assert step.is_log_dir_only and step.wanted_dirs() == {1: "/d2"} and step.brokers_touched == {1}


def test_each_step_names_the_dirs_of_the_replicas_it_adds():
    """A replica added by an early step is created in its wanted dir, not copied there later."""
    state = ClusterState.from_snapshot(snapshot(partitions={"orders": [([1, 2, 3], 1000)]}))
    move = PartitionMove("orders", 0, (4, 5, 6), ("/d2", "/d1", "/d2"))
    steps = plan_all_steps([move], state)
    movers = [s for s in steps if not s.is_log_dir_only]
    assert [s.target for s in movers] == [(4, 1, 2), (4, 5, 1), (4, 5, 6)]
    assert [{b: s.wanted_dirs()[b] for b in s.adding} for s in movers] == [{4: "/d2"}, {5: "/d1"}, {6: "/d2"}]
    # Dirs are named only for replicas with a wanted dir; the old replicas are left where they are.
    assert movers[0].wanted_dirs() == {4: "/d2"}
    # The closing log-dir step checks every wanted dir (skipped at run time when already in place).
    assert steps[-1].is_log_dir_only and steps[-1].wanted_dirs() == {4: "/d2", 5: "/d1", 6: "/d2"}


def test_a_step_adding_no_replica_with_a_wanted_dir_names_none():
    state = ClusterState.from_snapshot(snapshot(partitions={"orders": [([1, 2, 3], 1000)]}))
    move = PartitionMove("orders", 0, (4, 5, 6), ("any", "any", "/d2"))
    movers = [s for s in plan_all_steps([move], state) if not s.is_log_dir_only]
    assert [s.log_dirs is not None for s in movers] == [False, False, True]


def test_step_json_and_rows_round_trip():
    steps = [StepMove("t", 1, (1, 2, 3), (4, 1, 2), None, 100, 0, 3),
             StepMove("t", 2, (1, 2), (1, 2), ("/d2", "any"), 5, 1, 2)]
    assert [StepMove.from_json(json.loads(json.dumps(s.to_json()))) for s in steps] == steps
    assert steps_from_rows(json.loads(json.dumps(steps_to_rows(steps)))) == steps
    assert steps_from_rows(steps_to_rows(steps))[1].is_log_dir_only


def test_in_flight_moves_are_resumed_from_where_they_started():
    snap = snapshot(partitions={"t": [([4, 1, 2, 3], 1000), ([4, 5, 6, 1, 2, 3], 1000)]})
    snap["in_flight"] = [{"topic": "t", "partition": 0, "replicas": [4, 1, 2, 3], "adding": [4], "removing": [3]},
                         {"topic": "t", "partition": 1, "replicas": [4, 5, 6, 1, 2, 3], "adding": [4, 5, 6],
                          "removing": [1, 2, 3]}]
    state = ClusterState.from_snapshot(snap)
    steps = plan_all_steps([PartitionMove("t", 0, (4, 5, 6)), PartitionMove("t", 1, (4, 5, 6))], state)
    first = {s.partition: s for s in steps if s.step_index == 0}
    # Partition 0: an interrupted KIP-435 step is recomputed identically (so it is adopted).
    assert first[0].current == (1, 2, 3) and first[0].target == (4, 1, 2)
    # Partition 1: a one-shot move to the final target is adopted as a single step.
    assert first[1].current == (1, 2, 3) and first[1].target == (4, 5, 6) and first[1].step_count == 1


def _random_case(seed, n_parts, n_brokers):
    """Mixed moves: replica swaps, leader-only reorders, RF changes, log-dir moves."""
    rng = random.Random(seed)
    brokers = list(range(1, n_brokers + 1))
    parts, moves = [], []
    for i in range(n_parts):
        cur = rng.sample(brokers, rng.choice([1, 2, 3, 3, 3]))
        parts.append((cur, rng.choice([0, 10, 10**6, 10**9]) + rng.randrange(1000)))
        kind = rng.random()
        if kind < 0.1:
            tgt = cur[1:] + cur[:1] if len(cur) > 1 else cur
        elif kind < 0.2:
            moves.append(PartitionMove("t", i, tuple(cur), tuple(rng.choice(["/d1", "/d2", "any"]) for _ in cur)))
            continue
        else:
            tgt = list(cur)
            for _ in range(rng.randint(1, len(cur))):
                free = [b for b in brokers if b not in tgt]
                if free:
                    tgt[rng.randrange(len(tgt))] = rng.choice(free)
            free = [b for b in brokers if b not in tgt]
            if rng.random() < 0.15 and free:
                tgt = tgt + rng.sample(free, min(len(free), rng.randint(1, 2)))
            elif rng.random() < 0.1 and len(tgt) > 1:
                tgt = tgt[:-1]
        moves.append(PartitionMove("t", i, tuple(tgt)))
    state = ClusterState.from_snapshot(snapshot(n_brokers=n_brokers, partitions={"t": parts}))
    return state, moves


@pytest.mark.parametrize("seed", range(40))
def test_step_chains_start_at_current_and_end_at_target(seed):
    rng = random.Random(1000 + seed)
    state, moves = _random_case(seed, rng.choice([5, 50, 300, 900]), rng.choice([3, 6, 12, 40]))
    last: dict[tuple[str, int], tuple[int, ...]] = {}
    for s in plan_all_steps(moves, state):
        p = state.partition(s.topic, s.partition)
        expected_start = last.get(s.key, tuple(p.replicas) if s.step_index == 0 else None)
        if not s.is_log_dir_only:
            assert s.current == expected_start, "a step starts where the previous one ended"
        assert 0 <= s.step_index < s.step_count
        last[s.key] = s.target
    for m in moves:
        p = state.partition(m.topic, m.partition)
        if tuple(p.replicas) != m.replicas:
            assert last[m.key] == m.replicas
