"""Maintenance windows: parsing, refusals naming the entry, and opening times across midnight and DST."""
from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from kafka_reassign.errors import ParamError
from kafka_reassign.execution.windows import parse_windows
from kafka_reassign.planning.validate import validate_params

BERLIN = ZoneInfo("Europe/Berlin")


def at(*args: int, tz: ZoneInfo | timezone = timezone.utc) -> float:
    return datetime(*args, tzinfo=tz).timestamp()


def test_no_window_is_always_open():
    w = parse_windows([])
    assert w.is_open(0.0) and w.next_open(5.0) == 5.0 and w.closes_at(5.0) is None


def test_weekday_range_in_a_zone():
    w = parse_windows(["Mon-Fri 01:00-05:00 Europe/Berlin"])
    thu_noon = at(2026, 11, 26, 12, 0, tz=BERLIN)
    assert not w.is_open(thu_noon)
    assert w.next_open(thu_noon) == at(2026, 11, 27, 1, 0, tz=BERLIN)
    assert w.is_open(at(2026, 11, 27, 4, 59, tz=BERLIN))
    assert w.closes_at(at(2026, 11, 27, 2, 0, tz=BERLIN)) == at(2026, 11, 27, 5, 0, tz=BERLIN)
    # Friday's window is the last one of the week: Saturday waits for Monday.
    assert w.next_open(at(2026, 11, 28, 3, 0, tz=BERLIN)) == at(2026, 11, 30, 1, 0, tz=BERLIN)


def test_a_window_crossing_midnight_belongs_to_the_day_it_opens():
    w = parse_windows(["Sat,Sun 22:00-02:00 UTC"])
    assert w.is_open(at(2026, 11, 29, 1, 30))          # Sunday 01:30: Saturday's window
    assert w.is_open(at(2026, 11, 30, 1, 30))          # Monday 01:30: Sunday's window
    assert not w.is_open(at(2026, 11, 28, 1, 30))      # Saturday 01:30: Friday has none
    assert w.closes_at(at(2026, 11, 29, 23, 0)) == at(2026, 11, 30, 2, 0)
    assert w.next_open(at(2026, 11, 30, 3, 0)) == at(2026, 12, 5, 22, 0)


def test_wall_clock_windows_follow_dst_changes():
    w = parse_windows(["daily 01:00-05:00 Europe/Berlin"])
    # 29 March 2026: clocks jump 02:00 -> 03:00, the window lasts 3 real hours (00:00-03:00 UTC).
    opens = w.next_open(at(2026, 3, 28, 12, 0))
    assert opens == at(2026, 3, 29, 0, 0)
    assert w.closes_at(opens) == at(2026, 3, 29, 3, 0)
    # 25 October 2026: clocks fall back 03:00 -> 02:00, the window lasts 5 real hours.
    opens = w.next_open(at(2026, 10, 24, 12, 0))
    assert opens == at(2026, 10, 24, 23, 0)
    assert w.closes_at(opens) == at(2026, 10, 25, 4, 0)


def test_cron_windows_in_a_zone_and_across_dst():
    w = parse_windows(["cron:30 23 * * 6 for 2h America/New_York"])
    sat = at(2026, 3, 7, 12, 0, tz=ZoneInfo("America/New_York"))
    assert w.next_open(sat) == at(2026, 3, 7, 23, 30, tz=ZoneInfo("America/New_York"))
    # It opens before the 8 March DST jump and lasts 2 real hours.
    assert w.closes_at(w.next_open(sat) + 60) == at(2026, 3, 8, 6, 30)
    assert not w.is_open(at(2026, 3, 8, 6, 30))


def test_touching_windows_are_one_stretch():
    w = parse_windows(["daily 01:00-03:00 UTC", "daily 03:00-04:00 UTC"])
    assert w.closes_at(at(2026, 1, 1, 2, 0)) == at(2026, 1, 1, 4, 0)


@pytest.mark.parametrize("entries, says", [
    (["Mon-Fri 01:00-05:00 Mars/Olympus"], "unknown time zone 'Mars/Olympus'"),
    (["Mon-Fri 01:00-01:00 UTC"], "zero length"),
    (["cron:0 1 * * * for 0m"], "zero length"),
    (["Mon-Fri 1am-5am"], "expected \"Mon-Fri 01:00-05:00 Europe/Berlin\""),
    (["Mon-Fry 01:00-05:00"], "unknown day 'mon-fry'"),
    (["Mon 25:00-26:00"], "not a time of day"),
    (["cron:0 1 * * 9 for 1h"], "not a cron expression"),
    (["cron:0 0 30 2 * for 1h"], "never fires"),
    (["cron:0 1 * * * for soon"], "not a duration"),
    (["Mon-Fri 01:00-05:00 Europe/Berlin", "Wed 04:00-06:00 Europe/Berlin"],
     "'Mon-Fri 01:00-05:00 Europe/Berlin' and 'Wed 04:00-06:00 Europe/Berlin' overlap"),
    (["cron:0 * * * * for 90m"], "overlaps itself"),
    ("Mon-Fri 01:00-05:00", "must be a list of strings"),
])
def test_bad_windows_are_refused_naming_the_entry(entries, says):
    with pytest.raises(ParamError) as info:
        parse_windows(entries)
    assert says in str(info.value)
    with pytest.raises(ParamError, match="maintenance_windows"):
        validate_params({"maintenance_windows": entries})


def test_the_run_param_takes_a_list_and_keeps_it():
    params = validate_params({"maintenance_windows": ["Sat,Sun 00:00-24:00 UTC"]})
    assert params.maintenance_windows == ("Sat,Sun 00:00-24:00 UTC",)
    assert validate_params({}).maintenance_windows == ()
    assert parse_windows(list(params.maintenance_windows)).is_open(at(2026, 11, 29, 12, 0))
