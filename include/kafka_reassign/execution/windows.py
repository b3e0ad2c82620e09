"""Maintenance windows: when a run may start new moves.

Each window is one string, in one of two forms:

* ``"Mon-Fri 01:00-05:00 Europe/Berlin"``: days (a range ``Mon-Fri``, a list ``Sat,Sun``, or
  ``daily``), a wall-clock time range that may cross midnight (``22:00-02:00`` ends the next
  day; the days name the day it opens), and an IANA zone (``UTC`` when left out). Times are wall
  clock: on a DST change the window is an hour shorter or longer, as a clock on the wall shows.
* ``"cron:0 1 * * 1-5 for 4h Europe/Berlin"``: a five-field cron expression for the openings, a
  duration (``4h``, ``90m``, ``1h30m``), and the zone (``UTC`` when left out).

No window at all means always open. Outside every window the executor starts nothing new; the
moves in flight finish (:meth:`~kafka_reassign.execution.step_state.StepStates.admission_closed`).
:func:`parse_windows` refuses, naming the entry: an unparseable one, an unknown zone, a zero
length, and windows that overlap each other (or a cron window longer than its own period).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time as dtime, timedelta, timezone
from typing import Iterable, Sequence
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from kafka_reassign.errors import ParamError, Problem

PARAM = "maintenance_windows"
_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DAY_FORM = re.compile(r"^(?P<days>\S+)\s+(?P<start>\d{1,2}:\d{2})-(?P<end>\d{1,2}:\d{2})(?:\s+(?P<zone>\S+))?$")
_CRON_FORM = re.compile(r"^cron:\s*(?P<expr>(?:\S+\s+){4}\S+)\s+for\s+(?P<dur>\S+)(?:\s+(?P<zone>\S+))?$")
_DURATION = re.compile(r"^(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?$")
#: How far ahead the overlap check looks: two weeks hold every weekly pattern twice.
_OVERLAP_HORIZON = timedelta(days=15)
#: Occurrences of one window the overlap check reads at most (a cron firing every minute).
_MAX_OCCURRENCES = 20_000


@dataclass(frozen=True)
class Window:
    """One parsed window.

    :param text: the entry as given (errors and the progress view name it)
    :param zone: its IANA zone
    :param days: weekdays it opens on (0 = Monday); day form only
    :param start: opening wall time; day form only
    :param end: closing wall time (at or before ``start``: the next day); day form only
    :param cron: the cron expression; cron form only
    :param duration: the cron form's length
    """

    text: str
    zone: ZoneInfo
    days: frozenset[int] = frozenset()
    start: dtime | None = None
    end: dtime | None = None
    cron: str = ""
    duration: timedelta = timedelta(0)

    def openings(self, after: datetime, until: datetime) -> Iterable[tuple[datetime, datetime]]:
        """(opening, closing) in UTC of every occurrence that closes after ``after`` and opens before ``until``."""
        return self._cron_openings(after, until) if self.cron else self._day_openings(after, until)

    def _day_openings(self, after: datetime, until: datetime) -> Iterable[tuple[datetime, datetime]]:
        assert self.start is not None and self.end is not None
        day: date = after.astimezone(self.zone).date() - timedelta(days=1)
        while True:
            opens = _utc(datetime.combine(day, self.start, self.zone))
            if opens >= until:
                return
            closing_day = day if self.end > self.start else day + timedelta(days=1)
            closes = _utc(datetime.combine(closing_day, self.end, self.zone))
            if day.weekday() in self.days and closes > after:
                yield opens, closes
            day += timedelta(days=1)

    def _cron_openings(self, after: datetime, until: datetime) -> Iterable[tuple[datetime, datetime]]:
        from croniter import croniter  # type: ignore[import-untyped]  # comes with Airflow; no stubs

        it = croniter(self.cron, (after - self.duration).astimezone(self.zone))
        for _ in range(_MAX_OCCURRENCES):
            opens = _utc(it.get_next(datetime))
            if opens >= until:
                return
            closes = opens + self.duration
            if closes > after:
                yield opens, closes


def _utc(moment: datetime) -> datetime:
    """A zone-aware wall time in UTC (a time skipped by a DST change counts with the earlier offset)."""
    return moment.astimezone(timezone.utc)


def _at(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, timezone.utc)


def format_instant(ts: float) -> str:
    """A unix time as the progress view shows it: ``2026-11-27 01:00 UTC``."""
    return _at(ts).strftime("%Y-%m-%d %H:%M UTC")


@dataclass(frozen=True)
class MaintenanceWindows:
    """The run's windows (none: always open). Times are unix seconds."""

    windows: tuple[Window, ...] = ()

    def _intervals(self, now: float, ahead: timedelta) -> list[tuple[float, float]]:
        """Occurrences touching [now, now + ahead], merged where they meet, in order."""
        after = _at(now)
        spans = sorted((o.timestamp(), c.timestamp()) for w in self.windows for o, c in w.openings(after, after + ahead))
        merged: list[tuple[float, float]] = []
        for opens, closes in spans:
            if merged and opens <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], closes))
            else:
                merged.append((opens, closes))
        return merged

    def is_open(self, now: float) -> bool:
        """Whether new moves may start at ``now``."""
        # Only occurrences opened by now matter: a second ahead keeps a cron firing each minute cheap.
        return not self.windows or any(o <= now < c for o, c in self._intervals(now, timedelta(seconds=1)))

    def next_open(self, now: float) -> float | None:
        """``now`` when open, else the next opening (None: none within a year)."""
        if self.is_open(now):
            return now
        after = _at(now)
        # Each window's occurrences come in order: its first opening after now is the first one read.
        firsts = (next((o.timestamp() for o, _ in w.openings(after, after + timedelta(days=366))
                        if o.timestamp() > now), None) for w in self.windows)
        return min((t for t in firsts if t is not None), default=None)

    def closes_at(self, now: float) -> float | None:
        """When the window open at ``now`` closes (None: closed now, or no windows: never closes)."""
        for opens, closes in self._intervals(now, timedelta(days=8)):
            if opens <= now < closes:
                return closes
        return None


def _parse_days(text: str) -> frozenset[int]:
    if text.lower() in ("daily", "*"):
        return frozenset(range(7))
    out: set[int] = set()
    for part in text.lower().split(","):
        first, _, last = part.partition("-")
        if first not in _DAYS or (last and last not in _DAYS):
            raise ValueError(f"unknown day {part!r} (use Mon..Sun, a range Mon-Fri, a list Sat,Sun or daily)")
        a, b = _DAYS.index(first), _DAYS.index(last or first)
        out.update(range(a, b + 1) if a <= b else [*range(a, 7), *range(0, b + 1)])
    return frozenset(out)


def _parse_time(text: str) -> dtime:
    hours, minutes = (int(x) for x in text.split(":"))
    if hours == 24 and minutes == 0:
        return dtime(0, 0)
    if not (0 <= hours < 24 and 0 <= minutes < 60):
        raise ValueError(f"{text!r} is not a time of day (00:00 to 24:00)")
    return dtime(hours, minutes)


def _zone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {name!r} (an IANA name such as Europe/Berlin)") from exc


def parse_window(text: str) -> Window:
    """One entry, or ValueError saying what is wrong with it."""
    entry = " ".join(str(text).split())
    cron = _CRON_FORM.match(entry)
    if cron:
        from croniter import croniter

        if not croniter.is_valid(cron["expr"]):
            raise ValueError(f"{cron['expr']!r} is not a cron expression (minute hour day month weekday)")
        try:
            croniter(cron["expr"], datetime(2000, 1, 1, tzinfo=timezone.utc)).get_next(datetime)
        except Exception as exc:  # croniter gives up on a date that never comes (30 February)
            raise ValueError(f"{cron['expr']!r} never fires") from exc
        dur = _DURATION.match(cron["dur"])
        if not dur or not cron["dur"]:
            raise ValueError(f"{cron['dur']!r} is not a duration such as 4h, 90m or 1h30m")
        length = timedelta(hours=int(dur["h"] or 0), minutes=int(dur["m"] or 0))
        if length <= timedelta(0):
            raise ValueError("a window of zero length never opens")
        return Window(str(text), _zone(cron["zone"]), cron=cron["expr"], duration=length)
    day = _DAY_FORM.match(entry)
    if not day:
        raise ValueError('expected "Mon-Fri 01:00-05:00 Europe/Berlin" or "cron:0 1 * * 1-5 for 4h Europe/Berlin"')
    start, end = _parse_time(day["start"]), _parse_time(day["end"])
    if start == end and day["end"] != "24:00":   # 00:00-24:00 is the whole day
        raise ValueError("a window of zero length never opens (start and end are the same time)")
    return Window(str(text), _zone(day["zone"]), days=_parse_days(day["days"]), start=start, end=end)


def _overlaps(windows: Sequence[Window], now: float) -> list[Problem]:
    """Windows whose occurrences overlap (another's or, for a cron window, its own next one)."""
    after = _at(now)
    spans = sorted((o, c, n) for n, w in enumerate(windows)
                   for o, c in w.openings(after, after + _OVERLAP_HORIZON))
    problems: list[Problem] = []
    seen: set[tuple[int, int]] = set()
    reach: tuple[datetime, int] | None = None   # the latest closing so far, and whose
    for opens, closes, n in spans:
        pair = (min(reach[1], n), max(reach[1], n)) if reach is not None else (n, n)
        if reach is not None and opens < reach[0] and pair not in seen:  # each pair named once
            seen.add(pair)
            a, b = windows[reach[1]].text, windows[n].text
            what = f"{a!r} overlaps itself (its duration is longer than its period)" if reach[1] == n \
                else f"{a!r} and {b!r} overlap (at {opens.isoformat()}): give one window for that time"
            problems.append(Problem(PARAM, what, "bad_param"))
        if reach is None or closes > reach[0]:
            reach = (closes, n)
    return problems


def parse_windows(entries: Sequence[str] | None, *, now: float | None = None) -> MaintenanceWindows:
    """Every entry parsed and checked; :class:`ParamError` names each bad entry and each overlap.

    :param entries: the ``maintenance_windows`` run parameter (empty: always open)
    :param now: where the overlap check starts (default: now)
    """
    import time

    if entries is None:
        return MaintenanceWindows()
    if isinstance(entries, str) or not isinstance(entries, (list, tuple)):
        raise ParamError([Problem(PARAM, f"must be a list of strings, got {entries!r}", "bad_param")])
    problems: list[Problem] = []
    windows: list[Window] = []
    for text in entries:
        try:
            if not isinstance(text, str):
                raise ValueError("must be a string")
            windows.append(parse_window(text))
        except ValueError as exc:
            problems.append(Problem(PARAM, f"window {text!r}: {exc}", "bad_param"))
    if not problems:
        problems = _overlaps(windows, time.time() if now is None else now)
    if problems:
        raise ParamError(problems)
    return MaintenanceWindows(tuple(windows))
