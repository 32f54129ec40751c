"""A/B equivalence from counters: TOST sample size against scipy, a fixed horizon, and the arms
read from a real Prometheus."""

from __future__ import annotations

import math

import pytest

from opsctl.errors import NoDataError, UsageError
from opsctl.quality.abtest import read_arms, sample_size, tost_power, verdict


def scipy_sample_size(p: float, margin: float, alpha: float, power: float, delta: float = 0.0) -> int:
    """Written apart from the code under test: scipy's normal, brentq on the TOST power, ceiling."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    def power_at(n: float) -> float:
        q = p + delta
        se = math.sqrt((p * (1 - p) + q * (1 - q)) / n)
        z = norm.ppf(1 - alpha)
        return norm.cdf((margin - delta) / se - z) + norm.cdf((margin + delta) / se - z) - 1

    root = brentq(lambda n: power_at(n) - power, 2, 1e10)
    return math.ceil(root)


@pytest.mark.parametrize("p, margin, alpha, power, delta", [
    (0.32, 0.01, 0.05, 0.8, 0.0),
    (0.30, 0.005, 0.05, 0.9, 0.0),
    (0.05, 0.002, 0.025, 0.8, 0.0),
    (0.32, 0.01, 0.05, 0.8, 0.003),
])
def test_sample_size_matches_an_independent_scipy_computation(p, margin, alpha, power, delta):
    expected = scipy_sample_size(p, margin, alpha, power, delta)
    assert abs(sample_size(p, margin, alpha=alpha, power=power, delta=delta).per_arm - expected) <= 1


def test_sample_size_with_no_true_difference_is_the_closed_form():
    from statistics import NormalDist

    z = NormalDist().inv_cdf
    # n = (z_{1-alpha} + z_{1-beta/2})^2 * 2 p (1 - p) / m^2 (each one-sided test sees half the beta)
    closed = (z(0.95) + z(0.9)) ** 2 * 2 * 0.32 * 0.68 / 0.01 ** 2
    got = sample_size(0.32, 0.01).per_arm
    assert closed <= got <= closed * 1.001 + 1  # the exact power also counts the other tail: a hair more


def test_days_needed_come_from_todays_traffic_and_the_smaller_arm():
    size = sample_size(0.32, 0.01, daily_trials=400_000, share=0.1)
    assert size.days == pytest.approx(size.per_arm / 40_000)
    assert sample_size(0.32, 0.01, daily_trials=400_000, share=0.9).days == pytest.approx(size.days)
    assert "binomial" in size.variance


def test_an_assumed_difference_outside_the_margin_is_refused():
    with pytest.raises(UsageError, match="no n suffices"):
        sample_size(0.3, 0.01, delta=0.01)


def test_power_grows_with_the_sample():
    assert tost_power(1000, 0.3, 0.3, 0.01, 0.05) < tost_power(40000, 0.3, 0.3, 0.01, 0.05) < 1


def test_no_peeking_before_the_horizon_even_on_a_huge_difference():
    result = verdict(100, 1000, 900, 1000, margin=0.01, needed=5000)
    assert (result.verdict, result.outcome) == ("inconclusive", "pause")
    assert result.difference is None and "horizon not reached: 1000 of 5000" in result.reason


@pytest.mark.parametrize("arms, expected", [
    ((32_000, 100_000, 32_100, 100_000), ("equivalent", "continue")),   # 0.1 pt apart, se ~0.21 pt
    ((32_000, 100_000, 36_000, 100_000), ("different", "abort")),       # 4 pts apart: wholly outside ±1
    ((32_000, 100_000, 32_900, 100_000), ("inconclusive", "pause")),    # 0.9 pt: the interval crosses +1
])
def test_at_the_horizon_the_verdict_has_three_outcomes(arms, expected):
    result = verdict(*arms, margin=0.01, needed=100_000)
    assert (result.verdict, result.outcome) == expected
    a, b = arms[0] / arms[1], arms[2] / arms[3]
    se = math.sqrt(a * (1 - a) / arms[1] + b * (1 - b) / arms[3])
    assert result.interval[0] == pytest.approx(b - a - 1.6448536 * se, abs=1e-6)


T0 = 1_790_000_000


def ab_openmetrics(path, t0: int = T0):
    """An hour of the grammar service's counters, a sample a minute: per minute the internal arm
    shows 900 suggestions (288 accepted, 0.32), the databricks arm 100 (31 accepted, 0.31)."""
    rows = {"shown": [], "accepted": []}
    for k in range(61):
        for arm, per_minute, accepted in (("internal", 900, 288), ("databricks", 100, 31)):
            rows["shown"].append(f'grammar_suggestions_shown_total{{arm="{arm}"}} {per_minute * k} {t0 + 60 * k}')
            rows["accepted"].append(f'grammar_suggestions_accepted_total{{arm="{arm}"}} {accepted * k} {t0 + 60 * k}')
    lines = []
    for name in ("shown", "accepted"):
        lines.append(f"# TYPE grammar_suggestions_{name} counter")
        lines += sorted(rows[name], key=lambda r: (r.split(" ")[0], int(r.split(" ")[-1])))
    path.write_text("\n".join(lines + ["# EOF"]) + "\n")
    return path


@pytest.mark.slow
def test_arms_are_read_from_the_grammar_services_counters_in_a_real_prometheus(tmp_path, prometheus_factory):
    from opsctl.config.loading import load_config
    from opsctl.metrics.base import open_source
    from tests.conftest import write_config

    t0 = T0
    om = ab_openmetrics(tmp_path / "ab.om")
    server = prometheus_factory(openmetrics=om)
    cfg = load_config(str(write_config(tmp_path, source="prometheus", prometheus_url=server.url)))
    source = open_source(cfg)
    arms = read_arms(source, 'sum(increase(grammar_suggestions_accepted_total{arm="$arm"}[$window]))',
                     'sum(increase(grammar_suggestions_shown_total{arm="$arm"}[$window]))',
                     ("internal", "databricks"), "1h", t0 + 3600)
    # 60 minutes of increments (the 61st sample carries the 60th): 54,000 / 6,000 shown, 288 / 31 accepted a minute
    assert arms == {"internal": (288 * 60, 54_000), "databricks": (31 * 60, 6_000)}
    with pytest.raises(NoDataError, match="arm nowhere"):
        read_arms(source, 'sum(increase(grammar_suggestions_accepted_total{arm="$arm"}[$window]))',
                  'sum(increase(grammar_suggestions_shown_total{arm="$arm"}[$window]))',
                  ("nowhere", "internal"), "1h", t0 + 3600)


def test_an_arm_without_trials_is_never_at_its_horizon():
    result = verdict(0, 0, 0, 0, margin=0.01, needed=0)
    assert result.outcome == "pause" and "0 of 1" in result.reason
