"""Shadow readiness: is a backend on shadow (mirrored) traffic ready to take real traffic?

Over one window, from the proxy's client-side metrics, the shadow backend is compared with the
primary (by default every other backend together):

  - enough shadow requests for the comparison to mean something (`min_requests`);
  - error rate (throttled, 5xx, timeouts over all but client errors, as the availability SLO counts)
    at most the primary's plus `max_error_rate_increase`;
  - each latency percentile, interpolated from the histogram buckets like histogram_quantile,
    at most `max_latency_ratio` times the primary's;
  - load: the shadow's mean request rate over the window at least `min_load_ratio` times `--share`
    of the real backends' mean request rate over the same window (like with like: on a rising
    morning the window's average is below the last minutes' rate for the mirror and its source
    alike, so a mirror carrying exactly its share passes), so "fast and clean" was shown at the load
    it is about to get. The current rate (over `rate_window`) is reported beside it, not judged.

Any failed check makes the verdict `not ready`; otherwise a figure without data makes it
`unknown`, never ready.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Sequence

from opsctl.metrics import schema
from opsctl.quality.histogram import histogram_quantile


def _promql_regex(values: Sequence[str]) -> str:
    """A fully anchored alternation, escaped for a PromQL double-quoted string."""
    return "|".join(re.escape(v).replace("\\", "\\\\") for v in values)


def le_forms(bound: float) -> list[str]:
    """Label values a bucket bound may carry: `1.0` (OpenMetrics) or `1` (older clients)."""
    if bound == float("inf"):
        return ["+Inf"]
    return sorted({repr(float(bound)), format(bound, "g")})


def backend_matcher(backends: Sequence[str], scope: str = "") -> str:
    """The backends' matcher, after the service matcher `scope` (Config.service_matcher) when given."""
    if len(backends) == 1:
        own = f'backend="{backends[0]}"'
    else:
        own = f'backend=~"{_promql_regex(backends)}"'
    return f"{scope},{own}" if scope else own


def percentile_label(q: float) -> str:
    return f"p{q * 100:g}"


@dataclass(frozen=True)
class TrafficFigures:
    name: str
    requests: float | None  # every request, any outcome
    bad: float | None  # throttled, server_error, timeout
    client_errors: float | None
    rate: float | None  # requests per second over the window
    error_rate: float | None
    latency: dict[str, float | None]


@dataclass(frozen=True)
class ShadowCheck:
    name: str
    ok: bool | None  # None: no data to decide
    shadow: float | None
    primary: float | None
    limit: float | None
    detail: str


@dataclass
class ShadowReport:
    shadow: str
    primary: str
    at: float
    window_seconds: int
    rate_window_seconds: int
    share: float
    current_rate: float | None  # the real backends' rate over rate_window (reported, not judged)
    required_rate: float | None  # share x source_rate
    figures: dict[str, TrafficFigures]
    checks: list[ShadowCheck] = field(default_factory=list)
    source_rate: float | None = None  # the real backends' mean rate over the same window as the shadow's

    @property
    def verdict(self) -> str:
        if any(c.ok is False for c in self.checks):
            return "not ready"
        return "unknown" if any(c.ok is None for c in self.checks) else "ready"

    @property
    def reasons(self) -> list[str]:
        return [c.detail for c in self.checks if not c.ok]

    def to_dict(self) -> dict:
        from opsctl.clock import format_rfc3339

        return {
            "shadow": self.shadow,
            "primary": self.primary,
            "at": format_rfc3339(self.at),
            "window_seconds": self.window_seconds,
            "rate_window_seconds": self.rate_window_seconds,
            "share": self.share,
            "current_rate": self.current_rate,
            "required_rate": self.required_rate,
            "source_rate": self.source_rate,
            "figures": {k: asdict(v) for k, v in self.figures.items()},
            "checks": [asdict(c) for c in self.checks],
            "verdict": self.verdict,
            "reasons": self.reasons,
        }


def _queries(backends: Sequence[str], window: int, scope: str = "") -> list[str]:
    sel = backend_matcher(backends, scope)
    bad = _promql_regex(schema.BAD_OUTCOMES)
    exprs = [
        f"sum(increase({schema.REQUESTS}{{{sel}}}[{window}s]))",
        f'sum(increase({schema.REQUESTS}{{{sel},outcome=~"{bad}"}}[{window}s]))',
        f'sum(increase({schema.REQUESTS}{{{sel},outcome="client_error"}}[{window}s]))',
    ]
    for bound in schema.BUCKETS + (float("inf"),):
        exprs.append(f'sum(increase({schema.DURATION_BUCKET}{{{sel},le=~"{_promql_regex(le_forms(bound))}"}}[{window}s]))')
    return exprs


def _figures(name: str, values: Sequence[float | None], window: int, percentiles: Sequence[float]) -> TrafficFigures:
    requests, bad, client = values[0], values[1], values[2]
    buckets = values[3:]
    valid: float | None = None
    if requests is not None:
        bad = bad or 0.0  # no series for an outcome: none of them happened
        client = client or 0.0
        valid = requests - client
    error_rate = bad / valid if valid and bad is not None else None
    latency: dict[str, float | None] = {}
    bounds = schema.BUCKETS + (float("inf"),)
    counts = [b for b in buckets if b is not None]
    for q in percentiles:
        if len(counts) < len(buckets):
            latency[percentile_label(q)] = None
        else:
            latency[percentile_label(q)] = histogram_quantile(q, list(zip(bounds, counts)))
    return TrafficFigures(name, requests, bad, client, None if requests is None else requests / window,
                          error_rate, latency)


def shadow_report(source, *, shadow: str, primary: Sequence[str], real: Sequence[str], at: float, settings,
                  window_seconds: int | None = None, share: float = 1.0, scope: str = "") -> ShadowReport:
    """`primary`: the backends the shadow is compared with; `real`: those carrying real traffic now;
    `scope`: the service matcher every query carries (Config.service_matcher)."""
    window = window_seconds or settings.window_seconds
    rate_window = settings.rate_window_seconds
    exprs = _queries([shadow], window, scope) + _queries(primary, window, scope)
    per = len(exprs) // 2
    real_sel = backend_matcher(real, scope)
    exprs.append(f"sum(rate({schema.REQUESTS}{{{real_sel}}}[{rate_window}s]))")
    exprs.append(f"sum(increase({schema.REQUESTS}{{{real_sel}}}[{window}s]))")
    values = source.query_many(exprs, at)
    primary_name = "+".join(primary)
    shadow_fig = _figures(shadow, values[:per], window, settings.percentiles)
    primary_fig = _figures(primary_name, values[per:2 * per], window, settings.percentiles)
    current, real_requests = values[-2], values[-1]
    source_rate = None if real_requests is None else real_requests / window
    required = None if source_rate is None else source_rate * share
    report = ShadowReport(shadow, primary_name, at, window, rate_window, share, current, required,
                          {"shadow": shadow_fig, "primary": primary_fig}, source_rate=source_rate)
    report.checks = _checks(shadow_fig, primary_fig, required, settings, share=share, source_rate=source_rate)
    return report


def _checks(s: TrafficFigures, p: TrafficFigures, required: float | None, settings, *, share: float = 1.0,
            source_rate: float | None = None) -> list[ShadowCheck]:
    checks: list[ShadowCheck] = []
    if s.requests is None or p.requests is None:
        missing = [f.name for f in (s, p) if f.requests is None]
        return [ShadowCheck("data", None, s.requests, p.requests, None,
                            f"no client-side metrics for {', '.join(missing)} in the window")]

    checks.append(ShadowCheck(
        "requests", s.requests >= settings.min_requests, s.requests, p.requests, settings.min_requests,
        f"{s.name} served {s.requests:.0f} shadow requests in the window (need at least {settings.min_requests})"))

    if s.error_rate is None or p.error_rate is None:
        checks.append(ShadowCheck("error rate", None, s.error_rate, p.error_rate, None,
                                  "no requests to compute an error rate from"))
    else:
        limit = p.error_rate + settings.max_error_rate_increase
        checks.append(ShadowCheck(
            "error rate", s.error_rate <= limit, s.error_rate, p.error_rate, limit,
            f"error rate {s.error_rate:.4%} vs primary {p.error_rate:.4%} (at most {limit:.4%})"))

    for label in s.latency:
        sv, pv = s.latency[label], p.latency[label]
        if sv is None or pv is None:
            checks.append(ShadowCheck(f"latency {label}", None, sv, pv, None, f"no latency observations for {label}"))
            continue
        limit = pv * settings.max_latency_ratio
        checks.append(ShadowCheck(
            f"latency {label}", sv <= limit, sv, pv, limit,
            f"latency {label} {sv * 1000:.0f} ms vs primary {pv * 1000:.0f} ms "
            f"(at most {settings.max_latency_ratio:g}x = {limit * 1000:.0f} ms)"))

    if required is None or source_rate is None or s.rate is None:
        checks.append(ShadowCheck("load", None, s.rate, None, None, "no real traffic rate over the window"))
    else:
        limit = required * settings.min_load_ratio
        checks.append(ShadowCheck(
            "load", s.rate >= limit, s.rate, p.rate, limit,
            f"{s.name} carried {s.rate:.1f} req/s on average; {share * 100:g}% of the real traffic's "
            f"{source_rate:.1f} req/s over the same window is {required:.1f} req/s "
            f"(needs at least {settings.min_load_ratio:g}x = {limit:.1f} req/s)"))
    return checks
