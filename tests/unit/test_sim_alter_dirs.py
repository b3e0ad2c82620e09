"""The KIP-113 copy rate as Kafka's alter-log-dirs fetch loop makes it (kafka_sim.alter_dirs)."""
from __future__ import annotations

import math

import pytest

from kafka_sim.alter_dirs import effective_rate

MB = 1_000_000
MIB = 1_048_576


def test_large_batches_copy_three_per_back_off_like_kafka():
    # Kafka 4.3.1 (benchmarks/calibration_timed.py, scenario c): 30 MB of 0.9 MB batches under
    # 3 MB/s grew by 2.7 MB a second: each read records 1 MiB, a fourth read takes the rate over
    # the bound, then the thread waits its 1 s back-off; the whole copy took about 13 s
    rate = effective_rate(30 * MB, 3 * MB, 900_000, MIB)
    assert 30 * MB / rate == pytest.approx(13.0)


def test_whole_batch_reads_approach_ten_elevenths_of_the_bound():
    # no partial batch: the window weighs eleven bursts against ten seconds
    rate = effective_rate(10_000 * MB, 20 * MB, 16_384, MIB)
    assert 20 * MB * 10 / 11 < rate < 20 * MB * 0.95


def test_a_copy_done_in_the_first_burst_is_not_held_and_no_limit_stays_none():
    assert effective_rate(MB, 3 * MB, 900_000, MIB) == math.inf
    assert effective_rate(30 * MB, math.inf, 900_000, MIB) == math.inf


def test_long_copies_are_extrapolated_from_the_periodic_course():
    # past sixty back-offs the rest goes at the last window's rate: close to a short copy's steady rate
    short, long = effective_rate(1_000 * MB, 50 * MB, 900_000, MIB), effective_rate(100_000 * MB, 50 * MB, 900_000, MIB)
    assert abs(long - short) / short < 0.05
