"""Click parameter types shared by every command, so the same kind of value parses the same way.

    TIME      an RFC 3339 instant with its time zone (Z or +hh:mm) -> UNIX seconds (float).
              A time without a zone is refused: silently reading 15:00 as UTC when the on-call
              meant local time shifts an SLO report or a freeze check by hours.
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
        return "RFC3339"

    def convert(self, value, param, ctx):
        if value is None or isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        try:
            return parse_time(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


EARLIEST, LATEST = 0.0, 32503680000.0  # 1970-01-01 .. 3000-01-01: calendars and the store work within it


def parse_time(value: str) -> float:
    """RFC 3339 text with its zone -> UNIX seconds; ValueError (one line, with an example) otherwise."""
    from opsctl.clock import parse_rfc3339

    seconds = parse_rfc3339(value, require_zone=True)
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
