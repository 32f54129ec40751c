"""A latency judge on two backends' histograms: an effect size within a margin, not a bare p-value.

At a billion requests any test of "same distribution" (Kayenta's Mann-Whitney) rejects trivial
differences, so the judge decides on an effect that matters: the difference in the share of
requests slower than `threshold` (a histogram bucket bound, e.g. 500 ms), d = share_B - share_A.
Variance model: each request independently slow or not (binomial), se = sqrt(pA(1-pA)/nA +
pB(1-pB)/nB); the one-sided level is alpha.

  equivalent  TOST shows |d| < margin                                   -> continue
  worse       B is slower beyond doubt (d / se > z_{1-alpha}) and by at least the margin -> abort
  better      the same, the other way                                   -> continue
  inconclusive otherwise (too few requests to tell)                      -> pause

On two identical backends `worse` needs a one-sided rejection at alpha, so its rate is at most
alpha (far less once the effect must also reach the margin); bench/rollout_judge.py measures it.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from opsctl.errors import NoDataError, UsageError
from opsctl.model import Model
from opsctl.quality.equivalence import normal_quantile, tost


class LatencyVerdict(Model):
    verdict: str  # equivalent | worse | better | inconclusive
    outcome: str  # continue | abort | pause
    threshold: float
    margin: float
    share_a: float
    share_b: float
    difference: float
    standard_error: float
    n_a: int
    n_b: int

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("verdict", "outcome", "threshold", "margin", "share_a", "share_b",
                                                "difference", "standard_error", "n_a", "n_b")}


def share_over(buckets: Mapping[float, float], threshold: float) -> tuple[float, int]:
    """(share of observations above `threshold`, total) from cumulative buckets {le: count}."""
    if math.inf not in buckets:
        raise UsageError("a histogram needs its +Inf bucket (the total)")
    if threshold not in buckets:
        bounds = ", ".join(f"{b:g}" for b in sorted(buckets) if b != math.inf)
        raise UsageError(f"threshold {threshold:g}s is not a bucket bound (bounds: {bounds})")
    total = buckets[math.inf]
    if total <= 0:
        raise NoDataError("a histogram with no observations")
    return (total - buckets[threshold]) / total, int(round(total))


def judge(a: Mapping[float, float], b: Mapping[float, float], *, threshold: float = 0.5, margin: float = 0.01,
          alpha: float = 0.05) -> LatencyVerdict:
    """Compare B (the new backend) against A (the baseline) on the share over `threshold`."""
    if not 0 < margin < 1:
        raise UsageError(f"margin must be between 0 and 1 (a difference of shares), got {margin}")
    p_a, n_a = share_over(a, threshold)
    p_b, n_b = share_over(b, threshold)
    d = p_b - p_a
    se = math.sqrt(p_a * (1 - p_a) / n_a + p_b * (1 - p_b) / n_b)
    _, _, _, _, _, equivalent = tost(d, se, -margin, margin, alpha)
    z = normal_quantile(1 - alpha)
    significant = (abs(d) / se > z) if se > 0 else d != 0
    if equivalent:
        verdict, outcome = "equivalent", "continue"
    elif significant and d >= margin:
        verdict, outcome = "worse", "abort"
    elif significant and d <= -margin:
        verdict, outcome = "better", "continue"
    else:
        verdict, outcome = "inconclusive", "pause"
    return LatencyVerdict(verdict, outcome, threshold, margin, p_a, p_b, d, se, n_a, n_b)


def histogram_queries(backend: str, window_seconds: int, bounds: Sequence[float], extra_matchers: str = "") -> list[str]:
    """PromQL for one backend's cumulative buckets over the window (the proxy's duration histogram).
    `extra_matchers`: the service matcher (Config.service_matcher), so two services never sum."""
    from opsctl.metrics import schema
    from opsctl.quality.shadow import _promql_regex, le_forms

    sel = f'backend="{backend}"' + (f",{extra_matchers}" if extra_matchers else "")
    out = []
    for bound in list(bounds) + [math.inf]:
        forms = _promql_regex(le_forms(bound))
        out.append(f'sum(increase({schema.DURATION_BUCKET}{{{sel},le=~"{forms}"}}[{int(window_seconds)}s]))')
    return out


def read_histogram(source, backend: str, window_seconds: int, at: float, extra_matchers: str = "") -> dict[float, float]:
    """A backend's cumulative buckets {le: count} over the window ending at `at`, from a MetricSource
    (Prometheus or the embedded store)."""
    from opsctl.metrics import schema

    bounds = list(schema.BUCKETS)
    values = source.query_many(histogram_queries(backend, window_seconds, bounds, extra_matchers), at)
    if any(v is None or math.isnan(v) for v in values):
        raise NoDataError(f"latency judge: no histogram for backend {backend} over {window_seconds}s")
    return dict(zip(bounds + [math.inf], values))
