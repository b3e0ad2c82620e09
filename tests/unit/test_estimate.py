"""KIP-73 time estimates with in-sync traffic counted (kafka_reassign.planning.estimate)."""
from __future__ import annotations

import math

import pytest

from kafka_reassign.planning.estimate import (SOURCE_FORMULA, SOURCE_REHEARSAL, Estimate, Limits, estimate_batches,
                                     quota_load, stall_points, step_loads)
from kafka_reassign.cluster.state import ClusterState
from kafka_reassign.planning.bounds import throttle_bound
from kafka_reassign.execution.steps import StepMove
from kafka_reassign.units import format_duration
from sim_snapshots import make_snapshot

MB = 1_000_000


def state_with(rate: float, partitions: int = 2, size: int = 100 * MB) -> ClusterState:
    return ClusterState.from_snapshot(make_snapshot(brokers=6, racks=3, topics={
        "orders": {"partitions": partitions, "rf": 3, "size_bytes": size, "bytes_in_per_sec": rate}}))


def test_unwritten_partition_moves_at_the_throttle():
    state = state_with(0.0)
    steps = [StepMove("orders", 0, (1, 2, 3), (4, 2, 3), size_bytes=100 * MB)]
    est, per_batch = estimate_batches([steps], state, Limits(rate=10 * MB))
    assert est.seconds == pytest.approx(10.0)
    assert est.bound_seconds == pytest.approx(10.0) and est.ratio == pytest.approx(1.0)
    assert per_batch == [pytest.approx(10.0)]
    assert est.source == SOURCE_FORMULA and "formula" in est.describe()


def test_in_sync_followers_count_in_the_leader_quota():
    # P = 1 MB/s, 2 in-sync followers: the leader's quota carries 2 MB/s of in-sync fetches and
    # the new replica must also keep up with 1 MB/s: S / (R - 3P) = 100 MB / 7 MB/s.
    state = state_with(1 * MB)
    loads = step_loads([StepMove("orders", 0, (1, 2, 3), (4, 2, 3), size_bytes=100 * MB)], state)
    assert loads[0].in_sync_followers == 2 and loads[0].leader == 1
    est, _ = estimate_batches([[StepMove("orders", 0, (1, 2, 3), (4, 2, 3), size_bytes=100 * MB)]], state,
                              Limits(rate=10 * MB))
    assert est.seconds == pytest.approx(100 / 7)
    assert est.ratio == pytest.approx(10 / 7)


def test_move_stalls_at_or_below_k_plus_one_times_p_as_real_kafka_copies():
    # Fluid: (k+1)P = 3 MB/s. The catching-up fetch appends at least 85% of what the quotas
    # count, and 10% is kept on top: 1.1 x (2 + 1 / 0.85) MB/s = 3.494 MB/s (real Kafka 4.3.1
    # stopped at about 3.15 P: benchmarks/preflight_stall.py).
    state = state_with(1 * MB)
    steps = [StepMove("orders", 0, (1, 2, 3), (4, 2, 3), size_bytes=100 * MB)]
    est, _ = estimate_batches([steps], state, Limits(rate=3.45 * MB))
    assert math.isinf(est.seconds) and est.stalled == ["orders-0"]
    assert "never" in est.describe()
    point = [p for p in stall_points(step_loads(steps, state), Limits(rate=3 * MB)) if p.side == "leader"][0]
    assert point.needed == pytest.approx(3_494_118, abs=1) and point.stalls
    assert not [p for p in stall_points(step_loads(steps, state), Limits(rate=3_494_118)) if p.stalls]


def test_every_throttled_partition_of_a_leader_shares_its_quota():
    # orders-0 and orders-1 both led by broker 1 (make_snapshot rotates leaders: 0 -> 1, 1 -> 2):
    # use explicit replicas so both are led by 1.
    snap = make_snapshot(brokers=6, racks=3, topics={"orders": {
        "partitions": 2, "rf": 3, "size_bytes": 100 * MB, "bytes_in_per_sec": 1 * MB,
        "replicas": [[1, 2, 3], [1, 3, 2]]}})
    state = ClusterState.from_snapshot(snap)
    steps = [StepMove("orders", 0, (1, 2, 3), (4, 2, 3), size_bytes=100 * MB),
             StepMove("orders", 1, (1, 3, 2), (5, 3, 2), size_bytes=100 * MB)]
    loads = step_loads(steps, state)
    assert quota_load(loads).leader == {1: 4 * MB}
    points = [p for p in stall_points(loads, Limits(rate=5 * MB)) if p.side == "leader"]
    assert all(p.needed == pytest.approx(1.1 * (4 * MB + 1 * MB / 0.85)) and p.stalls for p in points)


def test_follower_quota_counts_new_replicas_once_in_sync():
    state = state_with(2 * MB)
    steps = [StepMove("orders", 0, (1, 2, 3), (1, 2, 4), size_bytes=10 * MB),
             StepMove("orders", 1, (2, 3, 4), (2, 3, 5), size_bytes=10 * MB)]
    q = quota_load(step_loads(steps, state))
    assert q.follower == {4: 2 * MB, 5: 2 * MB}


def test_pipelined_is_the_busiest_broker_and_batches_add_up():
    state = state_with(0.0, partitions=4)
    b1 = [StepMove("orders", 0, (1, 2, 3), (4, 2, 3), size_bytes=100 * MB)]
    b2 = [StepMove("orders", 3, (4, 5, 6), (1, 5, 6), size_bytes=50 * MB)]
    seq, per = estimate_batches([b1, b2], state, Limits(rate=10 * MB))
    pipe, _ = estimate_batches([b1, b2], state, Limits(rate=10 * MB), pipelined=True)
    assert per == [pytest.approx(10.0), pytest.approx(5.0)] and seq.seconds == pytest.approx(15.0)
    # broker 4 receives 100 MB (follower quota) and sends 50 MB (leader quota): separate quotas
    assert pipe.seconds == pytest.approx(10.0) and pipe.broker_seconds[4] == pytest.approx(10.0)
    bound = throttle_bound(step_loads(b1 + b2, state), Limits(rate=10 * MB))
    assert bound.seconds == pytest.approx(10.0) and bound.broker in (1, 4)


def test_log_dir_move_uses_its_own_throttle():
    # the KIP-113 limit, not the 50 MB/s replication throttle, copied at the alter-log-dirs
    # fetch loop's rate (below the limit) while the log grows at 1 MB/s
    from kafka_reassign.planning.catch_up import log_dir_copy_rate
    state = state_with(1 * MB)
    steps = [StepMove("orders", 0, (1, 2, 3), (1, 2, 3), ("/data/d1", "any", "any"), size_bytes=100 * MB)]
    est, _ = estimate_batches([steps], state, Limits(rate=50 * MB, log_dir_rate=11 * MB))
    assert est.seconds == pytest.approx(100 * MB / (log_dir_copy_rate(100 * MB, 11 * MB) - 1 * MB))
    assert 100 / (11 - 1) < est.seconds < 100 / (0.75 * 11 - 1)


def test_lower_rate_kept_on_a_broker_slows_it():
    state = state_with(0.0)
    steps = [StepMove("orders", 0, (1, 2, 3), (4, 2, 3), size_bytes=100 * MB)]
    est, _ = estimate_batches([steps], state, Limits(rate=10 * MB, broker_rates={4: 5 * MB}))
    assert est.seconds == pytest.approx(20.0) and est.busiest_broker == 4


def test_estimate_json_round_trip_and_text():
    est = Estimate(seconds=3725.0, bound_seconds=2500.0, source=SOURCE_REHEARSAL, busiest_broker=3,
                   detail={"cpu_seconds": 1.5})
    back = Estimate.from_json(est.to_json())
    assert back == est
    assert "1h02m" in est.describe() and "1.49x" in est.describe() and "rehearsal" in est.describe()
    stalled = Estimate.from_json(Estimate(seconds=math.inf, bound_seconds=1.0, stalled=["a-0"]).to_json())
    assert math.isinf(stalled.seconds) and stalled.stalled == ["a-0"]
    assert format_duration(42) == "42s" and format_duration(61) == "1m01s"
    assert format_duration(math.inf) == "never (stalls)"


def test_estimate_view_finds_the_prepared_run_among_a_runs_xcoms():
    from kafka_reassign.rehearsal.report import estimate_view
    est = Estimate(seconds=100.0, bound_seconds=80.0, source=SOURCE_REHEARSAL).to_json()
    prepared = {"steps": [], "estimate": est, "rehearsal": {"predicted_seconds": 100.0, "estimate": est, "text": "t"}}
    view = estimate_view([{"plan_file": "p.json"}, [1, 2], prepared])
    assert view["estimate"]["source"] == "rehearsal" and view["rehearsal"] == {"predicted_seconds": 100.0, "text": "t"}
    assert estimate_view([{"plan_file": "p.json"}]) is None


def test_planner_entry_point_is_the_executors_estimate():
    # What the planner holds as plain data gives the estimate prepare makes from the cluster state:
    # the same KIP-435 steps (RF 3 -> 3 moving two replicas, one RF increase), the same quotas.
    from kafka_reassign.execution.steps import plan_all_steps
    from kafka_reassign.planning.estimate import estimate_run
    from kafka_reassign.planning.plan_estimate import PlannedMove, estimate_plan
    from kafka_reassign.planning.plan import PartitionMove

    state = state_with(1 * MB, partitions=3)
    targets = {0: (4, 5, 3), 1: (2, 3, 4, 6), 2: (6, 4, 5)}
    moves = [PartitionMove("orders", p, t) for p, t in targets.items()]
    want = estimate_run(plan_all_steps(moves, state), state, Limits(rate=10 * MB))
    planned = [PlannedMove("orders", p, state.partition("orders", p).replicas, t, 100 * MB, produce=1 * MB,
                           leader=state.partition("orders", p).leader) for p, t in targets.items()]
    got, stalls = estimate_plan(planned, 10 * MB)
    assert got.seconds == pytest.approx(want.seconds) and got.bound_seconds == pytest.approx(want.bound_seconds)
    assert got.broker_seconds == pytest.approx(want.broker_seconds) and stalls == []
    never, stalls = estimate_plan(planned, 3 * MB)  # 3 MB/s = (k+1)P for orders-0 on its leader
    assert math.isinf(never.seconds) and any(s.broker == 1 and s.side == "leader" for s in stalls)


def _generated_plan(n: int, seed: int) -> list:
    """``n`` random moves on 12 brokers: swaps, RF changes, reorders, offline replicas, log dirs."""
    import random

    from kafka_reassign.planning.plan_estimate import PlannedMove

    rng, out = random.Random(seed), []
    for p in range(n):
        current = tuple(rng.sample(range(12), 3))
        target = list(rng.sample(range(12), rng.choice([2, 3, 3, 4])))
        dirs = None
        if p % 9 == 0:  # a KIP-113 move between the current replicas' own log dirs
            target, dirs = list(current), tuple(rng.choice(["any", "/d2"]) for _ in current)
        out.append(PlannedMove(f"t{p % 5}", p, current, tuple(target), size_bytes=rng.randint(0, 500) * MB,
                               produce=rng.choice([0.0, 0.5 * MB, 2 * MB]), leader=rng.choice([current[1], -1]),
                               offline=current[2:] if p % 7 == 0 else (), min_isr=rng.choice([1, 2]),
                               current_dirs=("/d1",) * 3, log_dirs=dirs))
    return out


@pytest.mark.parametrize("rate", [3 * MB, 20 * MB, None])
def test_plan_estimate_is_the_run_estimate_of_its_steps(rate):
    # estimate_plan makes steps, loads and stall points once; the figures must be estimate_run's on
    # the executor's steps, and its stall points every stalling point of those steps.
    from kafka_reassign.execution.steps import plan_all_steps
    from kafka_reassign.planning.estimate import estimate_run
    from kafka_reassign.planning.plan_estimate import estimate_plan, planned_state
    from kafka_reassign.planning.plan import PartitionMove

    moves = _generated_plan(80, seed=5)
    state, limits = planned_state(moves), Limits(rate=rate, network={3: 5 * MB})
    steps = plan_all_steps([PartitionMove(m.topic, m.partition, m.target, log_dirs=m.log_dirs) for m in moves], state)
    want = estimate_run(steps, state, limits)
    got, stalls = estimate_plan(moves, rate, network={3: 5 * MB})
    assert got.to_json() == want.to_json() and got.broker_seconds == want.broker_seconds
    loads = step_loads(steps, state)
    every = [p for p in stall_points(loads, limits, quota_load(loads, per_step=True)) if p.stalls]
    assert stalls == every and got.stalled == sorted({p.name for p in every})
    assert bool(stalls) == (rate == 3 * MB) and math.isinf(got.seconds) == bool(stalls)
    one, per_batch = estimate_batches([steps], state, limits, pipelined=True, per_step=True)
    assert per_batch == [max(one.broker_seconds.values())] and one.to_json() == want.to_json()


@pytest.mark.parametrize("rate", [3 * MB, None])
def test_run_estimate_on_the_preflight_checks_loads_is_the_one_it_makes(rate):
    # prepare hands the pre-flight check's step loads to estimate_run instead of making them again.
    from kafka_reassign.execution.steps import plan_all_steps
    from kafka_reassign.planning.estimate import estimate_run
    from kafka_reassign.planning.plan import PartitionMove
    from kafka_reassign.planning.plan_estimate import planned_state
    from kafka_reassign.planning.preflight import ProduceRates, preflight

    moves = _generated_plan(60, seed=11)
    state, limits = planned_state(moves), Limits(rate=rate, log_dir_rate=rate)
    steps = plan_all_steps([PartitionMove(m.topic, m.partition, m.target, log_dirs=m.log_dirs) for m in moves], state)
    check = preflight(steps, state, rate, ProduceRates(rates={}, source="given"), log_dir_throttle=rate, per_step=True)
    assert check.loads == step_loads(steps, state)
    got = estimate_run(steps, state, limits, check.loads)
    assert got.to_json() == estimate_run(steps, state, limits).to_json()
