"""Click parameter types shared by every command, so the same kind of value parses the same way.

    TIME      an instant -> UNIX seconds (float): RFC 3339 with its time zone (Z or +hh:mm), or
              relative to now: `now`, `now-7d`, `-7d` (the same), `now-1h30m` (durations as
              everywhere: s, m, h, d, w). A time without a zone is refused: silently reading 15:00
              as UTC when the on-call meant local time shifts an SLO report or a freeze check by hours.
    choice()  click.Choice that ignores case (`--severity sev2` is Sev2) and returns the
              canonical spelling.
    IDENTIFIER an id recorded in the change record, audit log and tables (an incident id):
              no control characters, at most 128 characters.
    LINE      one line of free text (a reason): no control characters, at most 1,000 characters.
"""

from __future__ import annotations

import re

import click

# CR, LF and other control characters in a recorded value forge lines in logs and break tables.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class TimeParam(click.ParamType):
    name = "time"

    def get_metavar(self, param, ctx=None):  # click 8.2+ passes ctx
        return "TIME"  # TIME_FORMS, said in each option's help

    def convert(self, value, param, ctx):
        if value is None or isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        try:
            return parse_time(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


EARLIEST, LATEST = 0.0, 32503680000.0  # 1970-01-01 .. 3000-01-01: calendars and the store work within it


TIME_FORMS = "RFC 3339 with a zone (2026-11-26T15:00:00Z), or now, now-7d, -7d, now-1h30m"
_RELATIVE = re.compile(r"\s*(now)?\s*(?:-\s*([0-9a-z]+))?\s*", re.I)


def parse_time(value: str, now: float | None = None) -> float:
    """RFC 3339 text with its zone, or `now` / `now-DUR` / `-DUR` (before `now`, default the wall
    clock) -> UNIX seconds; ValueError (one line, with the forms) otherwise."""
    from opsctl.clock import parse_duration, parse_rfc3339, wall_now

    relative = _RELATIVE.fullmatch(value)
    if relative and (relative.group(1) or relative.group(2)):
        try:
            ago = parse_duration(relative.group(2).lower()) if relative.group(2) else 0
        except ValueError:
            raise ValueError(f"{value!r}: {relative.group(2)!r} is not a duration (forms: {TIME_FORMS})") from None
        seconds = (wall_now() if now is None else now) - ago
    else:
        try:
            seconds = parse_rfc3339(value, require_zone=True)
        except ValueError as exc:
            raise ValueError(f"{exc}; or relative: now, now-7d, -7d, now-1h30m") from None
    if not EARLIEST <= seconds < LATEST:
        raise ValueError(f"{value!r} is out of range: give a time from 1970 to 2999")
    return seconds


TIME = TimeParam()


def choice(values, **kw) -> click.Choice:
    """A case-insensitive click.Choice: the user may type any case, the command gets the canonical one."""
    return click.Choice(list(values), case_sensitive=False, **kw)


class SingleLineParam(click.ParamType):
    """Text that is recorded and shown on one line: control characters and overlong values are refused."""

    def __init__(self, name: str, limit: int):
        self.name, self.limit = name, limit

    def convert(self, value, param, ctx):
        if value is None:
            return value
        if _CONTROL.search(value):
            self.fail("must not contain control characters (CR, LF, tab, ...): give it on one line", param, ctx)
        if len(value) > self.limit:
            self.fail(f"is {len(value)} characters long: at most {self.limit}", param, ctx)
        return value


IDENTIFIER = SingleLineParam("id", 128)
LINE = SingleLineParam("text", 1000)
