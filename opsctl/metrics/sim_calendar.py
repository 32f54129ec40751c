"""The simulator's calendar: the weekly profile of traffic in US Eastern local time (DST included),
US holidays computed for each year, and the share of peak traffic over each step. Split from
opsctl.metrics.simulator, which re-exports it."""

from __future__ import annotations

import math
from datetime import date, timedelta
from typing import TYPE_CHECKING

from opsctl.metrics import schema

if TYPE_CHECKING:  # numpy is imported inside the functions that use it (start-up stays light)
    import numpy as np

STEP = schema.STEP_SECONDS

# Share of peak traffic at each local hour (US Eastern), Monday first.
_TUE_THU = (0.32, 0.27, 0.23, 0.21, 0.21, 0.25, 0.36, 0.54, 0.74, 0.88, 0.95, 0.98,
            0.96, 0.98, 1.00, 0.99, 0.95, 0.86, 0.72, 0.60, 0.52, 0.46, 0.41, 0.36)
_MONDAY = (0.17, 0.15, 0.14, 0.14, 0.15, 0.21, 0.40, 0.70, 0.92, 1.00, 1.00, 0.99,
           0.96, 0.98, 1.00, 0.99, 0.95, 0.86, 0.72, 0.60, 0.52, 0.46, 0.41, 0.36)
_FRIDAY = (0.32, 0.27, 0.23, 0.21, 0.21, 0.25, 0.35, 0.52, 0.71, 0.85, 0.92, 0.95,
           0.93, 0.93, 0.92, 0.88, 0.80, 0.68, 0.55, 0.45, 0.38, 0.33, 0.29, 0.25)
_SATURDAY = (0.22, 0.19, 0.17, 0.15, 0.14, 0.14, 0.16, 0.20, 0.26, 0.32, 0.38, 0.42,
             0.44, 0.45, 0.45, 0.44, 0.42, 0.40, 0.37, 0.34, 0.31, 0.28, 0.25, 0.22)
_SUNDAY = (0.20, 0.18, 0.16, 0.14, 0.13, 0.13, 0.15, 0.18, 0.23, 0.29, 0.34, 0.38,
           0.40, 0.41, 0.41, 0.40, 0.38, 0.36, 0.33, 0.30, 0.27, 0.24, 0.21, 0.19)
WEEKLY_PROFILE = (_MONDAY, _TUE_THU, _TUE_THU, _TUE_THU, _FRIDAY, _SATURDAY, _SUNDAY)

DAY_NOISE_SIGMA = 0.03
FIVE_MINUTE_NOISE_SIGMA = 0.02


def _nth_weekday(year: int, month: int, weekday: int, n: int) -> date:
    """The n-th `weekday` (Monday 0) of a month; n = -1 for the last one."""
    if n > 0:
        first = date(year, month, 1)
        return first + timedelta(days=(weekday - first.weekday()) % 7 + 7 * (n - 1))
    last = (date(year + (month == 12), month % 12 + 1, 1)) - timedelta(days=1)
    return last - timedelta(days=(last.weekday() - weekday) % 7)


def us_holidays(year: int) -> dict[date, tuple[str, float]]:
    """US holidays of a year -> (name, traffic factor). Dates as they fall, not 'observed' days."""
    thanksgiving = _nth_weekday(year, 11, 3, 4)
    days = {
        date(year, 1, 1): ("New Year's Day", 0.50),
        _nth_weekday(year, 1, 0, 3): ("Martin Luther King Jr. Day", 0.80),
        _nth_weekday(year, 2, 0, 3): ("Presidents' Day", 0.80),
        _nth_weekday(year, 5, 0, -1): ("Memorial Day", 0.60),
        date(year, 6, 19): ("Juneteenth", 0.85),
        date(year, 7, 4): ("Independence Day", 0.50),
        _nth_weekday(year, 9, 0, 1): ("Labor Day", 0.60),
        thanksgiving: ("Thanksgiving", 0.45),
        thanksgiving + timedelta(days=1): ("Day after Thanksgiving", 0.70),
        date(year, 12, 24): ("Christmas Eve", 0.65),
        date(year, 12, 25): ("Christmas Day", 0.40),
        date(year, 12, 31): ("New Year's Eve", 0.70),
    }
    return days


def _eastern_offsets(ts: "np.ndarray") -> "np.ndarray":
    """UTC offset in seconds of US Eastern time at each UNIX time (DST: 2nd Sunday of March 07:00Z
    to 1st Sunday of November 06:00Z)."""
    import numpy as np

    from datetime import datetime, timezone

    offsets = np.full(ts.shape, -5 * 3600, dtype=np.int64)
    if not ts.size:
        return offsets
    first_year = datetime.fromtimestamp(int(ts.min()), tz=timezone.utc).year
    last_year = datetime.fromtimestamp(int(ts.max()), tz=timezone.utc).year
    for year in range(first_year, last_year + 1):
        begin = datetime.combine(_nth_weekday(year, 3, 6, 2), datetime.min.time(), timezone.utc).timestamp() + 7 * 3600
        end = datetime.combine(_nth_weekday(year, 11, 6, 1), datetime.min.time(), timezone.utc).timestamp() + 6 * 3600
        offsets[(ts >= begin) & (ts < end)] = -4 * 3600
    return offsets


def traffic_shape(timestamps: "np.ndarray") -> "np.ndarray":
    """Share of peak traffic (0..1) over each step (at its midpoint), before noise: weekly profile x holidays."""
    import numpy as np

    mid = timestamps - STEP / 2
    local = mid + _eastern_offsets(mid.astype(np.int64))
    local_hours = local / 3600.0
    first_hour = int(math.floor(local_hours.min())) - 1
    last_hour = int(math.ceil(local_hours.max())) + 1
    hours = np.arange(first_hour, last_hour + 1, dtype=np.int64)
    days = hours // 24
    weekdays = (days + 3) % 7  # 1970-01-01 was a Thursday; Monday = 0
    profile = np.asarray(WEEKLY_PROFILE, dtype=np.float64)
    knots = profile[weekdays, hours % 24]
    epoch = date(1970, 1, 1)
    factors = np.ones(days.shape)
    for day in np.unique(days):
        d = epoch + timedelta(days=int(day))
        holiday = us_holidays(d.year).get(d)
        if holiday:
            factors[days == day] = holiday[1]
    return np.interp(local_hours, hours.astype(np.float64), knots * factors)
