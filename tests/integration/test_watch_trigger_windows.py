"""The watch trigger while new moves are held back (outside a maintenance window, or paused):
it wakes the execute task when the window opens, not at once and not every poll."""
from __future__ import annotations

import time

import pytest

from integration.test_watch_trigger import _first_event, moving  # noqa: F401  (a fixture)
from kafka_reassign.execution.poll import next_watch_wake
from kafka_reassign_airflow.triggers.reassignment import ReassignmentWatchTrigger


def _idle_spec(**held: object) -> dict:
    return {"steps": {}, "watch": {}, "rules": {}, "wake": None, "throttle": None, **held}


def test_nothing_in_flight_and_closed_waits_for_the_opening_without_waking_the_task():
    opens = time.time() + 1.5
    trigger = ReassignmentWatchTrigger(kafka_conn_id="kafka_default", poll_interval=0.1, run_id="r",
                                       spec=_idle_spec(reopens_at=opens, held="waiting for the window opening at X"))
    payload, waited = _first_event(trigger, timeout=10)
    assert time.time() >= opens - 0.05 and waited >= 1.4, waited
    assert payload == {"status": "attention", "watch": {}, "reasons": ["waiting for the window opening at X"]}


def test_paused_with_nothing_in_flight_rereads_the_pause_each_refresh():
    trigger = ReassignmentWatchTrigger(kafka_conn_id="kafka_default", poll_interval=0.1, run_id="r",
                                       refresh_seconds=1.0, spec=_idle_spec(paused=True, held="paused by an operator"))
    payload, waited = _first_event(trigger, timeout=10)
    assert 0.9 <= waited < 5 and payload["reasons"] == ["paused by an operator"]
    with pytest.raises(TimeoutError):   # a far opening: the task is not woken meanwhile
        _first_event(ReassignmentWatchTrigger(kafka_conn_id="kafka_default", poll_interval=0.1, run_id="r",
                                              spec=_idle_spec(reopens_at=time.time() + 3600)), timeout=2)


def test_the_opening_wakes_the_task_while_steps_are_in_flight(moving):
    _, spec = moving
    spec = {**spec, "reopens_at": time.time() + 1.0}
    trigger = ReassignmentWatchTrigger(kafka_conn_id="kafka_default", spec=spec, poll_interval=30.0, run_id="r",
                                       refresh_seconds=0)
    payload, waited = _first_event(trigger, timeout=15)
    assert payload["reasons"] == ["the maintenance window opens: new moves may start"], payload
    assert 0.9 <= waited < 5 and payload["watch"] == spec["watch"]


def test_next_wake_is_the_opening_when_it_comes_before_the_poll():
    spec = _idle_spec(reopens_at=105.0)
    assert next_watch_wake(spec, 0.0, 100.0, 110.0) == (105.0, "opens")
    assert next_watch_wake(spec, 0.0, 100.0, 104.0) == (104.0, "poll")
    assert next_watch_wake(_idle_spec(), 0.0, 100.0, 110.0) == (110.0, "poll")
