"""Small breaks of a quota at its bound are taken on a grid of tenths of a sample (issue 22).

A leader quota at its bound lets through what leaves its window, so each rate change comes back
a window later as a break and a re-plan. A break that changes the slope by at most
``SMALL_BREAK`` of the bound waits for the next tick (replication_quotas._on_grid); jumps and
larger steps stay exact, and the throttled scenario of test_sim_determinism takes the same
moving time.
"""
from __future__ import annotations

import math
import statistics

import pytest

from kafka_sim import replication_quotas
from kafka_sim.quotas import QuotaMeter
from kafka_sim.replication_quotas import ReplicationQuotas

from test_sim_determinism import trace

MB = 1_000_000.0
BOUND = 10 * MB


class _At(ReplicationQuotas):
    """Just the clock the grid needs."""

    def __init__(self, t: float) -> None:
        self._t = t


def _meter(second_rate: float, at: float = 3.05) -> QuotaMeter:
    meter = QuotaMeter(aged=True)
    meter.set_rate(0.0, BOUND)
    meter.set_rate(at, second_rate)
    meter.advance(12.0)  # the opening breakpoint (0 -> bound, a large step) has left the window
    return meter


def test_a_small_step_waits_for_the_next_tick():
    meter = _meter(BOUND * 1.001)
    assert meter.break_step() == pytest.approx(0.001 * BOUND)
    assert meter.break_at(12.0) == pytest.approx(14.05)
    assert _At(12.0)._on_grid(meter, BOUND, meter.break_at(12.0)) == pytest.approx(14.1)


def test_a_large_step_or_a_jump_stays_exact():
    meter = _meter(BOUND * 2)
    assert _At(12.0)._on_grid(meter, BOUND, meter.break_at(12.0)) == meter.break_at(12.0)
    lumped = _meter(BOUND)
    lumped.record(12.0, MB)  # ... a lump leaves at 23 s, after the (unchanged-rate) breakpoint
    lumped.advance(20.0)
    assert lumped.break_step() == math.inf
    follower = QuotaMeter()
    follower.set_rate(0.0, BOUND)
    assert follower.break_step() == math.inf  # its breaks are sample purges: jumps


def test_an_echo_a_rounding_past_a_tick_stays_on_it():
    meter = _meter(BOUND * 1.001, at=3.0)
    echo = 14.0 + 4e-12
    assert _At(12.0)._on_grid(meter, BOUND, echo) == pytest.approx(14.0, abs=1e-9)
    assert _At(14.0)._on_grid(meter, BOUND, 14.0 + 1e-10) == 14.0 + 1e-10  # the tick is now: exact


def test_small_breaks_of_two_quotas_meet_on_one_tick():
    early, late = _meter(BOUND * 1.002, at=3.02), _meter(BOUND * 0.999, at=3.08)
    clock = _At(12.0)
    assert clock._on_grid(early, BOUND, early.break_at(12.0)) == clock._on_grid(late, BOUND, late.break_at(12.0))


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_the_grid_keeps_the_scenarios_moving_time(seed, monkeypatch):
    gridded = trace(seed, throttle=4 * MB)
    monkeypatch.setattr(replication_quotas, "SMALL_BREAK", 0.0)
    exact = trace(seed, throttle=4 * MB)
    assert len(gridded["finished"]) == len(exact["finished"]) > 10
    assert gridded["finished"][-1][2] == exact["finished"][-1][2]  # the last move, seen at the same look
    # a break a tick late can reorder moves finishing close together (then the next ones start
    # a look earlier or later): the mean finish moves by less than half a percent
    mean = [statistics.mean(f[2] for f in run["finished"]) for run in (gridded, exact)]
    assert mean[0] == pytest.approx(mean[1], rel=5e-3)
