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
- Probes: schema.PROBES_PER_STEP synthetic probes a step to every backend, whatever its share (a
  backend failed over from still gets them), from a stream of their own: each meets the step's
  error shares as a request does (a 503 storm, an auth fault, timeouts fail it) and one answered
  slower than schema.PROBE_TIMEOUT_SECONDS (the latency, its tail included) is a timeout.
- A quality regression (`quality-regression`) fails nothing: prompt tokens per request shift by a
  constant (a tokenizer that stops prepending the beginning-of-text token: -1), and a share of the
  answers change, holding fewer suggestions and possibly fewer completion tokens.

Incidents change only the steps whose end falls in (start, start + duration], and only what
they claim: those steps are drawn again from a separate random stream, so every other step is
identical to the run without the incident.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Mapping, Sequence

from opsctl.errors import UsageError
from opsctl.metrics import schema

if TYPE_CHECKING:  # numpy is imported inside the functions that use it (start-up stays light)
    import numpy as np

STEP = schema.STEP_SECONDS
DEFAULT_PEAK_RPS = 500.0
DEFAULT_SEED = 0
DEFAULT_BACKENDS: dict[str, str] = {"databricks": "vendor", "internal": "internal"}

# ---------------------------------------------------------------------------------------------
# The simulator's parts, each in a module named for what it holds, re-exported here so that the
# old import paths (`from opsctl.metrics.simulator import ...`) keep working.

from opsctl.metrics.sim_calendar import (  # noqa: E402,F401
    DAY_NOISE_SIGMA, FIVE_MINUTE_NOISE_SIGMA, WEEKLY_PROFILE, _eastern_offsets, _FRIDAY, _MONDAY, _nth_weekday,
    _SATURDAY, _SUNDAY, _TUE_THU, traffic_shape, us_holidays,
)
from opsctl.metrics.sim_draw import (  # noqa: E402,F401
    COMPLETION_TOKENS_MEAN, COMPLETION_TOKENS_SD, DRAW_CHUNK_STEPS, LAT_SUM_QUANTUM, MU_QUANTUM, PROFILES,
    PROMPT_TOKENS_MEAN, PROMPT_TOKENS_SD, REJECTED_MEDIAN_SECONDS, REJECTED_SIGMA, SUGGESTIONS_PER_ANSWER,
    TIMEOUT_SECONDS, BackendProfile, _draw, _draw_chunked, _lognormal_buckets, _lognormal_buckets_exact, _rng,
    _stream_id, _survival, draw_probes, probe_shares,
)
from opsctl.metrics.sim_incidents import (  # noqa: E402,F401
    _SPEC, INCIDENT_KINDS, INCIDENT_SPEC_HELP, MAX_INCIDENT_SECONDS, AuthThrottling, GpuCapacityLoss, Incident,
    LatencySpike, QualityRegression, Vendor5xx, _StepParams, parse_incident,
)
from opsctl.metrics.sim_openmetrics import _FAMILIES, _FAMILY_SAMPLES, _columns, _labels, export_openmetrics  # noqa: E402,F401
from opsctl.metrics.sim_series import Progress, SimSeries  # noqa: E402,F401
from opsctl.metrics.sim_split import DEFAULT_SPLIT_BY_KIND, check_split, default_split, parse_split  # noqa: E402,F401
from opsctl.metrics.sim_store import write_to_store  # noqa: E402,F401


# ---------------------------------------------------------------------------------------------
# Simulation


def step_grid(start: float, end: float) -> "np.ndarray":
    """Step ends on the 10-second grid in (start, end]."""
    import numpy as np

    first = (int(math.floor(start)) // STEP + 1) * STEP
    last = int(math.floor(end)) // STEP * STEP
    return np.arange(first, last + 1, STEP, dtype=np.int64)



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

        probed, probe_mu = base, mu  # the probes meet the step's faults as its requests do
        mine = [i for i in incidents if i.backend == name]
        if mine and any(i.window(timestamps).any() for i in mine):
            hit = base.copy()
            touched = np.zeros(n, dtype=bool)
            for incident in mine:
                window = incident.window(timestamps)
                incident.apply(hit, window)
                touched |= window
            sub = hit.take(touched)
            redrawn = _draw_chunked(_rng(seed, 2, _stream_id(name)), lam[touched], sub,
                                    mu[touched] + sub.log_shift, profile.sigma, rejected,
                                    _rng(seed, 4, _stream_id(name)))
            for column, values in redrawn.items():
                columns[column] = columns[column].copy()
                columns[column][touched] = values
            probed, probe_mu = hit, mu + hit.log_shift
        columns.update(draw_probes(_rng(seed, 5, _stream_id(name)), probed, probe_mu, profile.sigma))
        result[name] = SimSeries(name, timestamps.copy(), {c: columns[c] for c in schema.VALUE_COLUMNS})
        if progress:
            progress(f"simulated {name}: {n:,} steps, {result[name].requests():,} requests")
    return result
