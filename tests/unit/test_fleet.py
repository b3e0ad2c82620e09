"""Parsing and validation of the fleet config (kafka_reassign.fleet), without Airflow."""
from __future__ import annotations

import json

import pytest

from kafka_reassign.fleet import FleetChecks, FleetConfigError, FleetEntry, parse_fleet

SERVERS = {"kafka_eu1": "eu1-a:9092,eu1-b:9092", "kafka_us1": "us1:9092", "kafka_ap1": "ap1:9092",
           "kafka_eu1_alias": "eu1-b:9092, eu1-a:9092"}


def _schedule_problem(schedule: str) -> str | None:
    # Stands in for Airflow's cron check: presets and five-field expressions of digits, '*', '/'.
    if schedule.startswith("@") or len(schedule.split()) == 5 and "61" not in schedule:
        return None
    return "not a cron expression"


CHECKS = FleetChecks(connection_exists=SERVERS.__contains__, schedule_problem=_schedule_problem,
                     bootstrap_of=SERVERS.get)


def _parse(entries: object) -> list[FleetEntry]:
    return parse_fleet(json.dumps(entries), CHECKS, source="Variable kafka_reassign_fleet")


def test_three_clusters_with_their_overrides() -> None:
    fleet = _parse([{"conn_id": "kafka_eu1", "schedule": "0 2 * * *", "balance_threshold": 1.2},
                    {"conn_id": "kafka_us1", "throttle_bytes_per_sec": 50_000_000, "require_approval": True,
                     "maintenance_windows": ["Sat-Sun 00:00-06:00 America/New_York"]},
                    "kafka_ap1"])
    assert fleet == [FleetEntry("kafka_eu1", schedule="0 2 * * *", balance_threshold=1.2),
                     FleetEntry("kafka_us1", throttle_bytes_per_sec=50_000_000, require_approval=True,
                                maintenance_windows=("Sat-Sun 00:00-06:00 America/New_York",)),
                     FleetEntry("kafka_ap1")]
    assert not fleet[0].schedule_off and FleetEntry("x", schedule="None").schedule_off


@pytest.mark.parametrize(("entries", "expected"), [
    ([{"conn_id": "kafka_eu1"}, {"conn_id": "kafka_nowhere"}],
     "fleet entry 2 (kafka_nowhere): unknown connection 'kafka_nowhere'"),
    (["kafka_eu1", "kafka_us1", {"conn_id": "kafka_eu1", "schedule": "@hourly"}],
     "fleet entry 3 (kafka_eu1): the same cluster as fleet entry 1 (kafka_eu1)"),
    (["kafka_eu1", "kafka_eu1_alias"],
     "fleet entry 2 (kafka_eu1_alias): the same cluster as fleet entry 1 (kafka_eu1) (both connect to"),
    ([{"conn_id": "kafka_us1", "schedule": "every day"}],
     "fleet entry 1 (kafka_us1): invalid schedule 'every day': not a cron expression"),
    ([{"conn_id": "kafka_us1", "schedul": "@daily"}],
     "fleet entry 1 (kafka_us1): unknown key 'schedul' - did you mean 'schedule'?"),
    ([{"conn_id": "kafka_us1", "balance_threshold": 0.9}],
     "fleet entry 1 (kafka_us1): balance_threshold must be at least 1.0"),
    ([{"conn_id": "kafka_us1", "throttle_bytes_per_sec": "fast"}],
     "fleet entry 1 (kafka_us1): throttle_bytes_per_sec must be int, not 'fast'"),
    ([{"conn_id": "kafka_us1", "require_approval": "yes"}],
     "fleet entry 1 (kafka_us1): require_approval must be bool, not 'yes'"),
    ([{"conn_id": "kafka_us1", "maintenance_windows": ["Mon-Fri 01:00-05:00 Mars/Olympus"]}],
     "fleet entry 1 (kafka_us1): maintenance_windows: window 'Mon-Fri 01:00-05:00 Mars/Olympus'"),
    ([{"conn_id": "kafka_us1", "maintenance_windows": ["Mon 01:00-05:00 UTC", "Mon 04:00-06:00 UTC"]}],
     "fleet entry 1 (kafka_us1): maintenance_windows: 'Mon 01:00-05:00 UTC' and 'Mon 04:00-06:00 UTC' overlap"),
    ([{"conn_id": "kafka_us1", "maintenance_windows": "Mon 01:00-05:00 UTC"}],
     "fleet entry 1 (kafka_us1): maintenance_windows must be list, not 'Mon 01:00-05:00 UTC'"),
    ([{"conn_id": "kafka us1"}], "fleet entry 1 (kafka us1): conn_id 'kafka us1' may hold only"),
    ([{"schedule": "@daily"}], "fleet entry 1: conn_id must be str, not None"),
    ([42], "fleet entry 1: must be an object with conn_id"),
])
def test_bad_entries_are_named(entries: object, expected: str) -> None:
    with pytest.raises(FleetConfigError) as err:
        _parse(entries)
    assert expected in str(err.value)
    assert str(err.value).startswith("Variable kafka_reassign_fleet has ")


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(FleetConfigError) as err:
        _parse([{"conn_id": "kafka_nowhere", "schedule": "61 * * * *"}, "kafka_eu1", "kafka_eu1"])
    text = str(err.value)
    assert "has 3 problem(s)" in text
    assert "unknown connection 'kafka_nowhere'" in text and "invalid schedule '61 * * * *'" in text
    assert "fleet entry 3 (kafka_eu1): the same cluster as fleet entry 2" in text


@pytest.mark.parametrize("text", ["", "{", "[]", '{"conn_id": "kafka_eu1"}'])
def test_not_a_list_is_refused(text: str) -> None:
    with pytest.raises(FleetConfigError, match="fleet config"):
        parse_fleet(text, CHECKS)


def test_schedule_none_turns_the_schedule_off_without_a_cron_check() -> None:
    calls: list[str] = []
    checks = FleetChecks(connection_exists=lambda c: True,
                         schedule_problem=lambda s: calls.append(s) or "never valid", bootstrap_of=lambda c: None)
    fleet = parse_fleet('[{"conn_id": "a", "schedule": "none"}, "b"]', checks)
    assert fleet[0].schedule_off and fleet[1].schedule is None and calls == []
