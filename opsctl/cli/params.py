"""Click parameter types shared by every command, so the same kind of value parses the same way.

    TIME      an RFC 3339 instant with its time zone (Z or +hh:mm) -> UNIX seconds (float).
              A time without a zone is refused: silently reading 15:00 as UTC when the on-call
              meant local time shifts an SLO report or a freeze check by hours.
    choice()  click.Choice that ignores case (`--severity sev2` is Sev2) and returns the
              canonical spelling.
"""

from __future__ import annotations

import click


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
