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


def parse_time(value: str) -> float:
    """RFC 3339 text with its zone -> UNIX seconds; ValueError (one line, with an example) otherwise."""
    from opsctl.clock import parse_rfc3339

    return parse_rfc3339(value, require_zone=True)


TIME = TimeParam()


def choice(values, **kw) -> click.Choice:
    """A case-insensitive click.Choice: the user may type any case, the command gets the canonical one."""
    return click.Choice(list(values), case_sensitive=False, **kw)
