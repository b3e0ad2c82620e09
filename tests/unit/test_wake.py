"""The wake schedule: when a step should finish, when a broker runs low, how often to check."""
from __future__ import annotations

import pytest

from kafka_reassign.execution.outcome import StepWatch
from kafka_reassign.execution.wake import (CHECK_GAP_SECONDS, FlightItem, WakeRule, lane_left, bytes_left_now,
                                           due_times, lane_broker, lane_sending, low_water_time, max_min_rates,
                                           next_check, step_rates,
                                           throttle_lanes)

RATE = 10_000_000.0


def test_a_step_moves_at_its_smallest_share_of_the_throttle():
    # Broker 1 sends two copies (5 MB/s each); broker 4 receives one of them alone, broker 5 the other
    # and a third from broker 2: that one gets half of broker 5's throttle.
    items = {0: FlightItem((1, 4), 50e6, 0.0), 1: FlightItem((1, 5), 50e6, 0.0), 2: FlightItem((2, 5), 50e6, 0.0)}
    assert step_rates(items, RATE) == {0: 5e6, 1: 5e6, 2: 5e6}
    assert step_rates({0: FlightItem((1, 4), 1.0, 0.0)}, RATE) == {0: RATE}


def test_a_lane_whose_steps_are_held_back_elsewhere_is_not_full():
    # Broker 2 takes in four copies (a quarter of its throttle each), one of them from broker 1; 1's
    # other copy, to the idle broker 6, gets the rest of 1's outbound throttle (max-min fair).
    items = {i: FlightItem((~(3 + i), 2), 50e6, 0.0) for i in range(3)}
    items[3] = FlightItem((~1, 2), 50e6, 0.0)
    items[4] = FlightItem((~1, 6), 50e6, 0.0)
    rates = max_min_rates(items, RATE)
    assert rates == {0: RATE / 4, 1: RATE / 4, 2: RATE / 4, 3: RATE / 4, 4: RATE * 3 / 4}
    assert lane_sending(items, RATE) == {**{~(3 + i): RATE / 4 for i in range(3)}, 2: RATE, ~1: RATE, 6: RATE * 3 / 4}
    del items[4]  # alone, 1's copy to broker 2 leaves 1's outbound throttle three quarters idle
    assert lane_sending(items, RATE)[~1] == RATE / 4
    assert max_min_rates({0: FlightItem((), 1.0, 0.0)}, RATE, {1: 5.0}) == {0: RATE}


def test_a_broker_sends_and_receives_on_two_throttles():
    # Kafka's leader (outbound) and follower (inbound) quotas are separate: broker 4 receiving
    # from 1 and sending to 5 moves both copies at the full rate; two copies out of 4 share one.
    lanes = [throttle_lanes((1, 4), copies=True), throttle_lanes((4, 5), copies=True)]
    assert lanes == [(~1, 4), (~4, 5)] and [lane_broker(k) for k in (~4, 4)] == [4, 4]
    assert step_rates({0: FlightItem(lanes[0], 1.0, 0.0), 1: FlightItem(lanes[1], 1.0, 0.0)}, RATE) == {0: RATE, 1: RATE}
    out_twice = {0: FlightItem((~4, 1), 1.0, 0.0), 1: FlightItem((~4, 5), 1.0, 0.0)}
    assert step_rates(out_twice, RATE) == {0: RATE / 2, 1: RATE / 2}
    # A broker's own rate (the adaptive throttle) applies to both of its lanes.
    assert step_rates(out_twice, RATE, {4: 4e6}) == {0: 2e6, 1: 2e6}
    assert low_water_time({~4: 8e6}, [~4], RATE, 5e6, 0.0, {4: 4e6}) == pytest.approx(1.5)
    # A log-dir move stays inside its broker: one lane, the broker's own.
    assert throttle_lanes((3,), copies=False) == (3,)


def test_due_times_and_bytes_left_now_follow_the_rates():
    items = {0: FlightItem((1, 4), 20e6, 100.0), 1: FlightItem((2, 5), 40e6, 101.0)}
    assert due_times(items, RATE) == {0: 102.0, 1: 105.0}
    assert bytes_left_now(items, RATE, 103.0) == {0: 0.0, 1: 20e6}
    assert lane_left(items, RATE, 103.0) == {1: 0.0, 4: 0.0, 2: 20e6, 5: 20e6}


def test_a_broker_held_back_is_woken_when_it_gets_down_to_low_water():
    left = {1: 80e6, 2: 30e6}
    # Broker 1 drains at the full throttle whatever the number of steps: 80 -> 50 MB in 3 s.
    assert low_water_time(left, [1], RATE, 50e6, 0.0) == pytest.approx(3.0)
    assert low_water_time(left, [1, 2], RATE, 50e6, 0.0) == 0.0  # broker 2 is already below
    assert low_water_time(left, [], RATE, 50e6, 0.0) is None


def test_cheap_checks_are_at_least_a_gap_apart():
    assert next_check([], 0.0, 10.0) is None
    # Halfway to the earliest due time, so an estimate twice too slow still wakes in time.
    assert next_check([14.0, 15.0], 0.0, 10.0) == 12.0
    assert next_check([10.5], 0.0, 10.0) == 10.25
    # Overdue steps are checked again, but never twice within the gap.
    assert next_check([5.0], 9.5, 10.0) == 9.5 + CHECK_GAP_SECONDS
    assert next_check([5.0], 2.0, 10.0) == 10.0


def test_wake_rule_round_trips_and_uses_planned_bytes_until_the_first_observation():
    rule = WakeRule(rate=RATE, low_water=50e6, held_back=(4,), brokers={7: (1, 4), 8: (2, 4)},
                    planned={7: 30e6, 8: 10e6})
    assert WakeRule.from_json(rule.to_json()) == rule
    seen = StepWatch.start(100.0)
    seen.bytes_left, seen.polled_at = 5_000_000, 101.0
    items = rule.items({7: StepWatch.start(100.0), 8: seen})
    assert items[7] == FlightItem((1, 4), 30e6, 100.0) and items[8] == FlightItem((2, 4), 5e6, 101.0)
    check, refill = rule.times({7: StepWatch.start(100.0), 8: seen}, 0.0, 100.0)
    # Broker 4 receives both at 5 MB/s each: step 8 is due at 102 (checked halfway, at 101); 35 MB
    # in flight on broker 4 is already below the 50 MB low water, so the refill is due now.
    assert check == pytest.approx(101.0) and refill == 100.0
    assert WakeRule(rate=RATE, low_water=1.0).times({}, 0.0, 5.0) == (None, None)


def test_only_a_finish_that_frees_a_waiting_step_brings_a_check_forward():
    items = {7: FlightItem((1, 4), 10e6, 100.0), 8: FlightItem((2, 5), 40e6, 100.0)}
    rule = WakeRule(rate=RATE, low_water=1.0, urgent=frozenset({8}))
    assert WakeRule.from_json(rule.to_json()) == rule
    assert WakeRule.from_json(WakeRule(rate=RATE, low_water=1.0).to_json()).urgent is None
    # Step 7 is due at 101, step 8 at 104: only 8's finish lets a waiting step start.
    assert rule.times_of(items, 0.0, 100.0)[0] == pytest.approx(102.0)
    assert WakeRule(rate=RATE, low_water=1.0).times_of(items, 0.0, 100.0)[0] == pytest.approx(100.5)
    assert WakeRule(rate=RATE, low_water=1.0, urgent=frozenset()).times_of(items, 0.0, 100.0) == (None, None)


def test_the_trigger_schedules_checks_for_the_urgent_steps_only():
    from kafka_reassign.execution.poll import next_watch_wake

    watch = {"7": StepWatch.start(100.0).to_json(), "8": StepWatch.start(100.0).to_json()}
    rule = WakeRule(rate=RATE, low_water=1.0, brokers={7: (1, 4), 8: (2, 5)}, planned={7: 10e6, 8: 40e6})
    spec = {"watch": watch, "wake": rule.to_json()}
    assert next_watch_wake(spec, 0.0, 100.0, 110.0) == (pytest.approx(100.5), "check")
    spec["wake"] = WakeRule(**{**rule.__dict__, "urgent": frozenset({8})}).to_json()
    assert next_watch_wake(spec, 0.0, 100.0, 110.0) == (pytest.approx(102.0), "check")
    spec["wake"] = WakeRule(**{**rule.__dict__, "urgent": frozenset()}).to_json()
    assert next_watch_wake(spec, 0.0, 100.0, 110.0) == (110.0, "poll")
