"""Change-freeze calendar: fixed ranges or cron plus duration, each in its own time zone.

Inside a freeze routine traffic changes are refused; an emergency tied to an incident may override
it, and the override names the freeze (see traffic/guards.py).

Cron expressions have the five standard fields (minute hour day-of-month month day-of-week), with
`*`, lists, ranges, steps, month and weekday names, `@yearly`-style macros, and two day-of-week
extensions: `thu#4` (the fourth Thursday of the month) and `friL` (the last Friday). As in classic
cron, when both day-of-month and day-of-week are restricted a day matching either one fires.
Start times are local times in the window's zone (zoneinfo); `duration` is elapsed time, so a window
that spans a DST change still lasts exactly its duration.
"""

from __future__ import annotations

import calendar
from datetime import date, datetime, timedelta, timezone
from typing import Iterable

from opsctl.model import Duration, Model

MAX_DURATION = 366 * 86400
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_DAYS = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


# ---------------------------------------------------------------------------------------------
# Cron


class CronSchedule(Model):
    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    nth_weekdays: frozenset[tuple[int, int]]  # (weekday, n): n-th such weekday of the month
    last_weekdays: frozenset[int]  # last such weekday of the month
    dom_restricted: bool
    dow_restricted: bool

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        weekday = (day.weekday() + 1) % 7  # Python: Monday = 0 -> cron: Sunday = 0
        dow = (
            weekday in self.weekdays
            or (weekday, (day.day - 1) // 7 + 1) in self.nth_weekdays
            or (weekday in self.last_weekdays and day.day + 7 > calendar.monthrange(day.year, day.month)[1])
        )
        if self.dom_restricted and self.dow_restricted:
            return dom or dow
        if self.dom_restricted:
            return dom
        if self.dow_restricted:
            return dow
        return True


def parse_cron(text: str) -> CronSchedule:
    """Parse a five-field cron expression; ValueError names the field that is wrong."""
    expr = _MACROS.get(text.strip().lower(), text.strip())
    fields = expr.split()
    if len(fields) != 5:
        raise ValueError(f"cron {text!r}: expected 5 fields (minute hour day-of-month month day-of-week), got {len(fields)}")
    minute, hour, dom, month, dow = fields
    weekdays: set[int] = set()
    nth: set[tuple[int, int]] = set()
    last: set[int] = set()
    for part in dow.split(","):
        low = part.lower()
        if "#" in low:
            day_text, _, n_text = low.partition("#")
            day = _value(day_text, 0, 7, _DAYS, "day-of-week", text) % 7
            if not n_text.isdigit() or not 1 <= int(n_text) <= 5:
                raise ValueError(f"cron {text!r}: day-of-week {part!r}: the n in DAY#n must be 1 to 5")
            nth.add((day, int(n_text)))
        elif low.endswith("l") and len(low) > 1:
            last.add(_value(low[:-1], 0, 7, _DAYS, "day-of-week", text) % 7)
        else:
            weekdays.update(v % 7 for v in _field(part, 0, 7, _DAYS, "day-of-week", text))
    return CronSchedule(
        text=text,
        minutes=tuple(sorted(_field(minute, 0, 59, {}, "minute", text))),
        hours=tuple(sorted(_field(hour, 0, 23, {}, "hour", text))),
        days=frozenset(_field(dom, 1, 31, {}, "day-of-month", text)),
        months=frozenset(_field(month, 1, 12, _MONTHS, "month", text)),
        weekdays=frozenset(weekdays),
        nth_weekdays=frozenset(nth),
        last_weekdays=frozenset(last),
        dom_restricted=dom != "*",
        dow_restricted=dow != "*",
    )


def _value(token: str, low: int, high: int, names: dict[str, int], what: str, text: str) -> int:
    token = token.strip().lower()
    if token in names:
        return names[token]
    if not token.isdigit():
        raise ValueError(f"cron {text!r}: {what}: {token!r} is not a number or name")
    value = int(token)
    if not low <= value <= high:
        raise ValueError(f"cron {text!r}: {what}: {value} is outside {low}-{high}")
    return value


def _field(spec: str, low: int, high: int, names: dict[str, int], what: str, text: str) -> set[int]:
    values: set[int] = set()
    for part in spec.split(","):
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) < 1:
                raise ValueError(f"cron {text!r}: {what}: step {step_text!r} must be a positive number")
            step = int(step_text)
        if base == "*":
            first, stop = low, high
        elif "-" in base:
            a, _, b = base.partition("-")
            first, stop = _value(a, low, high, names, what, text), _value(b, low, high, names, what, text)
            if first > stop:
                raise ValueError(f"cron {text!r}: {what}: range {base!r} runs backwards")
        else:
            first = _value(base, low, high, names, what, text)
            stop = high if step_text else first
        values.update(range(first, stop + 1, step))
    return values


# ---------------------------------------------------------------------------------------------
# Windows


def _zone(name: str):
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        from zoneinfo import available_timezones

        if not available_timezones():
            raise ValueError(f"time zone {name!r}: this machine has no time zone database"
                             " (install the system tzdata package, or `pip install tzdata`)") from exc
        raise ValueError(f"unknown time zone {name!r} (use an IANA name such as America/New_York or UTC)") from exc


def _local(text: str, tz, what: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise ValueError(f"{what}: {text!r} is not a local date or date-time such as 2026-11-25T18:00") from exc
    if parsed.tzinfo is not None:
        raise ValueError(f"{what}: {text!r} carries a UTC offset; give a local time and set `timezone` instead")
    return unambiguous(parsed, tz, what, text)


def unambiguous(parsed: datetime, tz, what: str, text: str) -> datetime:
    """`parsed` (naive) in `tz`; ValueError naming `what` when the clocks skip it (a DST gap) or show
    it twice (a DST fold): no silent choice of one offset."""
    from datetime import timezone as _utc_zone

    dt = parsed.replace(tzinfo=tz)
    zone = getattr(tz, "key", str(tz))
    if dt.astimezone(_utc_zone.utc).astimezone(tz).replace(tzinfo=None) != parsed:
        raise ValueError(f"{what}: {text!r} does not exist in {zone} (the clocks skip it at the DST change);"
                         " give a time outside the gap")
    if dt.utcoffset() != dt.replace(fold=1).utcoffset():
        raise ValueError(f"{what}: {text!r} is ambiguous in {zone} (it occurs twice as the clocks go back);"
                         " give a time outside that hour, or the freeze in UTC")
    return dt


class FreezeWindow(Model):
    """A change freeze: a fixed range (`start`/`end`, local times in `timezone`) or `cron` plus `duration`.

    The config's `freezes:` list holds these; the model lives here, with the calendar it feeds.
    """

    name: str
    timezone: str = "UTC"
    start: str | None = None
    end: str | None = None
    cron: str | None = None
    duration: Duration | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        validate_window(self)

    def fixed_range(self) -> tuple[str, str]:
        """`start` and `end` of a fixed freeze (validate_window saw both or neither)."""
        if self.start is None or self.end is None:
            raise ValueError(f"freeze {self.name!r} is recurring, not fixed")
        return self.start, self.end

    def recurrence(self) -> tuple[str, int]:
        """`cron` and the duration in seconds of a recurring freeze."""
        if self.cron is None or self.duration is None:
            raise ValueError(f"freeze {self.name!r} is fixed, not recurring")
        return self.cron, self.duration.seconds


def validate_window(window: FreezeWindow) -> None:
    """Called by the config model: every problem is a ValueError naming the field."""
    if not window.name or not all(c.isalnum() or c in "-_ " for c in window.name):
        raise ValueError(f"name: {window.name!r}: use letters, digits, spaces, - and _")
    tz = _zone(window.timezone)
    fixed = window.start is not None or window.end is not None
    recurring = window.cron is not None or window.duration is not None
    if fixed == recurring:
        raise ValueError(f"freeze {window.name!r}: give either start and end, or cron and duration")
    if fixed:
        if window.start is None or window.end is None:
            raise ValueError(f"freeze {window.name!r}: a fixed freeze needs both start and end")
        if _local(window.end, tz, "end") <= _local(window.start, tz, "start"):
            raise ValueError(f"freeze {window.name!r}: end must be after start")
    else:
        if window.cron is None or window.duration is None:
            raise ValueError(f"freeze {window.name!r}: a recurring freeze needs both cron and duration")
        parse_cron(window.cron)
        seconds = window.duration.seconds
        if not 0 < seconds <= MAX_DURATION:
            raise ValueError(f"freeze {window.name!r}: duration must be between 1s and 366d")


class FreezeSpan(Model):
    """One occurrence of a freeze window: [start, end) in UNIX seconds."""

    name: str
    start: float
    end: float
    timezone: str
    reason: str
    kind: str  # fixed | cron

    def contains(self, at: float) -> bool:
        return self.start <= at < self.end

    def local(self, ts: float) -> str:
        return datetime.fromtimestamp(ts, tz=_zone(self.timezone)).strftime("%Y-%m-%d %H:%M %Z")

    def describe(self) -> str:
        return f"{self.name} ({self.local(self.start)} until {self.local(self.end)})"

    def to_dict(self) -> dict:
        def iso(ts):
            return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

        return {
            "name": self.name,
            "start": iso(self.start),
            "end": iso(self.end),
            "timezone": self.timezone,
            "start_local": self.local(self.start),
            "end_local": self.local(self.end),
            "reason": self.reason,
            "kind": self.kind,
        }


class FreezeCalendar:
    def __init__(self, windows: Iterable[FreezeWindow]):
        self.windows = list(windows)

    def active(self, at: float) -> list[FreezeSpan]:
        """Every freeze in force at `at`."""
        spans = []
        for window in self.windows:
            span = self._latest_start(window, at)
            if span is not None and span.contains(at):
                spans.append(span)
        return spans

    def upcoming(self, at: float) -> list[FreezeSpan]:
        """Per window: the occurrence in force at `at`, else the next one (windows with none left are omitted)."""
        spans = []
        for window in self.windows:
            current = self._latest_start(window, at)
            if current is not None and current.contains(at):
                spans.append(current)
                continue
            following = self._next_start(window, at)
            if following is not None:
                spans.append(following)
        return sorted(spans, key=lambda s: s.start)

    # -- occurrences -------------------------------------------------------------------------

    def _span(self, window: FreezeWindow, start: float, end: float, kind: str) -> FreezeSpan:
        return FreezeSpan(window.name, start, end, window.timezone, window.reason, kind)

    def _fixed(self, window: FreezeWindow, tz) -> FreezeSpan:
        start_text, end_text = window.fixed_range()
        start = _local(start_text, tz, "start").timestamp()
        return self._span(window, start, _local(end_text, tz, "end").timestamp(), "fixed")

    def _latest_start(self, window: FreezeWindow, at: float) -> FreezeSpan | None:
        """The occurrence that started last at or before `at` (it may have ended)."""
        tz = _zone(window.timezone)
        if window.cron is None:
            span = self._fixed(window, tz)
            return span if span.start <= at else None
        cron, duration = window.recurrence()
        schedule = parse_cron(cron)
        today = datetime.fromtimestamp(at, tz=tz).date()
        oldest = datetime.fromtimestamp(at - duration, tz=tz).date() - timedelta(days=1)
        day = today
        while day >= oldest:
            if schedule.day_matches(day):
                for start in _starts_on(schedule, day, tz, reverse=True):
                    if start <= at:
                        return self._span(window, start, start + duration, "cron")
            day -= timedelta(days=1)
        return None

    def _next_start(self, window: FreezeWindow, at: float) -> FreezeSpan | None:
        tz = _zone(window.timezone)
        if window.cron is None:
            span = self._fixed(window, tz)
            return span if span.start > at else None
        cron, duration = window.recurrence()
        schedule = parse_cron(cron)
        day = datetime.fromtimestamp(at, tz=tz).date()
        for _ in range(366 * 8 + 1):  # Feb 29 schedules repeat within 8 years
            if schedule.day_matches(day):
                for start in _starts_on(schedule, day, tz, reverse=False):
                    if start > at:
                        return self._span(window, start, start + duration, "cron")
            day += timedelta(days=1)
        return None


def _starts_on(schedule: CronSchedule, day: date, tz, *, reverse: bool) -> list[float]:
    hours = sorted(schedule.hours, reverse=reverse)
    minutes = sorted(schedule.minutes, reverse=reverse)
    return [
        datetime(day.year, day.month, day.day, h, m, tzinfo=tz).timestamp()
        for h in hours
        for m in minutes
    ]
