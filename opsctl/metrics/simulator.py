"""A deterministic simulator of the LLM proxy's client-side metrics, and its writers.

`simulate()` is a pure function: the same arguments and seed give the same 10-second aggregates per
backend, in the embedded store's column layout (schema.VALUE_COLUMNS). Drills reuse it to inject
faults; `write_to_store()` and `export_openmetrics()` are the separate writers.

The model, per backend and step (timestamps are step ends on the 10-second grid):

- Traffic: peak_rps x a weekly profile of hourly knots in US Eastern local time (DST included),
  interpolated linearly: weekday peak mid-afternoon, night trough about a fifth of it, weekends
  under half, a steep Monday-morning ramp from the Sunday-night low, an afternoon fade on Fridays,
  and a dip on US holidays (computed for each year). Day-to-day (3%) and 5-minute (2%) noise on
  top, the expected rate capped at peak_rps; the split gives each backend its share of the total.
- Requests: Poisson counts. Outcomes split independently (Poisson thinning), so each outcome's
  count is itself Poisson: baseline rates ~1e-5 server errors, ~2e-6 timeouts, 2e-4 client errors
  (not counted against availability), a few 429s on the vendor.
- Latency: lognormal per backend kind (internal median 100 ms, vendor 150 ms, both p99 under
  400 ms at peak), rising a little with load. Rejected requests (4xx, 429) answer in ~25 ms;
  timeouts wait TIMEOUT_SECONDS and land only in the +Inf bucket. lat_sum adds each bucket's count
  times the distribution's mean inside that bucket, quantised to 1/1024 s so cumulative exports
  are exact in binary floating point.
- Tokens: prompt tokens for every request sent, completion tokens for answered (ok) ones.
- Suggestions: SUGGESTIONS_PER_ANSWER on average per answered request (Poisson), drawn from a
  random stream of their own, so adding them left every other column as it was.
- A quality regression (`quality-regression`) fails nothing: prompt tokens per request shift by a
  constant (a tokenizer that stops prepending the beginning-of-text token: -1), and a share of the
  answers change, holding fewer suggestions and possibly fewer completion tokens.

Incidents change only the steps whose end falls in (start, start + duration], and only what
they claim: those steps are drawn again from a separate random stream, so every other step is
identical to the run without the incident.
"""

from __future__ import annotations

import math
import os
import re
import zlib
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import IO, TYPE_CHECKING, Callable, ClassVar, Iterable, Mapping, Sequence

from opsctl.errors import UsageError
from opsctl.metrics import schema

if TYPE_CHECKING:  # numpy is imported inside the functions that use it (start-up stays light)
    import numpy as np

    from opsctl.metrics.embedded import EmbeddedStore

STEP = schema.STEP_SECONDS
DEFAULT_PEAK_RPS = 500.0
DEFAULT_SEED = 0
DEFAULT_BACKENDS: dict[str, str] = {"databricks": "vendor", "internal": "internal"}
from opsctl.metrics.sim_split import DEFAULT_SPLIT_BY_KIND  # noqa: E402,F401
TIMEOUT_SECONDS = 30.0
LAT_SUM_QUANTUM = 1.0 / 1024.0
MU_QUANTUM = 1e-4  # log-latency resolution of the bucket probabilities
DRAW_CHUNK_STEPS = 7 * 8640  # steps drawn at once: a week

Progress = Callable[[str], None]


# ---------------------------------------------------------------------------------------------
# The model's constants


@dataclass(frozen=True)
class BackendProfile:
    """Steady-state behaviour of one kind of backend."""

    median_seconds: float  # latency median at zero load
    sigma: float  # lognormal shape
    load_slope: float  # log-median increase at full load (peak traffic)
    client_error: float
    throttled: float
    server_error: float
    timeout: float
    auth_error: float = 0.0  # 401/403 from the backend's auth layer


PROFILES: dict[str, BackendProfile] = {
    "internal": BackendProfile(0.100, 0.42, 0.15, client_error=2e-4, throttled=0.0, server_error=1e-5, timeout=2e-6),
    "vendor": BackendProfile(0.150, 0.38, 0.08, client_error=2e-4, throttled=2e-6, server_error=1.2e-5, timeout=2e-6),
}
REJECTED_MEDIAN_SECONDS, REJECTED_SIGMA = 0.025, 0.5  # 4xx and 429 answers come back fast

PROMPT_TOKENS_MEAN, PROMPT_TOKENS_SD = 450.0, 350.0
COMPLETION_TOKENS_MEAN, COMPLETION_TOKENS_SD = 180.0, 140.0
SUGGESTIONS_PER_ANSWER = 3.0

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


# ---------------------------------------------------------------------------------------------
# Incidents


@dataclass(frozen=True)
class _StepParams:
    """Per-step outcome shares and latency shift of one backend (numpy arrays, mutable contents)."""

    client_error: "np.ndarray"
    throttled: "np.ndarray"
    server_error: "np.ndarray"
    timeout: "np.ndarray"
    log_shift: "np.ndarray"  # added to the log-median latency of answered requests
    prompt_shift: "np.ndarray"  # prompt tokens added to every request (a BOS token dropped: -1)
    changed: "np.ndarray"  # share of answers that differ from the model's usual ones
    suggestions: "np.ndarray"  # suggestions a changed answer holds, relative to an unchanged one
    completion: "np.ndarray"  # completion tokens of a changed answer, relative to an unchanged one
    auth_error: "np.ndarray"  # share of requests the auth layer answers 401/403
    tail_share: "np.ndarray"  # share of answered requests in a slow tail (drills' latency-tail fault)
    tail_shift: "np.ndarray"  # added to the tail's log-median latency, on top of log_shift

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        return tuple(cls.__dataclass_fields__)

    def take(self, index) -> "_StepParams":
        """The parameters of some steps (a slice or mask); a copy when `index` is a mask."""
        return _StepParams(*(getattr(self, f)[index] for f in self.fields()))

    def copy(self) -> "_StepParams":
        return _StepParams(*(getattr(self, f).copy() for f in self.fields()))


@dataclass(frozen=True)
class Incident:
    """A fault on one backend over [start, end): it touches the steps whose end is in (start, end]."""

    kind: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    backend_kinds: ClassVar[tuple[str, ...]] = ("internal", "vendor")
    default_backend_kind: ClassVar[str] = "vendor"

    backend: str
    start: float
    end: float

    def apply(self, params: _StepParams, window: "np.ndarray") -> None:
        raise NotImplementedError

    def options(self) -> dict[str, float]:
        return {}

    def spec(self) -> str:
        from opsctl.clock import format_duration, format_rfc3339

        opts = ",".join([f"backend={self.backend}"] + [f"{k}={v:g}" for k, v in self.options().items()])
        return f"{self.kind}@{format_rfc3339(self.start)}+{format_duration(int(self.end - self.start))}:{opts}"

    def to_dict(self) -> dict:
        from opsctl.clock import format_rfc3339

        return {"kind": self.kind, "backend": self.backend, "start": format_rfc3339(self.start),
                "end": format_rfc3339(self.end), **self.options(), "spec": self.spec()}


@dataclass(frozen=True)
class Vendor5xx(Incident):
    kind: ClassVar[str] = "vendor-5xx"
    summary: ClassVar[str] = "a burst of 5xx answers: `rate` of requests get a server error"
    backend_kinds: ClassVar[tuple[str, ...]] = ("vendor",)
    rate: float = 0.2

    def apply(self, params, window):
        import numpy as np

        params.server_error[window] = np.maximum(params.server_error[window], self.rate)

    def options(self):
        return {"rate": self.rate}


@dataclass(frozen=True)
class LatencySpike(Incident):
    kind: ClassVar[str] = "latency-spike"
    summary: ClassVar[str] = "saturation: the latency of answered requests is multiplied by `factor`"
    factor: float = 3.0

    def apply(self, params, window):
        params.log_shift[window] += math.log(self.factor)

    def options(self):
        return {"factor": self.factor}


@dataclass(frozen=True)
class AuthThrottling(Incident):
    kind: ClassVar[str] = "auth-throttling"
    summary: ClassVar[str] = ("the vendor's auth layer answers 429 to `rate` of requests and 401 to `auth_rate`"
                              " of them (an expired or revoked credential)")
    backend_kinds: ClassVar[tuple[str, ...]] = ("vendor",)
    rate: float = 0.3
    auth_rate: float = 0.0

    def apply(self, params, window):
        import numpy as np

        params.throttled[window] = np.maximum(params.throttled[window], self.rate)
        params.auth_error[window] = np.maximum(params.auth_error[window], self.auth_rate)

    def options(self):
        return {"rate": self.rate, **({"auth_rate": self.auth_rate} if self.auth_rate else {})}


@dataclass(frozen=True)
class GpuCapacityLoss(Incident):
    kind: ClassVar[str] = "gpu-capacity-loss"
    summary: ClassVar[str] = ("lost GPU pods: `rate` of requests fail (4/5 time out, 1/5 get a 503) and "
                              "the rest are `factor` times slower")
    backend_kinds: ClassVar[tuple[str, ...]] = ("internal",)
    default_backend_kind: ClassVar[str] = "internal"
    TIMEOUT_SHARE: ClassVar[float] = 0.8
    rate: float = 0.1
    factor: float = 2.0

    def apply(self, params, window):
        import numpy as np

        params.timeout[window] = np.maximum(params.timeout[window], self.rate * self.TIMEOUT_SHARE)
        params.server_error[window] = np.maximum(params.server_error[window], self.rate * (1 - self.TIMEOUT_SHARE))
        params.log_shift[window] += math.log(self.factor)

    def options(self):
        return {"rate": self.rate, "factor": self.factor}


@dataclass(frozen=True)
class QualityRegression(Incident):
    """A model release that answers differently while every request succeeds (the vendor's tokenizer
    stops prepending the beginning-of-text token): prompt tokens per request shift by `prompt_shift`,
    `rate` of the answers change, and a changed answer holds `suggestions` times the suggestions and
    `completion` times the completion tokens of an unchanged one."""

    kind: ClassVar[str] = "quality-regression"
    summary: ClassVar[str] = ("answers change, nothing fails: prompt tokens per request shift by `prompt_shift`, "
                              "`rate` of answers change and hold `suggestions` x the suggestions")
    prompt_shift: float = -1.0
    rate: float = 0.3
    suggestions: float = 0.5
    completion: float = 1.0

    def apply(self, params, window):
        params.prompt_shift[window] += self.prompt_shift
        params.changed[window] = self.rate
        params.suggestions[window] = self.suggestions
        params.completion[window] = self.completion

    def options(self):
        return {"prompt_shift": self.prompt_shift, "rate": self.rate, "suggestions": self.suggestions,
                "completion": self.completion}


INCIDENT_KINDS: dict[str, type[Incident]] = {
    cls.kind: cls for cls in (Vendor5xx, LatencySpike, AuthThrottling, GpuCapacityLoss, QualityRegression)
}

INCIDENT_SPEC_HELP = """\
\b
Incident SPEC: KIND@START+DURATION[:key=value,...]
  KIND      vendor-5xx         5xx burst: `rate` of requests fail (default 0.2), vendor backend
            latency-spike      saturation: answered requests `factor` times slower (default 3)
            auth-throttling    429s from the vendor's auth layer on `rate` of requests (default 0.3)
                               and 401s on `auth_rate` of them (default 0)
            gpu-capacity-loss  internal backend: `rate` of requests fail, 4/5 timeouts and
                               1/5 503s (default 0.1), the rest `factor` times slower (default 2)
            quality-regression nothing fails: prompt tokens per request shift by `prompt_shift`
                               (default -1, a dropped BOS token), `rate` of answers change (0.3)
                               and hold `suggestions` x the suggestions (0.5) and `completion`
                               x the completion tokens (1) of an unchanged answer; default: the vendor
  START     RFC 3339 time (2026-11-20T14:00Z) or end-DURATION (before the simulated end)
  DURATION  30s, 5m, 1h30m, 2d; the incident touches the steps ending in (START, START+DURATION]
  backend=  the backend hit (default: the vendor backend; the internal one for gpu-capacity-loss)
"""

MAX_INCIDENT_SECONDS = 400 * 86400
_SPEC = re.compile(r"^(?P<kind>[a-z0-9-]+)@(?P<start>.+?)\+(?P<duration>(?:\d+[smhdw])+)(?::(?P<options>.*))?$")


def parse_incident(spec: str, backends: Mapping[str, str], *, end: float | None = None) -> Incident:
    """Parse an incident SPEC (see INCIDENT_SPEC_HELP). `backends` maps names to kinds; `end` resolves
    `end-DURATION` starts. Every problem is a UsageError naming the SPEC and what is wrong."""
    from opsctl.clock import format_rfc3339, parse_duration, parse_rfc3339

    def fail(problem: str) -> UsageError:
        return UsageError(f"incident {spec!r}: {problem}", hint="form: KIND@START+DURATION[:key=value,...], "
                          "e.g. vendor-5xx@2026-11-20T14:00Z+30m:rate=0.2 (see `opsctl sim generate --help`)")

    match = _SPEC.match(spec.strip())
    if not match:
        raise fail("not of the form KIND@START+DURATION[:key=value,...]")
    cls = INCIDENT_KINDS.get(match["kind"])
    if cls is None:
        raise fail(f"unknown kind {match['kind']!r} (known: {', '.join(INCIDENT_KINDS)})")
    start_text = match["start"]
    try:
        if start_text.startswith("end-"):
            if end is None:
                raise fail("a start relative to the end (end-DURATION) needs a simulated end")
            start = float(end) - parse_duration(start_text[4:])
        else:
            start = parse_rfc3339(start_text, require_zone=True)
    except ValueError as exc:
        raise fail(f"start {start_text!r} is neither an RFC 3339 time nor end-DURATION ({exc})")
    duration = parse_duration(match["duration"])
    if not 0 < duration <= MAX_INCIDENT_SECONDS:
        raise fail("the duration must be positive and at most 400d (the longest simulated range)")
    try:  # a time a date cannot hold (e.g. 0001-01-01T00:00+14:00 is in year 0 UTC)
        format_rfc3339(start), format_rfc3339(start + duration)
    except (OverflowError, OSError, ValueError):
        raise fail(f"start {start_text!r} is out of range (years 1 to 9999 UTC)") from None

    allowed = ["backend"] + [f.name for f in cls.__dataclass_fields__.values() if f.name not in ("backend", "start", "end")]
    options: dict[str, str] = {}
    for item in filter(None, (match["options"] or "").split(",")):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or not value.strip():
            raise fail(f"option {item!r} is not key=value")
        if key not in allowed:
            raise fail(f"unknown option {key!r} for {cls.kind} (allowed: {', '.join(allowed)})")
        if key in options:
            raise fail(f"option {key!r} given twice")
        options[key] = value.strip()

    backend = options.pop("backend", None)
    if backend is None:
        candidates = [n for n, k in backends.items() if k == cls.default_backend_kind]
        if len(candidates) != 1:
            raise fail(f"name the backend with backend=NAME ({len(candidates)} {cls.default_backend_kind} "
                       f"backends configured: {', '.join(candidates) or 'none'})")
        backend = candidates[0]
    if backend not in backends:
        raise fail(f"unknown backend {backend!r} (known: {', '.join(sorted(backends))})")
    if backends[backend] not in cls.backend_kinds:
        raise fail(f"{cls.kind} applies to {' or '.join(cls.backend_kinds)} backends; "
                   f"{backend!r} is {backends[backend]}")

    values: dict[str, float] = {}
    for key, text in options.items():
        try:
            number = float(text)
        except ValueError:
            raise fail(f"{key}={text!r} is not a number")
        if key == "rate" and not 0 < number <= 1:
            raise fail(f"rate={text} must be in (0, 1]: a share of requests")
        if key == "factor" and not 1 <= number <= 100:
            raise fail(f"factor={text} must be between 1 and 100")
        if key == "prompt_shift" and not (-100 <= number <= 100 and number == int(number)):
            raise fail(f"prompt_shift={text} must be a whole number of tokens between -100 and 100")
        if key in ("suggestions", "completion") and not 0 <= number <= 10:
            raise fail(f"{key}={text} must be between 0 and 10: relative to an unchanged answer")
        values[key] = number
    return cls(backend=backend, start=start, end=start + duration, **values)


# ---------------------------------------------------------------------------------------------
# Split: in opsctl.metrics.sim_split (re-exported here, so the old import paths keep working)

from opsctl.metrics.sim_split import check_split, default_split, parse_split  # noqa: E402,F401


# ---------------------------------------------------------------------------------------------
# Simulation


@dataclass
class SimSeries:
    """One backend's simulated steps: step-end timestamps and one array per store column."""

    backend: str
    timestamps: "np.ndarray"  # int64, step ends on the 10-second grid
    columns: dict[str, "np.ndarray"] = field(repr=False)  # schema.VALUE_COLUMNS -> per-step increments

    def __len__(self) -> int:
        return len(self.timestamps)

    def requests(self) -> int:
        return int(sum(self.columns[c].sum() for c in schema.REQUEST_COLUMNS))

    def outcome_totals(self) -> dict[str, int]:
        return {o: int(self.columns[f"req_{o}"].sum()) for o in schema.OUTCOMES}


def step_grid(start: float, end: float) -> "np.ndarray":
    """Step ends on the 10-second grid in (start, end]."""
    import numpy as np

    first = (int(math.floor(start)) // STEP + 1) * STEP
    last = int(math.floor(end)) // STEP * STEP
    return np.arange(first, last + 1, STEP, dtype=np.int64)


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


def _survival(z: "np.ndarray") -> "np.ndarray":
    """P(Z > z) for a standard normal, with relative accuracy ~1e-7 in both tails (Numerical Recipes
    erfc), so the rare slow requests in the tail buckets keep their size."""
    import numpy as np

    x = np.abs(z) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.5 * x)
    poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (
        0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    erfc = t * np.exp(-x * x + poly)
    return np.where(z >= 0, 0.5 * erfc, 1.0 - 0.5 * erfc)


def _lognormal_buckets(mu: "np.ndarray", sigma: float) -> tuple["np.ndarray", "np.ndarray"]:
    """For lognormal(mu, sigma) latencies: the probability of each histogram interval
    (le_0, le_0..le_1, ..., above the last finite bound) and the mean latency inside each interval.
    Both have shape (len(BUCKETS) + 1, len(mu))."""
    import numpy as np

    mu = np.atleast_1d(np.asarray(mu, dtype=np.float64))
    # mu moves with load; on a 1e-4 grid (0.01% of the median) a month holds a few thousand values.
    grid, index = np.unique(np.round(mu / MU_QUANTUM), return_inverse=True)
    if grid.size < mu.size:
        prob, mean_inside = _lognormal_buckets_exact(grid * MU_QUANTUM, sigma)
        return prob[:, index.ravel()], mean_inside[:, index.ravel()]
    return _lognormal_buckets_exact(mu, sigma)


def _lognormal_buckets_exact(mu: "np.ndarray", sigma: float) -> tuple["np.ndarray", "np.ndarray"]:
    import numpy as np

    logs = np.log(np.asarray(schema.BUCKETS))[:, None]
    ones, zeros = np.ones((1, mu.size)), np.zeros((1, mu.size))
    surv = np.vstack([ones, _survival((logs - mu) / sigma), zeros])
    # E[L; L > b] = exp(mu + sigma^2/2) * P(Z > (ln b - mu)/sigma - sigma)
    surv_shifted = np.vstack([ones, _survival((logs - mu) / sigma - sigma), zeros])
    prob = np.clip(surv[:-1] - surv[1:], 0.0, None)
    partial = np.clip(surv_shifted[:-1] - surv_shifted[1:], 0.0, None) * np.exp(mu + sigma * sigma / 2)
    mean_inside = np.divide(partial, prob, out=np.zeros_like(prob), where=prob > 1e-300)
    return prob, mean_inside


def _draw(rng: "np.random.Generator", lam: "np.ndarray", params: _StepParams, mu: "np.ndarray",
          sigma: float, rejected: tuple["np.ndarray", "np.ndarray"],
          suggestions_rng: "np.random.Generator") -> dict[str, "np.ndarray"]:
    """Draw the store columns for steps with expected requests `lam` and per-step parameters
    (suggestions from their own stream, so the other columns do not depend on them)."""
    import numpy as np

    bad = params.client_error + params.throttled + params.server_error + params.timeout + params.auth_error
    scale = np.where(bad > 1.0, 1.0 / np.maximum(bad, 1e-300), 1.0)
    p_client, p_throttled = params.client_error * scale, params.throttled * scale
    p_server, p_timeout = params.server_error * scale, params.timeout * scale
    p_auth = params.auth_error * scale
    # 401/403 answers are rejected fast like 4xx and 429: drawn with them, split off below
    p_throttled = p_throttled + p_auth
    p_ok = np.clip(1.0 - (p_client + p_throttled + p_server + p_timeout), 0.0, 1.0)

    served_prob, served_mean = _lognormal_buckets(mu, sigma)
    if np.any(params.tail_share > 0):  # a mixture: `tail_share` of the answers from a slower lognormal
        tail_prob, tail_mean = _lognormal_buckets(mu + params.tail_shift, sigma)
        t = np.clip(params.tail_share, 0.0, 1.0)
        mixed = (1.0 - t) * served_prob + t * tail_prob
        served_mean = np.divide((1.0 - t) * served_prob * served_mean + t * tail_prob * tail_mean, mixed,
                                out=np.zeros_like(mixed), where=mixed > 1e-300)
        served_prob = mixed
    rejected_prob, rejected_mean = rejected
    served = rng.poisson(lam * (p_ok + p_server) * served_prob)
    rejected_counts = rng.poisson(lam * (p_client + p_throttled) * rejected_prob)
    timeouts = rng.poisson(lam * p_timeout)

    served_total = served.sum(axis=0)
    server_share = np.divide(p_server, p_ok + p_server, out=np.zeros_like(p_server), where=(p_ok + p_server) > 0)
    server_errors = rng.binomial(served_total, np.clip(server_share, 0.0, 1.0))
    rejected_total = rejected_counts.sum(axis=0)
    throttle_share = np.divide(p_throttled, p_client + p_throttled, out=np.zeros_like(p_throttled),
                               where=(p_client + p_throttled) > 0)
    throttled = rng.binomial(rejected_total, np.clip(throttle_share, 0.0, 1.0))
    auth_errors = np.zeros_like(throttled)
    if np.any(p_auth > 0):  # drawn only when asked for, so runs without it keep every other draw
        auth_share = np.divide(p_auth, p_throttled, out=np.zeros_like(p_auth), where=p_throttled > 0)
        auth_errors = rng.binomial(throttled, np.clip(auth_share, 0.0, 1.0))
        throttled = throttled - auth_errors

    intervals = served + rejected_counts
    intervals[-1] += timeouts
    cumulative = np.cumsum(intervals, axis=0)
    lat_sum = (served * served_mean).sum(axis=0) + (rejected_counts * rejected_mean).sum(axis=0)
    lat_sum = lat_sum + timeouts * TIMEOUT_SECONDS
    lat_sum = np.round(lat_sum / LAT_SUM_QUANTUM) * LAT_SUM_QUANTUM

    ok = served_total - server_errors
    total = served_total + rejected_total + timeouts
    prompt = (total * (PROMPT_TOKENS_MEAN + params.prompt_shift)
              + np.sqrt(total) * PROMPT_TOKENS_SD * rng.standard_normal(total.size))
    completion_share = 1.0 - params.changed + params.changed * params.completion
    completion = (ok * COMPLETION_TOKENS_MEAN * completion_share
                  + np.sqrt(ok) * COMPLETION_TOKENS_SD * rng.standard_normal(ok.size))
    suggestion_share = 1.0 - params.changed + params.changed * params.suggestions
    suggestions = suggestions_rng.poisson(ok * SUGGESTIONS_PER_ANSWER * suggestion_share)

    columns = {
        "req_ok": ok,
        "req_client_error": rejected_total - throttled - auth_errors,
        "req_auth_error": auth_errors,
        "req_throttled": throttled,
        "req_server_error": server_errors,
        "req_timeout": timeouts,
    }
    for i, name in enumerate(schema.BUCKET_COLUMNS):
        columns[name] = cumulative[i]
    columns["lat_count"] = total
    columns["lat_sum"] = lat_sum
    columns["prompt_tokens"] = np.maximum(np.rint(prompt), 0).astype(np.int64)
    columns["completion_tokens"] = np.maximum(np.rint(completion), 0).astype(np.int64)
    columns["suggestions"] = suggestions.astype(np.int64)
    return columns


def _draw_chunked(rng, lam, params, mu, sigma, rejected, suggestions_rng) -> dict[str, "np.ndarray"]:
    """`_draw` a week of steps at a time, so memory stays bounded on long ranges."""
    import numpy as np

    if lam.size <= DRAW_CHUNK_STEPS:
        return _draw(rng, lam, params, mu, sigma, rejected, suggestions_rng)
    pieces = []
    for first in range(0, lam.size, DRAW_CHUNK_STEPS):
        part = slice(first, first + DRAW_CHUNK_STEPS)
        pieces.append(_draw(rng, lam[part], params.take(part), mu[part], sigma, rejected, suggestions_rng))
    return {column: np.concatenate([p[column] for p in pieces]) for column in pieces[0]}


def _rng(seed: int, *key: int) -> "np.random.Generator":
    import numpy as np

    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy=seed, spawn_key=key)))


def _stream_id(name: str) -> int:
    return zlib.crc32(name.encode())


def simulate(
    start: float,
    end: float,
    *,
    backends: Mapping[str, str] | None = None,
    split: Mapping[str, float] | None = None,
    peak_rps: float = DEFAULT_PEAK_RPS,
    seed: int = DEFAULT_SEED,
    incidents: Sequence[Incident] = (),
    progress: Progress | None = None,
) -> dict[str, SimSeries]:
    """Simulate the steps ending in (start, end] for each backend (name -> kind: internal | vendor).

    `split` maps backends to percentages summing to 100 (default: vendors 80, internal 20).
    Deterministic: the same arguments give the same arrays.
    """
    import numpy as np

    backends = dict(backends or DEFAULT_BACKENDS)
    for name, kind in backends.items():
        if kind not in PROFILES:
            raise UsageError(f"backend {name!r}: unknown kind {kind!r} (known: {', '.join(PROFILES)})")
    shares = check_split(split if split is not None else default_split(backends), backends)
    if not (peak_rps > 0 and math.isfinite(peak_rps)):
        raise UsageError(f"peak requests/s must be a positive number, got {peak_rps!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise UsageError(f"the seed must be a non-negative integer, got {seed!r}")
    timestamps = step_grid(start, end)
    if not timestamps.size:
        raise UsageError("the simulated range holds no 10-second step: end must be after start")
    for incident in incidents:
        if incident.backend not in backends:
            raise UsageError(f"incident {incident.spec()}: unknown backend {incident.backend!r}")
        if incident.end <= timestamps[0] - STEP or incident.start >= timestamps[-1]:
            from opsctl.clock import format_rfc3339

            raise UsageError(
                f"incident {incident.spec()} lies outside the simulated range "
                f"{format_rfc3339(timestamps[0] - STEP)} .. {format_rfc3339(timestamps[-1])}"
            )

    # Traffic is common to all backends: the grammar service splits one stream of requests.
    traffic_rng = _rng(seed, 0)
    load = traffic_shape(timestamps)
    day_index = (timestamps - timestamps[0]) // 86400
    load = load * np.exp(traffic_rng.normal(0.0, DAY_NOISE_SIGMA, int(day_index[-1]) + 1))[day_index]
    knots = np.arange(timestamps[0] - 300, timestamps[-1] + 600, 300, dtype=np.float64)
    noise = np.exp(traffic_rng.normal(0.0, FIVE_MINUTE_NOISE_SIGMA, knots.size))
    load = np.minimum(load * np.interp(timestamps.astype(np.float64), knots, noise), 1.0)  # never above peak
    total_per_step = peak_rps * STEP * load

    rejected = _lognormal_buckets(np.array([math.log(REJECTED_MEDIAN_SECONDS)]), REJECTED_SIGMA)
    result: dict[str, SimSeries] = {}
    for name, kind in backends.items():
        profile = PROFILES[kind]
        lam = total_per_step * shares[name] / 100.0
        n = timestamps.size
        base = _StepParams(*(np.full(n, v) for v in (profile.client_error, profile.throttled, profile.server_error,
                                                      profile.timeout, 0.0, 0.0, 0.0, 1.0, 1.0,
                                                      profile.auth_error, 0.0, 0.0)))
        mu = math.log(profile.median_seconds) + profile.load_slope * load
        columns = _draw_chunked(_rng(seed, 1, _stream_id(name)), lam, base, mu, profile.sigma, rejected,
                                _rng(seed, 3, _stream_id(name)))

        mine = [i for i in incidents if i.backend == name]
        if mine:
            hit = base.copy()
            touched = np.zeros(n, dtype=bool)
            for incident in mine:
                window = (timestamps > incident.start) & (timestamps <= incident.end)
                incident.apply(hit, window)
                touched |= window
            sub = hit.take(touched)
            redrawn = _draw_chunked(_rng(seed, 2, _stream_id(name)), lam[touched], sub,
                                    mu[touched] + sub.log_shift, profile.sigma, rejected,
                                    _rng(seed, 4, _stream_id(name)))
            for column, values in redrawn.items():
                columns[column] = columns[column].copy()
                columns[column][touched] = values
        result[name] = SimSeries(name, timestamps.copy(), {c: columns[c] for c in schema.VALUE_COLUMNS})
        if progress:
            progress(f"simulated {name}: {n:,} steps, {result[name].requests():,} requests")
    return result


# ---------------------------------------------------------------------------------------------
# Writers


def write_to_store(store: "EmbeddedStore", series: Mapping[str, SimSeries], *, mode: str = "replace",
                   progress: Progress | None = None) -> int:
    """Write simulated steps. 'replace' first removes each backend's steps in the simulated range
    (so nothing older survives inside it); 'add' adds the counts to what the store holds."""
    if mode not in ("replace", "add"):
        raise UsageError(f"unknown write mode {mode!r} (known: replace, add)")
    written = 0
    for name, s in series.items():
        if not len(s):
            continue
        timestamps = s.timestamps.tolist()
        if mode == "replace":
            store.delete_range(timestamps[0], timestamps[-1], [name])
        values = {c: s.columns[c].tolist() for c in schema.VALUE_COLUMNS}
        written += store.write_steps(name, timestamps, values, mode="add")
        if progress:
            progress(f"wrote {name}: {len(s):,} steps")
    return written


def _columns(metric: str) -> dict[tuple[tuple[str, str], ...], str]:
    """The store columns of one of the exported metrics (each of _FAMILY_SAMPLES has some)."""
    columns = schema.series_columns(metric)
    assert columns is not None, metric
    return columns


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    def escape(v: str) -> str:
        return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    body = ",".join(f'{k}="{escape(v)}"' for k, v in pairs)
    return "{" + body + "}" if body else ""


_FAMILIES = (
    # family name, type, help, sample name, column per own labels
    (schema.REQUESTS.removesuffix("_total"), "counter", "Requests the LLM proxy sent, by backend and outcome."),
    (schema.DURATION, "histogram", "Client-side latency of every request, in seconds."),
    (schema.PROMPT_TOKENS.removesuffix("_total"), "counter", "Prompt tokens sent."),
    (schema.COMPLETION_TOKENS.removesuffix("_total"), "counter", "Completion tokens received."),
    (schema.SUGGESTIONS.removesuffix("_total"), "counter", "Suggestions parsed from answered requests."),
)
_FAMILY_SAMPLES = {
    schema.REQUESTS.removesuffix("_total"): (schema.REQUESTS,),
    schema.DURATION: (schema.DURATION_BUCKET, schema.DURATION_COUNT, schema.DURATION_SUM),
    schema.PROMPT_TOKENS.removesuffix("_total"): (schema.PROMPT_TOKENS,),
    schema.COMPLETION_TOKENS.removesuffix("_total"): (schema.COMPLETION_TOKENS,),
    schema.SUGGESTIONS.removesuffix("_total"): (schema.SUGGESTIONS,),
}


def export_openmetrics(series: Mapping[str, SimSeries], out: "str | IO[str]",
                       progress: "Callable[[int, int, int], None] | None" = None,
                       labels: Mapping[str, str] | None = None) -> int:
    """Write the series as OpenMetrics text for `promtool tsdb create-blocks-from openmetrics`.

    Counters are cumulative, timestamps in seconds; each series starts with an explicit 0 one step
    before its first step, so `increase()` counts the first step without extrapolating. Returns
    the number of samples written. `progress(samples written, samples in all, bytes written)` is
    called after each series (a month at production rates is hundreds of MB). `labels` (the
    service's, Config.service_labels) go on every series, as the proxy's own metrics carry them.
    """
    import numpy as np

    if isinstance(out, (str, os.PathLike)):
        from pathlib import Path

        from opsctl.statefile import atomic_file

        with atomic_file(Path(out), mode=0o666) as handle:  # the umask applies, as for open()
            return export_openmetrics(series, handle, progress, labels)

    total = sum((len(s) + 1) * len(_columns(metric))
                for family, _, _ in _FAMILIES for metric in _FAMILY_SAMPLES[family] for s in series.values() if len(s))
    constant = tuple((labels or {}).items())
    written = 0  # the text is ASCII: characters are bytes
    samples = 0
    for family, kind, help_text in _FAMILIES:
        header = f"# TYPE {family} {kind}\n# HELP {family} {help_text}\n"
        out.write(header)
        written += len(header)
        for metric in _FAMILY_SAMPLES[family]:
            for name, s in series.items():
                if not len(s):
                    continue
                times = [str(int(t)) for t in np.concatenate(([s.timestamps[0] - STEP], s.timestamps)).tolist()]
                for own_labels, column in _columns(metric).items():
                    text_labels = _labels(constant + (("backend", name),) + own_labels)
                    cumulative = np.concatenate(([0], np.cumsum(s.columns[column])))
                    values = cumulative.tolist()
                    if column == "lat_sum":
                        text = [repr(float(v)) for v in values]
                    else:
                        text = [str(int(v)) for v in values]
                    prefix = f"{metric}{text_labels} "
                    chunk = "".join(f"{prefix}{v} {t}\n" for v, t in zip(text, times))
                    out.write(chunk)
                    written += len(chunk)
                    samples += len(values)
                    if progress:
                        progress(samples, total, written)
    out.write("# EOF\n")
    if progress:
        progress(samples, total, written + len("# EOF\n"))
    return samples
