"""The executor's bookkeeping without a cluster: caps, eligibility, ordering, outcomes, state."""
from __future__ import annotations

import json

import pytest

from kafka_reassign.errors import ParamError
from kafka_reassign.execution.executor import MoveExecutor
from kafka_reassign.execution.limits import ExecutionLimits
from kafka_reassign.execution.step_state import DONE, IN_FLIGHT, QUEUED
from kafka_reassign.execution.outcome import (Outcome, OutcomeRules, StepObservation, StepWatch, run_outcome,
                                    step_outcome)
from kafka_reassign.throttle.replica_lists import ReplicaThrottle
from kafka_reassign.throttle.specs import parse_replica_list
from kafka_reassign.execution.steps import StepMove


def chain(topic: str, p: int, lists: list[tuple[int, ...]], size: int = 100) -> list[StepMove]:
    """The steps of one partition through ``lists`` (first = where it is now)."""
    n = len(lists) - 1
    return [StepMove(topic, p, lists[i], lists[i + 1], size_bytes=size, step_index=i, step_count=n)
            for i in range(n)]


def take(ex: MoveExecutor, now: float = 0.0) -> list[int]:
    """Pick and mark in flight what fits (what a refill does once the cluster accepted them)."""
    chosen = ex.pick(now)
    for i in chosen:
        ex.ready.discard(i)
        ex._set(i, IN_FLIGHT)
        ex.watches[i] = StepWatch.start(now)
    return chosen


def test_limits_at_or_below_zero_are_refused_by_name():
    with pytest.raises(ParamError) as info:
        ExecutionLimits(max_partition_movements=0, max_movements_per_broker=-1, stall_window_seconds=0).validate()
    text = str(info.value)
    assert "max_partition_movements" in text and "max_movements_per_broker" in text and "stall_window_seconds" in text
    with pytest.raises(ParamError, match="unknown ordering strategy"):
        ExecutionLimits(strategy="random").validate()


def test_a_step_that_can_never_fit_a_cap_below_one_is_refused():
    step = StepMove("t", 0, (1, 2), (3, 1))  # touches brokers 2 and 3, moves the leader
    ExecutionLimits().validate([step])  # caps of 1 or more: every step fits (the steps go unread)
    with pytest.raises(ParamError, match="t-0"):
        ExecutionLimits(max_movements_per_broker=0.5).validate([step])  # type: ignore[arg-type]
    with pytest.raises(ParamError, match="t-0"):
        ExecutionLimits(max_leader_movements=0.5).validate([step])  # type: ignore[arg-type]
    ExecutionLimits(max_leader_movements=0.5).validate([StepMove("t", 0, (1, 2), (1, 3))])  # type: ignore[arg-type]

def test_caps_hold_and_a_partition_waits_for_its_previous_step():
    steps = chain("t", 0, [(1, 2, 3), (4, 1, 2), (4, 5, 1), (4, 5, 6)]) + \
        [s for p in range(1, 7) for s in chain("t", p, [(1, 2), (3, 1)])]
    ex = MoveExecutor(steps, ExecutionLimits(max_partition_movements=4, max_movements_per_broker=2))
    first = take(ex)
    assert len(first) <= 4
    # Only the first step of the 3-step partition is eligible.
    assert 1 not in first and 2 not in first
    load: dict[int, int] = {}
    for i in first:
        for b in steps[i].brokers_touched:
            load[b] = load.get(b, 0) + 1
    assert max(load.values()) <= 2
    # Finishing step 0 makes step 1 eligible, not step 2.
    if 0 in first:
        ex._finish(0)
        assert 1 in ex.ready and 2 not in ex.ready


def test_the_leader_copied_from_takes_a_slot_too():
    # Four partitions led by broker 1, each replacing a follower of its own by a broker of its
    # own: every copy is read from broker 1, so with 2 moves per broker only 2 run at once (each
    # gets half its throttle instead of a quarter, and no receiver waits on a starved copy).
    steps = [s for p in range(4) for s in chain("t", p, [(1, 10 + p, 20 + p), (1, 10 + p, 30 + p)])]
    ex = MoveExecutor(steps, ExecutionLimits(max_movements_per_broker=2))
    assert len(take(ex)) == 2
    assert ex.broker_load[1] == 2


def test_default_order_is_largest_first():
    steps = [chain("t", 0, [(1, 2), (3, 2)], size=10)[0], chain("t", 1, [(4, 5), (6, 5)], size=1000)[0],
             chain("t", 2, [(7, 8), (9, 8)], size=100)[0]]
    ex = MoveExecutor(steps, ExecutionLimits(max_partition_movements=2))
    assert take(ex) == [1, 2]


def test_busiest_brokers_feeds_the_busiest_broker_and_long_chains_first():
    big = chain("t", 0, [(1, 2), (3, 2), (3, 4)], size=1000)        # 2 steps, 2000 bytes through 3 and 4
    small = [s for p in range(1, 4) for s in chain("t", p, [(1, 2), (5, 2)], size=10)]
    ex = MoveExecutor(big + small, ExecutionLimits(max_partition_movements=1, strategy="busiest-brokers"))
    assert take(ex) == [0]
    ex2 = MoveExecutor(big + small, ExecutionLimits(max_partition_movements=1, strategy="smallest-first"))
    assert take(ex2) != [0]


def test_busiest_brokers_weighs_a_brokers_outbound_and_inbound_throttles_apart():
    # Broker 1 sends 100 and receives 100: each of its two quotas has 100 to pass. Broker 5
    # receives 150 through its one inbound quota: it sets the pace, so its copies go first.
    steps = (chain("t", 0, [(1,), (2,)]) + chain("t", 1, [(3,), (1,)])
             + chain("t", 2, [(4,), (5,)], size=75) + chain("t", 3, [(6,), (5,)], size=75))
    ex = MoveExecutor(steps, ExecutionLimits(max_partition_movements=1, strategy="busiest-brokers"))
    assert take(ex) == [2]
    assert ex.lanes_left == {~1: 100, 2: 100, ~3: 100, 1: 100, ~4: 75, 5: 150, ~6: 75}


def half_run(partitions: int) -> tuple[list[StepMove], MoveExecutor, list[int]]:
    """A plan of one-step partitions with 50 taken at t=5 and the first 10 of them finished."""
    steps = [s for p in range(partitions) for s in chain("t", p, [(1 + p % 20, 41), (21 + p % 20, 41)], size=1)]
    ex = MoveExecutor(steps, ExecutionLimits(max_partition_movements=50))
    started = take(ex, now=5.0)
    for i in started[:10]:
        ex._finish(i)
    return steps, ex, started


def test_state_round_trip_is_compact_and_resumes_counters():
    steps, ex, started = half_run(20_000)
    state = ex.state_json()
    text = json.dumps(state, separators=(",", ":"))
    # Counters, the loaded pages' characters and the 40 in flight: not a character per step of the plan.
    assert len(text) < 12_000, len(text)  # (the plan has 20,000 steps)
    again = MoveExecutor(steps, ExecutionLimits(max_partition_movements=50))
    again.load_state(json.loads(text))
    assert again.counts == ex.counts and again.counts[DONE] == 10 and again.counts[IN_FLIGHT] == 40
    assert sorted(again.watches) == sorted(ex.watches) and again.watches[started[20]].submitted_at == 5.0
    assert {b: n for b, n in again.broker_load.items() if n} == {b: n for b, n in ex.broker_load.items() if n}
    assert again.lanes_left == ex.lanes_left and again.done_bytes == ex.done_bytes == 10
    other = MoveExecutor(steps[:-1], ExecutionLimits())
    with pytest.raises(ValueError, match="other steps"):
        other.load_state(state)
    # Only the pages worked on are loaded again; the rest of the plan is not read.
    assert again.status_of(started[0]) == DONE and again.status_of(len(steps) - 1) is None
    assert again.book.pages_read == len(state["pages"]) and len(again.steps) <= 1_000


def test_a_state_with_a_character_per_step_still_resumes():
    steps, ex, _ = half_run(2_000)
    state = ex.state_json()
    codes = [QUEUED] * len(steps)
    for i in ex.status:
        codes[i] = ex.status[i]
    old = {k: v for k, v in state.items() if k not in ("pages", "cursor", "counts", "done_bytes",
                                                         "partitions_done", "lanes_left")}
    again = MoveExecutor(steps, ExecutionLimits(max_partition_movements=50))
    again.load_state({**old, "v": 1, "status": "".join(codes)})
    assert again.counts == ex.counts and again.lanes_left == ex.lanes_left
    assert again.book.pages_read == again.book.head.pages  # each page read once
    assert again.partitions_done == ex.partitions_done == 10
    assert {b: n for b, n in again.broker_load.items() if n} == {b: n for b, n in ex.broker_load.items() if n}
    again.fill_frontier()  # the pages done are dropped once read
    assert len(again.steps) < len(steps)


def test_the_frontier_reads_a_bounded_part_of_the_plan_and_moves_on():
    steps = [s for p in range(10_000) for s in chain("t", p, [(1 + p % 20, 41 + p % 7), (21 + p % 20, 41 + p % 7)])]
    ex = MoveExecutor(steps, ExecutionLimits(max_partition_movements=40, max_movements_per_broker=1000))
    done = 0
    while ex.counts[DONE] < len(steps):
        for i in take(ex):
            ex._finish(i)
        assert len(ex.steps) <= 8 * 40 + 1_000  # the loaded pages: bounded by the caps, not the plan
        assert ex.counts[DONE] > done, "no progress"
        done = ex.counts[DONE]
    ex.fill_frontier()
    assert ex.book.pages_read == ex.book.head.pages and not ex.steps and ex.partitions_done == 10_000


RULES = OutcomeRules(stall_window=60.0, step_timeout=600.0, throttle_rate=1_000_000)


def test_step_outcomes():
    target = (4, 1, 2)
    w = StepWatch.start(0.0)
    moving = StepObservation(in_flight=True, replicas=(1, 2, 3), bytes_left=500, bytes_total=1000,
                             leader_size=1000, lagging=[(4, 500)])
    w.observe(moving, 0.0)
    assert step_outcome("t-0", target, moving, w, RULES, 10.0)[0] is Outcome.IN_PROGRESS
    # Bytes left not falling for the stall window: stalled, naming partition, broker, throttle, produce rate.
    w.observe(StepObservation(in_flight=True, replicas=(1, 2, 3), bytes_left=500, bytes_total=1000,
                              leader_size=61_001_000, lagging=[(4, 500)]), 61.0)
    outcome, msg = step_outcome("t-0", target, moving, w, RULES, 61.0)
    assert outcome is Outcome.STALLED
    assert "t-0" in msg and "broker 4" in msg and "throttle 1.0 MB/s" in msg and "produce rate 1.0 MB/s" in msg
    # Done: left the listing at the target with every target replica in sync.
    done = StepObservation(in_flight=False, replicas=target, isr=target)
    assert step_outcome("t-0", target, done, StepWatch.start(0.0), RULES, 1.0)[0] is Outcome.DONE
    # Timed out, counted from the submission.
    w2 = StepWatch.start(0.0)
    w2.observe(moving, 599.0)
    assert step_outcome("t-0", target, moving, w2, RULES, 600.0)[0] is Outcome.TIMED_OUT


def test_offline_broker_waits_then_fails_naming_it():
    target = (4, 1, 2)
    w = StepWatch.start(0.0)
    down = StepObservation(in_flight=True, replicas=(1, 2, 3), offline=(4,), bytes_left=10, lagging=[(4, 10)])
    w.observe(down, 5.0)
    assert step_outcome("t-0", target, down, w, RULES, 30.0)[0] is Outcome.IN_PROGRESS  # the run waits
    w.observe(down, 70.0)
    outcome, msg = step_outcome("t-0", target, down, w, RULES, 70.0)
    assert outcome is Outcome.FAILED and "broker 4" in msg and "offline" in msg
    # Back before the window ends: the clock restarts.
    w3 = StepWatch.start(0.0)
    w3.observe(down, 5.0)
    w3.observe(StepObservation(in_flight=True, replicas=(1, 2, 3), bytes_left=5), 40.0)
    assert w3.offline_since is None


def test_run_outcome_is_the_worst_dead_step():
    assert run_outcome([], 0, 0) is Outcome.DONE
    assert run_outcome([], 1, 0) is Outcome.IN_PROGRESS
    assert run_outcome([Outcome.STALLED, Outcome.TIMED_OUT], 3, 3) is Outcome.TIMED_OUT
    assert run_outcome([Outcome.STALLED, Outcome.FAILED], 0, 0) is Outcome.FAILED


def test_replica_lists_keep_others_entries_and_drop_only_ours():
    def merged(now, prior, last, needed):
        value, entries = ReplicaThrottle._merged(now, prior, needed, ReplicaThrottle._removing(now, prior, last, needed))
        assert entries == (set() if value in (None, "*") else parse_replica_list(value))
        return value
    # Nothing set before: our entries, then back to not set.
    assert merged(None, None, None, {(0, 1), (0, 2)}) == "0:1,0:2"
    assert merged("0:1,0:2", None, "0:1,0:2", set()) is None
    # An operator's entry (prior) and one added by someone during the run are kept.
    assert merged("5:6,0:1,7:7", "5:6", "0:1,5:6", {(1, 3)}) == "1:3,5:6,7:7"
    assert merged("1:3,5:6", "5:6", "1:3,5:6", set()) == "5:6"
    assert merged("*", None, None, {(0, 1)}) == "*"
    # Nothing to change: the value read is written back as it is, not reformatted.
    assert merged("0:2, 0:1", None, "0:1,0:2", {(0, 1), (0, 2)}) == "0:2, 0:1"


def test_progress_left_is_what_the_steps_in_flight_lack_as_observed_plus_the_queued_plan():
    # Two one-step partitions of 100 bytes each; one goes in flight.
    steps = chain("t", 0, [(1, 2), (3, 2)]) + chain("t", 1, [(1, 2), (4, 2)])
    ex = MoveExecutor(steps, ExecutionLimits(max_partition_movements=1))
    (i,) = take(ex)
    # Not observed yet: the row and the summary count all of it as left, not 0 B.
    view = ex.progress(now=1.0)
    assert view.bytes_left == 200 and [r.bytes_left for r in view.rows if r.status == "in_flight"] == [100]
    # The log grew while the copy lagged (writes during a stall): the summary follows the lag.
    ex.watches[i].observe(StepObservation(in_flight=True, replicas=steps[i].current, bytes_left=500,
                                          bytes_total=600), 2.0)
    view = ex.progress(now=2.0)
    assert view.bytes_left == 500 + 100, "live lag of the step in flight plus the queued step's plan"
    assert view.bytes_moved == 100 and view.bytes_total == view.bytes_moved + view.bytes_left


def test_a_rate_is_measured_once_progress_has_two_samples_apart_and_survives_a_resume():
    steps = chain("t", 0, [(1, 2), (3, 2)])
    ex = MoveExecutor(steps, ExecutionLimits())
    take(ex)
    ex.progress(now=1.0)
    assert not ex.rate_measured() and ex.progress(now=1.0).eta_seconds is None
    ex.progress(now=11.0)
    assert ex.rate_measured()
    again = MoveExecutor(steps, ExecutionLimits())
    again.load_state(json.loads(json.dumps(ex.state_json())))
    assert again.rate_measured()


def _one_receiver(sizes: list[int]) -> list[StepMove]:
    """Partitions of leader 1 each copied to broker 2 (one step each)."""
    return [s for p, size in enumerate(sizes) for s in chain("t", p, [(1,), (2,)], size=size)]


def test_large_steps_do_not_crowd_a_broker_beyond_its_byte_budget():
    # 25 MB/s for 10 s: 250 MB per broker in flight. 100 MB steps: three fit (the third takes the
    # broker from 200 MB to above the budget), the fourth would only split the same throttle.
    limits = ExecutionLimits(max_movements_per_broker=20, budget_seconds=10.0, strategy="largest-first")
    ex = MoveExecutor(_one_receiver([100_000_000] * 10), limits, throttle_rate=25_000_000)
    assert len(take(ex)) == 3
    assert ex.wake_at(0.0)[1] is not None  # broker 1 and 2 were held back: a refill wake is due
    assert take(ex) == []  # nothing moved yet: still over the budget


def test_a_broker_busy_sending_still_takes_a_copy_in():
    # Broker 2 sends 300 MB to broker 3 (over its outbound budget of 250 MB) and 1 sends 300 MB to 2:
    # Kafka throttles 2's outbound and inbound replication separately, so both start; a second
    # copy out of broker 2 waits.
    limits = ExecutionLimits(max_movements_per_broker=20, budget_seconds=10.0, strategy="largest-first")
    steps = [*chain("t", 0, [(2,), (3,)], size=300_000_000), *chain("t", 1, [(1,), (2,)], size=300_000_000),
             *chain("t", 2, [(2,), (4,)], size=100_000_000)]
    ex = MoveExecutor(steps, limits, throttle_rate=25_000_000)
    assert sorted(ex.steps[i].partition for i in take(ex)) == [0, 1]


def test_a_sender_slowed_at_a_shared_receiver_takes_a_copy_to_an_idle_one():
    # Broker 1 has 300 MB in flight to broker 2 (over its 250 MB budget), but broker 2 shares its
    # inbound throttle among four copies: 1 sends at a quarter of its rate. A copy from 1 to the
    # idle broker 6 starts; with 1 moving at full rate it would wait.
    limits = ExecutionLimits(max_movements_per_broker=20, budget_seconds=10.0, strategy="smallest-first")
    steps = [*(s for p in (1, 2, 3) for s in chain("t", p, [(2 + p,), (2,)], size=50_000_000)),
             *chain("t", 0, [(1,), (2,)], size=300_000_000), *chain("t", 4, [(1,), (6,)], size=400_000_000)]
    ex = MoveExecutor(steps, limits, throttle_rate=25_000_000)
    assert sorted(ex.steps[i].partition for i in take(ex)) == [0, 1, 2, 3]  # 1's lane got a step: full
    assert [ex.steps[i].partition for i in take(ex)] == [4]
    alone = MoveExecutor([*chain("t", 0, [(1,), (2,)], size=300_000_000), *chain("t", 4, [(1,), (6,)],
                                                                                  size=400_000_000)],
                         limits, throttle_rate=25_000_000)
    assert [alone.steps[i].partition for i in take(alone)] == [0]
    assert take(alone) == []  # 1 sends its 300 MB at its full rate: the copy to 6 waits


def test_small_steps_fill_the_budget_up_to_the_count_cap():
    limits = ExecutionLimits(max_movements_per_broker=30, budget_seconds=10.0)
    ex = MoveExecutor(_one_receiver([5_000_000] * 100), limits, throttle_rate=25_000_000)
    # 250 MB of 5 MB steps is 50; the count cap of 30 stops it first.
    assert len(take(ex)) == 30
    ex2 = MoveExecutor(_one_receiver([5_000_000] * 100), ExecutionLimits(max_movements_per_broker=100,
                                                                        budget_seconds=10.0),
                       throttle_rate=25_000_000)
    assert len(take(ex2)) == 50


def test_bytes_left_as_observed_make_room_before_a_step_ends():
    limits = ExecutionLimits(max_movements_per_broker=20, budget_seconds=10.0)
    ex = MoveExecutor(_one_receiver([200_000_000] * 4), limits, throttle_rate=25_000_000)
    (first, second) = take(ex)
    # Polled at t=4: the first has 20 MB left, the second has not started. 220 MB in flight is
    # below the 250 MB budget: one more step starts before the first ends, and only one.
    ex.watches[first].bytes_left, ex.watches[first].polled_at = 20_000_000, 4.0
    ex.watches[second].bytes_left, ex.watches[second].polled_at = 200_000_000, 4.0
    ex.watches[first].bytes_total = ex.watches[second].bytes_total = 200_000_000
    assert len(take(ex, 4.0)) == 1


def test_a_stall_under_the_adaptive_throttle_names_the_rate_its_brokers_have_now():
    """The adaptive throttle lowered broker 4 from the run's 50 MB/s to 8 MB/s: a stall of a copy
    into broker 4 names 8 MB/s, in the executor and in a trigger's poll of the same step."""
    limits = ExecutionLimits(adaptive_throttle=True, broker_network_capacity_bytes_per_sec=125_000_000,
                             throttle_min_bytes_per_sec=5_000_000, throttle_max_bytes_per_sec=100_000_000)
    steps = chain("t", 0, [(1, 2, 3), (4, 2, 3)], size=10**9)
    ex = MoveExecutor(steps, limits, throttle_rate=50_000_000)
    assert ex.rate_control is not None
    (i,) = take(ex)
    assert ex.rules_for(i).throttle_rate == 50_000_000  # no change yet: the starting rate
    ex.rate_control.rates[4] = 8_000_000
    assert ex.rules_for(i).throttle_rate == 8_000_000
    spec = ex.watch_spec()
    assert spec["throttle_rates"] == {str(i): 8_000_000} and spec["rules"]["throttle_rate"] == 50_000_000
    watch = ex.watches[i]
    obs = StepObservation(in_flight=True, replicas=(1, 2, 3, 4), bytes_left=10**9, bytes_total=10**9,
                          lagging=[(4, 10**9)])
    watch.observe(obs, 0.0)
    outcome, msg = step_outcome("t-0", (4, 2, 3), obs, watch, ex.rules_for(i), ex.rules.stall_window + 1)
    assert outcome is Outcome.STALLED and "throttle 8.0 MB/s" in msg, msg


def test_finishes_that_free_a_waiting_step_are_the_urgent_ones():
    # p0 has a second step; p1-p3 all copy into broker 10 (2 moves per broker: p3 waits);
    # p4 moves between brokers nothing else waits on.
    steps = chain("t", 0, [(1, 2), (3, 2), (4, 2)]) + \
        [s for p in range(1, 4) for s in chain("t", p, [(30 + p,), (10,)])] + chain("t", 4, [(40,), (41,)])
    ex = MoveExecutor(steps, ExecutionLimits(max_partition_movements=100, max_movements_per_broker=2))
    first = take(ex)
    assert sorted(first) == [0, 2, 3, 5]
    assert ex.urgent_steps() == frozenset({0, 2, 3})
    assert ex.wake_rule().urgent == frozenset({0, 2, 3})
    # A pick that leaves nothing waiting (a run's tail): every end counts, or the run would see
    # its last moves end only at the next poll.
    tail = MoveExecutor(chain("t", 4, [(40,), (41,)]), ExecutionLimits())
    assert take(tail) == [0] and tail.urgent_steps() is None
    # A pick that stops at the cluster cap: any finish makes room.
    capped = MoveExecutor(steps, ExecutionLimits(max_partition_movements=2, max_movements_per_broker=2))
    take(capped)
    assert capped.urgent_steps() is None
