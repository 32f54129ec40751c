"""Wall clock and simulated clock: drills on the embedded environment run in simulated time.

`Clock` is what both offer (`now()`, `sleep()`): code that takes either is typed `Clock`; only a
caller that moves simulated time itself (`advance()`) names `SimClock`."""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from typing import Protocol


class Clock(Protocol):
    """What `WallClock` and `SimClock` both offer."""

    def now(self) -> float:
        """Seconds since the epoch, as this clock reads them."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait `seconds` (a simulated clock moves on at once)."""
        ...


def clock_offset() -> float:
    """`OPSCTL_CLOCK_OFFSET` (signed seconds): the documented test hook for hosts whose clocks
    disagree; it shifts every wall-clock read of this process (0 when unset or not a number)."""
    try:
        return float(os.environ.get("OPSCTL_CLOCK_OFFSET", "0") or 0)
    except ValueError:
        return 0.0


def wall_now() -> float:
    """The wall clock of this host, as every part of opsctl reads it (with the test offset)."""
    return time.time() + clock_offset()


class WallClock:
    def now(self) -> float:
        return wall_now()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class SimClock:
    """A clock that only moves when told to; `sleep` advances it instantly."""

    def __init__(self, start: float):
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a simulated clock cannot go backwards")
        self._now += seconds


def parse_rfc3339(value: str, *, require_zone: bool = False) -> float:
    """RFC 3339 / ISO 8601 timestamp -> UNIX seconds; ValueError (one line, with an example) otherwise.

    A naive timestamp is taken as UTC, unless `require_zone`: what a person types on the command
    line must say its zone, or 15:00 meant as local time is silently read as 15:00 UTC."""
    example = "e.g. 2026-11-26T15:00:00Z or 2026-11-26T10:00:00-05:00"
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{value!r} is not an RFC 3339 time ({example})") from None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        if require_zone:
            raise ValueError(f"{value!r} has no time zone: add Z for UTC or an offset like +01:00 ({example})")
        parsed = parsed.replace(tzinfo=timezone.utc)
    try:
        return parsed.timestamp()
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"{value!r} is out of range ({example})") from None


def format_rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(value: str | int | float) -> int:
    """'5m', '1h30m', '28d', '90s' or a number of seconds -> seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"negative duration {value!r}")
        return int(value)
    text = str(value).strip()
    if not text:
        raise ValueError("empty duration")
    total, number = 0, ""
    for char in text:
        if char.isdigit():
            number += char
        elif char in _UNITS and number:
            total += int(number) * _UNITS[char]
            number = ""
        else:
            raise ValueError(f"invalid duration {value!r}: use forms like 30s, 5m, 1h30m, 28d")
    if number:
        raise ValueError(f"invalid duration {value!r}: a number needs a unit (s, m, h, d, w)")
    return total


def format_duration(seconds: int) -> str:
    """Inverse of parse_duration for whole units: 300 -> '5m', 2419200 -> '28d'."""
    for unit, size in (("w", 0), ("d", 86400), ("h", 3600), ("m", 60)):
        if size and seconds % size == 0 and seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
