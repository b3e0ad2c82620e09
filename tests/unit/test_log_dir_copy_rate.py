"""The estimator's KIP-113 copy rate (kafka_reassign.planning.catch_up.log_dir_copy_rate) against
Kafka 4.3.1 and the simulator's alter-log-dirs fetch loop (kafka_sim.alter_dirs)."""
from __future__ import annotations

import math

import pytest

from kafka_reassign.execution.steps import StepMove
from kafka_reassign.planning.catch_up import log_dir_copy_rate, log_dir_throttle_needed
from kafka_reassign.planning.estimate import Limits, estimate_batches
from kafka_sim.alter_dirs import effective_rate
from test_estimate import state_with

MB = 1_000_000
FILL_BATCH = 900_000  # the calibration's logs: librdkafka batches of 0.9 MB on disk


def test_thirty_megabytes_under_three_take_what_kafka_took():
    # Kafka 4.3.1 (benchmarks/calibration_timed.py, c): 12.7-13.4 s where size / limit is 10 s
    seconds = 30 * MB / log_dir_copy_rate(30 * MB, 3 * MB)
    assert 12.7 * 0.9 < seconds < 13.4 * 1.1


@pytest.mark.parametrize("bound", [1 * MB, 3 * MB, 10 * MB, 50 * MB])
@pytest.mark.parametrize("window_seconds", [30, 300, 3000])
def test_long_copies_agree_with_the_simulators_fetch_loop(window_seconds: int, bound: int):
    # copies longer than the quota window: the window's 10 s over 11 samples and the 86% of a
    # read that is whole batches set the rate, about 0.79 of the limit
    size = window_seconds * bound
    ours = log_dir_copy_rate(size, bound)
    sim = effective_rate(size, bound, FILL_BATCH, 1024 * 1024)
    assert ours == pytest.approx(sim, rel=0.02)
    assert 0.75 * bound < ours < 0.83 * bound


def test_a_copy_within_the_first_burst_or_unlimited_is_not_held():
    assert math.isinf(log_dir_copy_rate(5 * MB, 10 * MB))
    assert math.isinf(log_dir_copy_rate(500 * MB, math.inf))


def test_a_log_dir_move_stalls_where_the_fetch_loop_cannot_outrun_the_writes():
    # 8.5 MB/s of writes under a 10 MB/s limit: the plain limit would finish (100 MB / 1.5 MB/s),
    # the loop copies about 7.9 MB/s and never catches up
    state = state_with(8.5 * MB)
    steps = [StepMove("orders", 0, (1, 2, 3), (1, 2, 3), ("/data/d1", "any", "any"), size_bytes=100 * MB)]
    est, _ = estimate_batches([steps], state, Limits(rate=None, log_dir_rate=10 * MB))
    assert math.isinf(est.seconds) and est.stalled == ["orders-0"]
    assert log_dir_throttle_needed(8.5 * MB) > 10 * MB > log_dir_throttle_needed(6 * MB)
