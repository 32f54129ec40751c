"""opsctl.freeze: cron day matching and freeze windows across DST and time zones."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from opsctl.config import FreezeWindow
from opsctl.freeze import FreezeCalendar, parse_cron


def utc(*args) -> float:
    return datetime(*args, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize("expr, day, fires", [
    ("0 0 * 11 thu#4", date(2026, 11, 26), True),
    ("0 0 * 11 thu#4", date(2026, 11, 19), False),
    ("0 9 * * friL", date(2026, 12, 25), True),  # the last Friday of December 2026
    ("0 9 * * friL", date(2026, 12, 18), False),
    ("0 0 1,15 * mon", date(2026, 12, 7), True),  # day-of-month OR day-of-week, as in cron
    ("0 0 1,15 * mon", date(2026, 12, 15), True),
    ("0 0 1,15 * mon", date(2026, 12, 16), False),
    ("@yearly", date(2027, 1, 1), True),
    ("0 0 */10 jan-mar *", date(2027, 2, 21), True),
    ("0 0 */10 jan-mar *", date(2027, 4, 1), False),
    ("0 0 * * 7", date(2026, 11, 29), True),  # 7 is Sunday too
])
def test_cron_day_matching(expr, day, fires):
    assert parse_cron(expr).day_matches(day) is fires


def test_a_recurring_freeze_lasts_its_duration_across_a_dst_change():
    # 24 hours from 00:00 on Saturday 31 October 2026 in New York crosses the end of DST (1 Nov).
    window = FreezeWindow(name="w", timezone="America/New_York", cron="0 0 31 10 *", duration="1d")
    calendar = FreezeCalendar([window])
    start = utc(2026, 10, 31, 4)  # EDT, UTC-4
    assert [s.start for s in calendar.active(start)] == [start]
    assert calendar.active(start + 86400 - 1) and not calendar.active(start + 86400)
    assert not calendar.active(start - 1)


def test_a_fixed_freeze_uses_its_own_time_zone():
    window = FreezeWindow(name="launch", timezone="Asia/Tokyo", start="2027-01-10T09:00", end="2027-01-10T18:00")
    calendar = FreezeCalendar([window])
    assert calendar.active(utc(2027, 1, 10, 0)) and not calendar.active(utc(2027, 1, 9, 23, 59))
    assert not calendar.active(utc(2027, 1, 10, 9))
    assert calendar.upcoming(utc(2027, 1, 11)) == []
