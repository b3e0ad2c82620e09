"""The quota meter's fast next-event answers equal the slow ones they replace.

The physics asks every throttled quota for its next event at every re-plan
(replication_quotas._quota_event); an aged (leader-side) meter answers "never" from a floor
under its allowance before walking its sample purges, and a quota at its bound keeps its next
break until its course changes. Both must give the model the same event times as the walk.
"""
from __future__ import annotations

import math
import random

import pytest

from kafka_sim.quotas import QuotaMeter

MB = 1024 * 1024


def _random_history(rng: random.Random, aged: bool, bound: float, steps: int = 80):
    """A meter driven by a random mix of rate changes, lumps and plain advances, with its time after each."""
    meter = QuotaMeter(11, 1.0, aged=aged)
    t = 0.0
    for _ in range(steps):
        t += rng.choice([0.0, 0.01, 0.05, 0.3, 1.0, rng.random() * 4])  # 0.0: several changes at one instant
        op = rng.random()
        if op < 0.35:
            meter.set_rate(t, rng.choice([0.0, bound * rng.random() * 2]))
        elif op < 0.6:
            meter.record(t, rng.random() * bound * 3)
        else:
            meter.advance(t)
        yield meter, t


def _meters_in_use(seed: int, aged: bool, histories: int):
    """The meters of short random histories at 1 MB/s, after each step once they have a time."""
    rng = random.Random(seed)
    for _ in range(histories):
        for meter, _t in _random_history(rng, aged=aged, bound=1 * MB, steps=40):
            if meter.t is not None:
                yield meter


def _small_steps(rng: random.Random, meter: QuotaMeter, bound: float, top_rate: float):
    """Drive a meter by small steps, mostly plain advances (many answers come from a kept one); yields the time."""
    t = 0.0
    for _step in range(120):
        t += rng.choice([0.0, 0.01, 0.05, 0.1, 0.3])
        op = rng.random()
        if op < 0.08:
            meter.set_rate(t, rng.choice([0.0, top_rate * rng.random()]))
        elif op < 0.12:
            meter.record(t, rng.random() * bound)
        else:
            meter.advance(t)
        yield t


@pytest.mark.parametrize("seed,aged", [(s, a) for s in range(4) for a in (True, False)])
def test_the_floor_answers_never_only_where_the_walk_does(seed, aged):
    """Leader-side meters, and follower-side ones past their first window (the floor is not
    asked before: their span is shorter there)."""
    rng = random.Random(seed)
    floored = crossings = young = 0
    for _ in range(150):
        bound = rng.choice([1 * MB, 2 * MB, 5 * MB])
        for meter, _t in _random_history(rng, aged=aged, bound=bound):
            if meter.t is None:
                continue
            young += not meter._past_first_window()
            for level in (0.0, -bound / 4):
                walked = meter._walk_to_cross(bound, level)
                assert meter.seconds_to_cross(bound, level) == walked
                floored += meter._past_first_window() and meter._never_crosses(bound, level)
                crossings += not math.isinf(walked)
    assert floored > 1_000 and crossings > 1_000  # the floor answered often, and crossings were found
    assert aged or young > 100  # follower-side meters were seen in their first window too


@pytest.mark.parametrize("aged", [True, False])
def test_the_floor_answers_never_for_a_quota_recording_near_its_bound(aged):
    """A sender's leader quota recording 90% of its bound for a while never crosses: the floor
    says so without the walk, and no span it counts (between a lump and a rate change) can
    hold more than the floor allows for."""
    meter = QuotaMeter(11, 1.0, aged=aged)
    meter.set_rate(0.0, 0.9 * MB)
    meter.advance(20.0)
    meter.record(20.0, 0.2 * MB)  # an in-sync fetch's lump
    meter.set_rate(20.0, 0.5 * MB)
    meter.advance(25.3)
    assert meter._never_crosses(1 * MB, 0.0) and math.isinf(meter._walk_to_cross(1 * MB, 0.0))
    assert meter.seconds_to_cross(1 * MB, 0.0) == math.inf
    # nor can the floor answer for a level the allowance does reach
    least = min(meter._allowance_at(1 * MB, meter.t + d, left=left)
                for d in [0.0, *meter._breaks(meter.t)] for left in (False, True))
    assert not meter._never_crosses(1 * MB, least)


@pytest.mark.parametrize("aged", [True, False])
def test_kept_next_break_equals_the_recomputed_one(aged):
    rng = random.Random(11 if aged else 12)
    kept = 0
    for _ in range(300):
        bound = rng.choice([1 * MB, 2 * MB])
        meter = QuotaMeter(11, 1.0, aged=aged)
        for t in _small_steps(rng, meter, bound, bound):
            before = meter._break
            answer = meter.break_at(t)
            kept += before is not None and meter._break is before
            recomputed = (meter.t if meter.t is not None else t) + meter.next_break()
            assert answer == pytest.approx(recomputed, rel=1e-12, abs=1e-9)
            assert math.isinf(answer) or answer > t
    assert kept > 1_000  # the kept answer was actually used, not recomputed every time


def test_the_kept_break_is_dropped_when_the_course_changes():
    meter = QuotaMeter(11, 1.0, aged=True)
    meter.set_rate(0.0, 1 * MB)
    meter.advance(3.2)
    assert meter.break_at(3.2) == pytest.approx(4.0)  # the next sample purge
    meter.set_rate(3.5, 2 * MB)  # a new course: the purges stay on their grid
    assert meter.break_at(3.5) == pytest.approx(4.0)
    meter.advance(4.5)
    assert meter.break_at(4.5) == pytest.approx(5.0)  # passed: the next one, recomputed


@pytest.mark.parametrize("aged", [True, False])
def test_kept_never_equals_the_recomputed_answer(aged):
    rng = random.Random(21 if aged else 22)
    kept = crossings = 0
    for _ in range(300):
        bound = rng.choice([1 * MB, 2 * MB])
        level = rng.choice([0.0, -bound / 4])  # one level per quota mode, as _quota_event asks
        meter = QuotaMeter(11, 1.0, aged=aged)
        for t in _small_steps(rng, meter, bound, 2 * bound):
            kept += meter._never is not None and meter._never == (meter.version, bound, level)
            answer = meter.cross_at(t, bound, level)
            recomputed = (meter.t if meter.t is not None else t) + meter.seconds_to_cross(bound, level)
            assert answer == recomputed  # bit for bit: the model's event times do not move
            crossings += not math.isinf(answer)
    assert kept > 1_000 and crossings > 500  # kept answers were used, and finite ones were asked too


def test_a_kept_never_is_dropped_when_the_course_changes():
    meter = QuotaMeter(11, 1.0, aged=True)
    meter.set_rate(0.0, 0.5 * MB)  # under a 1 MB/s bound: never spent
    assert math.isinf(meter.cross_at(0.0, 1 * MB, 0.0))
    meter.advance(2.0)
    assert math.isinf(meter.cross_at(2.0, 1 * MB, 0.0)) and meter._never == (meter.version, 1 * MB, 0.0)
    meter.set_rate(2.0, 2 * MB)  # 10 MB left at 2 MB/s, nothing leaves the window before 11 s
    assert meter.cross_at(2.0, 1 * MB, 0.0) == pytest.approx(7.0)
    assert meter._never is None


@pytest.mark.parametrize("aged", [True, False])
def test_the_walk_reads_the_allowance_ahead_exactly_as_the_search_does(aged):
    """The crossing walk reads the bytes recorded ahead of the last breakpoint from the current
    rate instead of searching the breakpoints: the same arithmetic, so the same floats."""
    rng = random.Random(21 if aged else 22)
    compared = 0
    for _ in range(60):
        bound = rng.choice([1 * MB, 2 * MB, 5 * MB])
        for meter, t in _random_history(rng, aged=aged, bound=bound):
            if meter.t is None:
                continue
            for d in (0.0, 1e-7, 0.4, 1.0, 3.3, 11.0, 12.5, 30.0):
                for left in (False, True):
                    x = meter.t + d
                    tail = meter._tail(x - 1e-6 if left else x)  # the allowance from the search over breakpoints
                    searched = bound * max(meter.min_span, x - tail) - meter._in_span(x, tail)
                    assert meter._allowance_at(bound, x, left) == searched
                    compared += 1
    assert compared > 10_000


@pytest.mark.parametrize("aged", [True, False])
def test_the_next_break_is_the_first_of_the_breaks(aged):
    """next_break finds the first break without listing them all: the same float."""
    seen = 0
    for meter in _meters_in_use(31 if aged else 32, aged, 200):
        breaks = meter._breaks(meter.t)
        assert meter.next_break() == (breaks[0] if breaks else math.inf)
        seen += 1
    assert seen > 1_000


@pytest.mark.parametrize("seed,aged", [(s, a) for s in range(3) for a in (True, False)])
def test_a_walk_of_a_few_breaks_finds_the_near_crossing_or_a_time_to_ask_again_before_any(seed, aged):
    """With a re-plan quantum the physics walks a quota's purges only a few breaks ahead: a crossing
    there is the one the whole walk finds, to the bit; past them, the answer is a break no later than
    the crossing (or any time, for a quota that never crosses), where the quota is asked again."""
    rng = random.Random(seed)
    near = far = 0
    for _ in range(120):
        bound = rng.choice([1 * MB, 2 * MB, 5 * MB])
        for meter, _t in _random_history(rng, aged=aged, bound=bound):
            if meter.t is None:
                continue
            whole = meter.seconds_to_cross(bound, 0.0)
            short = meter.seconds_to_cross(bound, 0.0, breaks=2)
            second = meter._breaks(meter.t)[1]
            if whole <= second:
                assert short == whole
                near += 1
            elif short != whole:  # (equal: "never" from the floor, before any walk)
                assert short < whole and short in meter._breaks(meter.t)[:2]
                far += 1
    assert near > 300 and far > 300


@pytest.mark.parametrize("aged", [True, False])
def test_the_kept_window_start_gives_the_allowance_the_search_does(aged):
    """allowance keeps the bytes before the window's start while that start stays the same (within
    a sample) and at or before the last breakpoint; after purges, rate changes and lumps (which
    append breakpoints) and fresh windows it equals the search."""
    rng = random.Random(41 if aged else 42)
    hits = 0
    for _ in range(200):
        bound = rng.choice([1 * MB, 2 * MB])
        meter = QuotaMeter(11, 1.0, aged=aged)
        for t in _small_steps(rng, meter, bound, 2 * bound):
            if meter.t is None:
                continue
            tail = meter._tail(meter.t)
            hits += meter._before[0] == tail and meter._allowance[:2] != (meter.t, meter.version)
            searched = bound * max(meter.min_span, meter.t - tail) - meter._in_span(meter.t, tail)
            assert meter.allowance(bound) == searched
            if tail <= meter.ts[-1]:  # kept only there: past the last breakpoint the rate counts
                assert meter._before == (tail, meter._cum(tail, left=True))
    assert hits > 3_000  # the kept start was actually used, across changes of the course


@pytest.mark.parametrize("aged", [True, False])
def test_a_rate_change_or_lump_starts_from_the_bytes_the_search_finds(aged):
    """set_rate and record take the bytes recorded by now from the last breakpoint, without the
    search: the new breakpoints hold what _cum says was recorded just before the change."""
    rng = random.Random(51 if aged else 52)
    checked = 0
    for _ in range(100):
        meter = QuotaMeter(11, 1.0, aged=aged)
        t = 0.0
        for _step in range(60):
            t += rng.choice([0.0, 0.0, 0.05, 0.7, 3.0, 12.0])
            meter.advance(t)
            if meter.t is None:
                meter.set_rate(t, rng.random() * MB)
                continue
            recorded = meter._cum(t)
            if rng.random() < 0.5:
                rate, n = rng.choice([0.0, rng.random() * MB]), len(meter.ts)
                changed = rate != meter.rate
                meter.set_rate(t, rate)
                assert not changed or meter.cs[-1] == recorded
                assert changed or len(meter.ts) == n
            else:
                lump = rng.random() * MB
                meter.record(t, lump)
                assert meter.ts[-2:] == [t, t] and meter.cs[-2:] == [recorded, recorded + lump]
            checked += 1
    assert checked > 3_000


@pytest.mark.parametrize("aged", [True, False])
def test_a_short_list_of_breaks_begins_as_the_whole_one(aged):
    """A walk of a few breaks lists only one break more than it reads: the same first ones, and
    there are more exactly when the whole list has more."""
    seen = 0
    for meter in _meters_in_use(61 if aged else 62, aged, 100):
        whole = meter._breaks(meter.t)
        for limit in (0, 1, 2, 3, len(whole), len(whole) + 1):
            short = meter._breaks(meter.t, limit)
            assert short[:limit] == whole[:limit] and (len(short) > limit) == (len(whole) > limit)
        seen += 1
    assert seen > 1_000
