"""Value checks for scenario fields, declared on a section's dataclass fields:

    max_duration: int = field(default=7200, metadata=duration(10, 7 * 86400))

A check turns the YAML value into the field's typed value (`2h` -> 7200) or says what is wrong in
the words a scenario author needs ("must be between 10s and 7d; got '9d'"). `fallback` is a value of
the field's type that stands in for a bad one, so the typed-model builder checks the rest of the
file and every problem is reported at once (typed.py).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import field
from typing import Any, Callable

DEFAULT_START = "2026-11-18T14:00:00Z"  # a Wednesday, 09:00 US Eastern: traffic climbing to its peak


class Bad(ValueError):
    """A field's value is wrong; the message names what was expected."""


class Check:
    def __init__(self, convert: Callable[[Any], Any], fallback: Any):
        self.convert, self.fallback = convert, fallback


def show(value: Any) -> str:
    return f"{type(value).__name__} {repr(value)[:60]}"


def dur(seconds: int) -> str:
    from opsctl.clock import format_duration

    return format_duration(int(seconds))


def checked(check: Check, default: Any = None, *, key: str | None = None, required: bool = False):
    """A dataclass field read through `check`; `key`: its YAML key when not the hyphenated name."""
    meta = {"check": check, **({"key": key} if key else {})}
    if required:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


def text(*choices: str) -> Check:
    def convert(value):
        if not isinstance(value, str) or not value.strip():
            raise Bad(f"expected a non-empty string, got {show(value)}")
        if choices and value not in choices:
            raise Bad(f"must be one of {', '.join(choices)}; got {value!r}")
        return value.strip()
    return Check(convert, choices[0] if choices else "")


def number(low: float | None = None, high: float | None = None, *, low_open: bool = False) -> Check:
    def convert(value):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Bad(f"expected a number, got {show(value)}")
        if (low is not None and (value < low or (low_open and value == low))) or (high is not None and value > high):
            lo = f"{'above' if low_open else 'at least'} {low:g}" if low is not None else ""
            hi = f"at most {high:g}" if high is not None else ""
            raise Bad(f"must be {' and '.join(x for x in (lo, hi) if x)}; got {value!r}")
        return float(value)
    return Check(convert, 0.0)


def integer(low: int, high: int) -> Check:
    def convert(value):
        if isinstance(value, bool) or not isinstance(value, int):
            raise Bad(f"expected an integer, got {show(value)}")
        if not low <= value <= high:
            raise Bad(f"must be between {low} and {high}; got {value}")
        return value
    return Check(convert, low)


def flag() -> Check:
    def convert(value):
        if not isinstance(value, bool):
            raise Bad(f"expected true or false, got {show(value)}")
        return value
    return Check(convert, False)


def duration(minimum: int = 0, maximum: int = 30 * 86400, *, never: bool = False) -> Check:
    """Seconds from `30s`, `5m`, `1h30m` or a number; `never` also reads `never` as None."""
    from opsctl.clock import parse_duration

    def convert(value):
        if never and value == "never":
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise Bad(f"expected a duration such as 30s, 5m, 1h30m, got {show(value)}")
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            raise Bad(str(exc)) from None
        if not minimum <= seconds <= maximum:
            raise Bad(f"must be between {dur(minimum)} and {dur(maximum)}; got {value!r}")
        return seconds
    return Check(convert, minimum)


def rfc3339(value: str) -> float:
    from opsctl.clock import parse_rfc3339

    return parse_rfc3339(value)


def instant() -> Check:
    """An RFC 3339 time (YAML reads an unquoted one as a datetime) -> Unix seconds."""
    def convert(value):
        if isinstance(value, _dt.datetime):
            return (value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)).timestamp()
        if isinstance(value, str):
            try:
                return rfc3339(value)
            except ValueError:
                pass
        raise Bad(f"expected an RFC 3339 time such as {DEFAULT_START}, got {show(value)}")
    return Check(convert, 0.0)


def names(*allowed: str, what: str = "") -> Check:
    """A name or a list of names -> list; `allowed`: the only names accepted."""
    def convert(value):
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(v, str) and v for v in items):
            raise Bad(f"expected a list of names, got {show(value)}")
        for v in items:
            if allowed and v not in allowed:
                raise Bad(f"unknown {what} {v!r} ({what}s: {', '.join(allowed)})")
        return list(items)
    return Check(convert, [])


def percent_map() -> Check:
    """backend -> whole percent."""
    def convert(value):
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in value.items()):
            raise Bad(f"expected a mapping of backend to whole percent, got {show(value)}")
        return dict(value)
    return Check(convert, {})
