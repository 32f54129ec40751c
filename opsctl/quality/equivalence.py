"""Two one-sided tests (TOST): can we show a business metric did NOT change beyond a margin?

A migration asks "is arm B (the new backend) within ±margin of arm A (the current one)", not
"did it improve". TOST rejects both "B - A <= -margin" and "B - A >= +margin" at level alpha; that
is the same as the (1 - 2 alpha) confidence interval of B - A lying inside (-margin, +margin).

Normal approximation with unpooled (Welch) standard errors; the normal quantile comes from the
standard library (statistics.NormalDist), so no scipy. Pure functions: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from statistics import NormalDist

from opsctl.errors import UsageError

_STANDARD_NORMAL = NormalDist()


def normal_cdf(x: float) -> float:
    """P(Z <= x) for a standard normal Z, from math.erf."""
    if x == math.inf:
        return 1.0
    if x == -math.inf:
        return 0.0
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def normal_quantile(p: float) -> float:
    """The x with P(Z <= x) = p (Wichura's AS241, as implemented by statistics.NormalDist)."""
    if not 0 < p < 1:
        raise ValueError(f"quantile needs 0 < p < 1, got {p}")
    return _STANDARD_NORMAL.inv_cdf(p)


@dataclass(frozen=True)
class Arm:
    name: str
    estimate: float  # proportion or mean
    n: int


@dataclass(frozen=True)
class EquivalenceResult:
    kind: str  # proportions | means
    a: Arm
    b: Arm
    difference: float  # B - A
    standard_error: float
    alpha: float
    margin_low: float
    margin_high: float
    z_quantile: float  # z_{1 - alpha}
    interval_low: float
    interval_high: float
    p_lower: float  # H0: difference <= margin_low
    p_upper: float  # H0: difference >= margin_high
    equivalent: bool
    warnings: list[str] = field(default_factory=list)

    @property
    def confidence(self) -> float:
        return 1 - 2 * self.alpha

    @property
    def p_value(self) -> float:
        return max(self.p_lower, self.p_upper)

    @property
    def verdict(self) -> str:
        return "equivalent" if self.equivalent else "not shown equivalent"

    def to_dict(self) -> dict:
        data = asdict(self)
        data.update(confidence=self.confidence, p_value=self.p_value, verdict=self.verdict)
        return data


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 0.5:
        raise UsageError(f"alpha must be between 0 and 0.5 (e.g. 0.05), got {alpha}")


def resolve_margin(margin: float | None, relative_margin: float | None, baseline: float) -> float:
    """An absolute margin, or a fraction of arm A's estimate (taken as fixed)."""
    if margin is not None and relative_margin is None:
        if not margin > 0:
            raise UsageError(f"--margin must be positive, got {margin}")
        return float(margin)
    if relative_margin is None or margin is not None:
        raise UsageError("give exactly one of --margin (absolute) or --relative-margin (a fraction of arm A)")
    if not relative_margin > 0:
        raise UsageError(f"--relative-margin must be positive, got {relative_margin}")
    if baseline == 0:
        raise UsageError("--relative-margin needs a non-zero arm A estimate; use --margin")
    return abs(baseline) * relative_margin


def tost(difference: float, standard_error: float, margin_low: float, margin_high: float, alpha: float
         ) -> tuple[float, float, float, float, float, bool]:
    """(z quantile, interval low, interval high, p_lower, p_upper, equivalent)."""
    _check_alpha(alpha)
    if not margin_low < 0 < margin_high:
        raise UsageError("the equivalence margin must straddle zero")
    z = normal_quantile(1 - alpha)
    low, high = difference - z * standard_error, difference + z * standard_error
    if standard_error == 0:
        inside = margin_low < difference < margin_high
        p_lower = 0.0 if difference > margin_low else 1.0
        p_upper = 0.0 if difference < margin_high else 1.0
        return z, low, high, p_lower, p_upper, inside
    p_lower = 1 - normal_cdf((difference - margin_low) / standard_error)
    p_upper = normal_cdf((difference - margin_high) / standard_error)
    return z, low, high, p_lower, p_upper, (p_lower < alpha and p_upper < alpha)


def proportions(successes_a: int, trials_a: int, successes_b: int, trials_b: int, *,
                margin: float | None = None, relative_margin: float | None = None,
                alpha: float = 0.05) -> EquivalenceResult:
    """TOST for p_B - p_A with the unpooled standard error sqrt(pA(1-pA)/nA + pB(1-pB)/nB)."""
    for arm, s, n in (("a", successes_a, trials_a), ("b", successes_b, trials_b)):
        if n < 1:
            raise UsageError(f"--trials-{arm} must be at least 1, got {n}")
        if not 0 <= s <= n:
            raise UsageError(f"--successes-{arm} must be between 0 and --trials-{arm} ({n}), got {s}")
    pa, pb = successes_a / trials_a, successes_b / trials_b
    delta = resolve_margin(margin, relative_margin, pa)
    se = math.sqrt(pa * (1 - pa) / trials_a + pb * (1 - pb) / trials_b)
    diff = pb - pa
    z, low, high, p_lo, p_hi, ok = tost(diff, se, -delta, delta, alpha)
    warnings = []
    for name, p, n in (("A", pa, trials_a), ("B", pb, trials_b)):
        if min(n * p, n * (1 - p)) < 10:
            warnings.append(f"arm {name} has fewer than 10 successes or failures: the normal approximation is poor")
    return EquivalenceResult("proportions", Arm("A", pa, trials_a), Arm("B", pb, trials_b), diff, se, alpha,
                             -delta, delta, z, low, high, p_lo, p_hi, ok, warnings)


def means(mean_a: float, var_a: float, n_a: int, mean_b: float, var_b: float, n_b: int, *,
          margin: float | None = None, relative_margin: float | None = None,
          alpha: float = 0.05) -> EquivalenceResult:
    """TOST for mean_B - mean_A with the Welch standard error sqrt(varA/nA + varB/nB).

    Variances are the per-unit sample variances (not of the mean).
    """
    for arm, v, n in (("a", var_a, n_a), ("b", var_b, n_b)):
        if n < 2:
            raise UsageError(f"--n-{arm} must be at least 2, got {n}")
        if not v >= 0 or math.isinf(v):
            raise UsageError(f"--var-{arm} must be a non-negative number, got {v}")
    delta = resolve_margin(margin, relative_margin, mean_a)
    se = math.sqrt(var_a / n_a + var_b / n_b)
    diff = mean_b - mean_a
    z, low, high, p_lo, p_hi, ok = tost(diff, se, -delta, delta, alpha)
    warnings = []
    if min(n_a, n_b) < 30:
        warnings.append("an arm has fewer than 30 units: the normal approximation understates the interval")
    return EquivalenceResult("means", Arm("A", mean_a, n_a), Arm("B", mean_b, n_b), diff, se, alpha,
                             -delta, delta, z, low, high, p_lo, p_hi, ok, warnings)
