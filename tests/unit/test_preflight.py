"""Pre-flight stall check (kafka_reassign.planning.preflight) on explicit states."""
from __future__ import annotations

import pytest

from kafka_reassign.errors import PreflightError
from kafka_reassign.planning.preflight import ProduceRates, effective_rates, enforce, preflight, smallest_working_throttle
from kafka_reassign.cluster.state import ClusterState
from kafka_reassign.execution.steps import StepMove
from kafka_reassign.throttle.specs import LEADER_RATE

MB = 1_000_000
from sim_snapshots import make_snapshot  # noqa: E402


def state_with(rate: float) -> ClusterState:
    return ClusterState.from_snapshot(make_snapshot(brokers=6, racks=3, topics={
        "orders": {"partitions": 3, "rf": 3, "size_bytes": 100 * MB, "bytes_in_per_sec": rate}}))


STEP = StepMove("orders", 0, (1, 2, 3), (4, 2, 3), size_bytes=100 * MB)
GIVEN = ProduceRates(rates={}, source="given")


def test_refuses_below_the_stall_point_naming_partition_brokers_and_throttle():
    report = preflight([STEP], state_with(2 * MB), 5 * MB, GIVEN)
    assert [(p.name, p.broker, p.side) for p in report.stalls] == [("orders-0", 1, "leader")]
    assert report.smallest_throttle == 6_989_000  # 1.1 x (2 x 2 + 2 / 0.85) MB/s, rounded up
    with pytest.raises(PreflightError) as info:
        enforce(report, allow_stalling_moves=False)
    text = str(info.value)
    assert "nothing was written" in text and "orders-0" in text and "broker(s) 1" in text
    assert "7.0 MB/s (6989000)" in text and "allow_stalling_moves" in text
    assert info.value.kinds == {"stalling_move", "throttle_too_low"}


def test_allowed_stalling_moves_are_named_in_a_warning():
    report = preflight([STEP], state_with(2 * MB), 5 * MB, GIVEN)
    warnings = enforce(report, allow_stalling_moves=True)
    assert any("allow_stalling_moves is set" in w and "orders-0" in w for w in warnings)


def test_passes_once_the_throttle_is_above_the_stall_point():
    report = preflight([STEP], state_with(2 * MB), 6_989_000, GIVEN)
    assert report.stalls == []
    # Only 1 KB/s of catch-up left: slow, and the warning says what would help.
    warnings = enforce(report, allow_stalling_moves=False)
    assert any("slow moves on broker 1" in w and "orders-0" in w for w in warnings)
    assert enforce(preflight([STEP], state_with(2 * MB), 50 * MB, GIVEN), False) == []


def test_unwritten_partitions_never_stall_and_missing_rates_are_said():
    assert preflight([STEP], state_with(0.0), 2_000, GIVEN).stalls == []
    none = ProduceRates(rates={}, source="none")
    assert any("stall check skipped" in w for w in enforce(preflight([STEP], state_with(0.0), 5 * MB, none), False))


def test_lower_rate_set_by_someone_else_counts_and_is_named():
    configs = {("broker", "1"): {LEADER_RATE: str(4 * MB)}}
    assert effective_rates(50 * MB, configs, [1, 2]) == {1: 4 * MB}
    report = preflight([STEP], state_with(2 * MB), 50 * MB, GIVEN, current_configs=configs)
    assert [p.broker for p in report.stalls] == [1]
    assert any("keep a lower throttle someone else set" in p.reason for p in report.problems())


def test_smallest_working_throttle_rounds_up_strictly_above():
    assert smallest_working_throttle([]) is None
    report = preflight([STEP], state_with(1_000_000 / 3), 1 * MB, GIVEN)
    assert report.smallest_throttle == 1_165_000 and report.stalls


def test_per_step_lists_check_each_move_alone_and_warn_about_moving_together():
    snap = make_snapshot(brokers=6, racks=3, topics={"orders": {
        "partitions": 2, "rf": 3, "size_bytes": 100 * MB, "bytes_in_per_sec": 1 * MB,
        "replicas": [[1, 2, 3], [1, 3, 2]]}})
    state = ClusterState.from_snapshot(snap)
    steps = [StepMove("orders", 0, (1, 2, 3), (4, 2, 3), size_bytes=100 * MB),
             StepMove("orders", 1, (1, 3, 2), (5, 3, 2), size_bytes=100 * MB)]
    # Lists for the whole run: broker 1 carries 4 MB/s of in-sync fetches, each move needs 5 MB/s.
    assert preflight(steps, state, 5 * MB, GIVEN).stalls
    # Lists per step: each move alone needs 3 MB/s; both at once need 6 MB/s.
    report = preflight(steps, state, 5 * MB, GIVEN, per_step=True)
    assert report.stalls == [] and report.together == {1: 6 * MB}
    assert any("led by broker 1 need 6.0 MB/s" in w for w in report.warnings())


def test_the_estimate_given_the_checks_stalling_points_is_the_one_it_makes():
    """prepare hands the pre-flight check's points to the estimate instead of making them again."""
    from kafka_reassign.planning.estimate import Limits, estimate_run

    state = state_with(2 * MB)
    report = preflight([STEP], state, 5 * MB, GIVEN, per_step=True)
    limits = Limits(rate=5 * MB, broker_rates=report.kept_lower)
    given = estimate_run([STEP], state, limits, report.loads, report.stalls)
    assert given == estimate_run([STEP], state, limits) and given.stalled == ["orders-0"]
