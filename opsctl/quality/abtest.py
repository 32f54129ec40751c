"""A/B equivalence from counters: sample size, days at today's traffic, and a fixed-horizon verdict.

Variance model: binomial for a ratio of counts (successes / trials, e.g. suggestions accepted /
suggestions shown), each trial independent, so Var(p_hat) = p (1 - p) / n per arm. (Trials that
cluster by user make this optimistic: give a per-user variance and use equivalence.means instead.)

Sample size for TOST (two one-sided tests at level alpha, margin ±m) under the normal
approximation, assuming the true difference is `delta` (0 by default), equal arms of n:
    power(n) = Phi((m - delta) / se - z_{1-alpha}) + Phi((m + delta) / se - z_{1-alpha}) - 1,
    se = sqrt((pA (1 - pA) + pB (1 - pB)) / n)
and n is the smallest integer with power(n) >= the target (found by doubling then bisection on
this exact expression; with delta = 0 the closed form is n = (z_{1-alpha} + z_{1-beta/2})^2 *
2 p (1 - p) / m^2). Fixed horizon, no peeking: `verdict` refuses to judge (inconclusive) until
both arms hold the planned n, and is meant to be read once, at the horizon.
"""

from __future__ import annotations

import math

from opsctl.errors import UsageError
from opsctl.model import Model
from opsctl.quality.equivalence import normal_cdf, normal_quantile, tost

MAX_N = 10**12


def tost_power(n: int, p_a: float, p_b: float, margin: float, alpha: float) -> float:
    """Power of the TOST for two proportions with n trials per arm (normal approximation)."""
    if n <= 0:
        return 0.0
    se = math.sqrt((p_a * (1 - p_a) + p_b * (1 - p_b)) / n)
    if se == 0:
        return 1.0 if abs(p_b - p_a) < margin else 0.0
    z = normal_quantile(1 - alpha)
    delta = p_b - p_a
    return max(0.0, normal_cdf((margin - delta) / se - z) + normal_cdf((margin + delta) / se - z) - 1)


class SampleSize(Model):
    per_arm: int  # trials needed in each arm
    baseline: float
    margin: float
    alpha: float
    power: float
    delta: float  # the true difference assumed
    variance: str  # the variance model, said in words
    days: float | None = None  # at today's traffic and the experiment share
    daily_trials: int | None = None
    share: float | None = None  # fraction of trials in the smaller arm

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("per_arm", "days", "baseline", "margin", "alpha", "power",
                                                "delta", "daily_trials", "share", "variance")}


def sample_size(baseline: float, margin: float, *, alpha: float = 0.05, power: float = 0.8, delta: float = 0.0,
                daily_trials: int | None = None, share: float | None = None) -> SampleSize:
    """Trials per arm for TOST at ±margin on a proportion near `baseline`, and the days that takes
    when `daily_trials` trials a day are split `share` : 1 - share (the smaller arm limits)."""
    if not 0 < baseline < 1:
        raise UsageError(f"baseline must be a proportion between 0 and 1, got {baseline}")
    if not 0 < margin < 1:
        raise UsageError(f"margin must be between 0 and 1, got {margin}")
    if not 0 < alpha < 0.5 or not 0 < power < 1:
        raise UsageError("alpha must be in (0, 0.5) and power in (0, 1)")
    if abs(delta) >= margin:
        raise UsageError(f"an assumed difference of {delta} is not inside the margin ±{margin}: no n suffices")
    p_b = min(max(baseline + delta, 1e-9), 1 - 1e-9)
    high = 1
    while tost_power(high, baseline, p_b, margin, alpha) < power:
        high *= 2
        if high > MAX_N:
            raise UsageError("the sample size exceeds 10^12 trials per arm: widen the margin")
    low = high // 2
    while high - low > 1:  # power(low) < target <= power(high)
        mid = (low + high) // 2
        if tost_power(mid, baseline, p_b, margin, alpha) >= power:
            high = mid
        else:
            low = mid
    n = high
    days = None
    if daily_trials is not None:
        if share is None or not 0 < share < 1:
            raise UsageError("daily_trials needs the experiment share, between 0 and 1")
        days = n / (daily_trials * min(share, 1 - share))
    return SampleSize(n, baseline, margin, alpha, power, delta,
                      "binomial: Var(p) = p(1 - p)/n per arm, trials independent", days, daily_trials, share)


DAY = 86400
WEEK = 7 * DAY


class DailyTrials(Model):
    """Today's trials a day (both arms), and where the figure comes from."""
    trials: int
    basis: str  # plan | window | weekly profile


def daily_trials(trials: float, window_seconds: int, at: float, *, declared: int | None = None) -> DailyTrials | None:
    """Trials a day at today's traffic, for the days a test takes: the plan's `daily_trials` when it
    declares one; else a window of a whole day or more read as it is (its trials per day, the day's
    own profile inside it); else a shorter window scaled by the weekly profile of traffic (the
    simulator's calendar, US Eastern, DST included): its trials x the mean profile of a week's day
    over the profile inside the window, so a peak hour is not taken for the average one (an hour
    at Tuesday 14:00 holds about 2x the week's mean hour's traffic). Holidays inside the window count
    as they fall, so a holiday hour is scaled up to a normal day. None without trials."""
    if declared is not None:
        return DailyTrials(int(declared), "plan")
    if trials <= 0 or window_seconds <= 0:
        return None
    if window_seconds >= DAY:
        return DailyTrials(int(trials * DAY / window_seconds), "window")
    import numpy as np

    from opsctl.metrics.sim_calendar import STEP, WEEKLY_PROFILE, traffic_shape

    end = STEP * (int(at) // STEP)
    steps = np.arange(end - window_seconds + STEP, end + 1, STEP, dtype=np.int64)
    inside = float(traffic_shape(steps).sum()) * STEP  # share-of-peak seconds in the window
    if inside <= 0:
        return None
    mean_day = DAY * float(np.mean(WEEKLY_PROFILE))  # share-of-peak seconds in the week's mean day
    return DailyTrials(int(trials * mean_day / inside), "weekly profile")


class AbVerdict(Model):
    verdict: str  # equivalent | different | inconclusive
    outcome: str  # Argo's: continue | abort | pause
    difference: float | None
    interval: tuple[float, float] | None
    p_value: float | None
    n_a: int
    n_b: int
    needed: int
    reason: str

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("verdict", "outcome", "difference", "interval", "p_value", "n_a",
                                                "n_b", "needed", "reason")}


def verdict(successes_a: int, trials_a: int, successes_b: int, trials_b: int, *, margin: float, needed: int,
            alpha: float = 0.05) -> AbVerdict:
    """At the fixed horizon: equivalent (TOST passes) -> continue; the (1 - 2 alpha) interval wholly
    outside ±margin -> different -> abort; otherwise inconclusive -> pause. Before both arms hold
    `needed` trials: inconclusive, without looking at the difference (no peeking)."""
    for name, s, n in (("A", successes_a, trials_a), ("B", successes_b, trials_b)):
        if n < 0 or s < 0 or s > n:
            raise UsageError(f"arm {name}: successes ({s}) must be between 0 and trials ({n})")
    needed = max(needed, 1)  # an arm with no trials is never at its horizon
    if min(trials_a, trials_b) < needed:
        return AbVerdict("inconclusive", "pause", None, None, None, trials_a, trials_b, needed,
                         f"horizon not reached: {min(trials_a, trials_b)} of {needed} trials per arm")
    p_a, p_b = successes_a / trials_a, successes_b / trials_b
    se = math.sqrt(p_a * (1 - p_a) / trials_a + p_b * (1 - p_b) / trials_b)
    _, low, high, p_lower, p_upper, equivalent = tost(p_b - p_a, se, -margin, margin, alpha)
    if equivalent:
        kind, outcome, why = "equivalent", "continue", f"the {1 - 2 * alpha:.0%} interval lies inside ±{margin}"
    elif low >= margin or high <= -margin:
        kind, outcome, why = "different", "abort", f"the {1 - 2 * alpha:.0%} interval lies outside ±{margin}"
    else:
        kind, outcome, why = "inconclusive", "pause", f"the {1 - 2 * alpha:.0%} interval crosses the margin ±{margin}"
    return AbVerdict(kind, outcome, p_b - p_a, (low, high), max(p_lower, p_upper), trials_a, trials_b, needed, why)


def read_arms(source, successes: str, trials: str, arms: tuple[str, str], window: str, at: float
              ) -> dict[str, tuple[int, int]]:
    """The arms' (successes, trials) from the proxy's counters: each PromQL with `$arm` and `$window`
    substituted, evaluated at `at` in one `query_many` on a MetricSource (Prometheus or the embedded
    store)."""
    from opsctl.errors import NoDataError

    queries = [text.replace("$arm", arm).replace("$window", window) for arm in arms for text in (successes, trials)]
    values = source.query_many(queries, at)
    out = {}
    for i, arm in enumerate(arms):
        pair = values[2 * i:2 * i + 2]
        for what, value, query in zip(("successes", "trials"), pair, queries[2 * i:2 * i + 2]):
            if value is None or math.isnan(value):
                raise NoDataError(f"A/B arm {arm}: no data for {what} ({query})")
        out[arm] = (int(round(pair[0])), int(round(pair[1])))
    return out
