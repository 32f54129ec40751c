"""TOST equivalence: figures checked against arithmetic done by hand (written out in each test),
with z quantiles from printed normal tables, and the CLI's exit codes and output."""

from __future__ import annotations

import json
import math

import pytest

from opsctl.errors import UsageError
from opsctl.quality import equivalence as eq

Z_95 = 1.6448536269514722  # z_{0.95} from the normal table: the 90% two-sided interval for alpha = 0.05
Z_975 = 1.959963984540054  # z_{0.975}: alpha = 0.025


def test_normal_quantile_and_cdf_match_the_normal_table():
    assert eq.normal_quantile(0.95) == pytest.approx(Z_95, abs=1e-12)
    assert eq.normal_quantile(0.975) == pytest.approx(Z_975, abs=1e-12)
    assert eq.normal_quantile(0.5) == pytest.approx(0.0, abs=1e-15)
    assert eq.normal_cdf(Z_975) == pytest.approx(0.975, abs=1e-12)
    assert eq.normal_cdf(-2.16) == pytest.approx(0.01539, abs=1e-5)  # table value
    assert eq.normal_cdf(0.0) == 0.5


def test_proportions_within_a_two_point_margin_are_equivalent():
    # A: 4000/10000 = 0.400, B: 4050/10000 = 0.405, difference B - A = +0.005
    # SE = sqrt(0.4 * 0.6 / 10000 + 0.405 * 0.595 / 10000) = sqrt(0.000024 + 0.0000240975) = sqrt(0.0000480975)
    se = math.sqrt(0.0000480975)
    assert se == pytest.approx(0.0069352361, abs=1e-10)
    # 90% interval: 0.005 -/+ 1.64485 * 0.0069352 = 0.005 -/+ 0.0114074 -> [-0.0064074, +0.0164074]
    low, high = 0.005 - Z_95 * se, 0.005 + Z_95 * se
    assert (low, high) == pytest.approx((-0.0064074, 0.0164074), abs=1e-7)
    r = eq.proportions(4000, 10000, 4050, 10000, margin=0.02, alpha=0.05)
    assert r.difference == pytest.approx(0.005, abs=1e-15)
    assert r.standard_error == pytest.approx(se, rel=1e-12)
    assert r.z_quantile == pytest.approx(Z_95, abs=1e-12)
    assert (r.interval_low, r.interval_high) == pytest.approx((low, high), abs=1e-12)
    assert (r.margin_low, r.margin_high) == (-0.02, 0.02)
    # p_upper = Phi((0.005 - 0.02) / SE) = Phi(-2.16287); table: Phi(-2.16) = 0.01539, Phi(-2.17) = 0.01500,
    # interpolated 0.01539 - 0.287 * 0.00039 = 0.01528
    assert r.p_upper == pytest.approx(0.01528, abs=5e-5)
    # p_lower = 1 - Phi((0.005 + 0.02) / SE) = 1 - Phi(3.6048) ~ 0.00016 (table: 1 - Phi(3.60) = 0.000159)
    assert r.p_lower == pytest.approx(0.000156, abs=5e-6)
    assert r.equivalent and r.verdict == "equivalent"
    assert r.warnings == []


def test_same_proportions_with_a_one_point_margin_are_not_shown_equivalent():
    # Same data; the interval's upper end +0.0164074 reaches past +0.01.
    r = eq.proportions(4000, 10000, 4050, 10000, margin=0.01, alpha=0.05)
    assert r.interval_high == pytest.approx(0.0164074, abs=1e-7)
    # p_upper = Phi((0.005 - 0.01) / 0.0069352) = Phi(-0.72096); table: Phi(-0.72) = 0.2358, Phi(-0.73) = 0.2327
    assert r.p_upper == pytest.approx(0.2355, abs=3e-4)
    assert not r.equivalent and r.verdict == "not shown equivalent"


def test_means_with_large_arms_are_equivalent_even_though_they_differ():
    # A: mean 3.20, variance 1.44, n 20000; B: mean 3.17, variance 1.50, n 20000. Margin 2% of A = 0.064.
    # difference = -0.03; SE = sqrt(1.44/20000 + 1.50/20000) = sqrt(0.000147) = 0.0121244
    # 90% interval: -0.03 -/+ 1.64485 * 0.0121244 = -0.03 -/+ 0.0199428 -> [-0.0499428, -0.0100572]
    se = math.sqrt(0.000147)
    r = eq.means(3.20, 1.44, 20000, 3.17, 1.50, 20000, relative_margin=0.02, alpha=0.05)
    assert r.margin_high == pytest.approx(0.064, abs=1e-12)
    assert r.standard_error == pytest.approx(se, rel=1e-12)
    assert (r.interval_low, r.interval_high) == pytest.approx((-0.0499428, -0.0100572), abs=1e-7)
    assert r.equivalent  # inside ±0.064 although the interval excludes 0


def test_means_with_small_arms_are_not_shown_equivalent():
    # Same figures, n 5000 each: SE = sqrt(2.94 / 5000) = sqrt(0.000588) = 0.0242487
    # 90% interval: -0.03 -/+ 1.64485 * 0.0242487 = -0.03 -/+ 0.0398856 -> [-0.0698856, +0.0098856]; -0.0699 < -0.064
    r = eq.means(3.20, 1.44, 5000, 3.17, 1.50, 5000, relative_margin=0.02, alpha=0.05)
    assert r.standard_error == pytest.approx(0.0242487, abs=1e-7)
    assert (r.interval_low, r.interval_high) == pytest.approx((-0.0698856, 0.0098856), abs=1e-7)
    assert not r.equivalent


def test_alpha_sets_the_interval_width():
    # alpha 0.025 -> 95% interval with z_{0.975}: 0.005 -/+ 1.95996 * 0.0069352 = 0.005 -/+ 0.0135928
    r = eq.proportions(4000, 10000, 4050, 10000, margin=0.02, alpha=0.025)
    assert r.confidence == pytest.approx(0.95)
    assert (r.interval_low, r.interval_high) == pytest.approx((-0.0085928, 0.0185928), abs=1e-7)
    assert r.equivalent


def test_zero_variance_arms_decide_on_the_point_difference():
    r = eq.proportions(0, 100, 0, 100, margin=0.01)
    assert r.standard_error == 0 and r.equivalent
    assert any("normal approximation" in w for w in r.warnings)


@pytest.mark.parametrize("call, message", [
    (lambda: eq.proportions(11, 10, 5, 10, margin=0.1), "--successes-a must be between 0 and --trials-a"),
    (lambda: eq.proportions(1, 0, 5, 10, margin=0.1), "--trials-a must be at least 1"),
    (lambda: eq.proportions(1, 10, 5, 10, margin=0.1, relative_margin=0.1), "exactly one of --margin"),
    (lambda: eq.proportions(1, 10, 5, 10), "exactly one of --margin"),
    (lambda: eq.proportions(1, 10, 5, 10, margin=-0.1), "--margin must be positive"),
    (lambda: eq.proportions(1, 10, 5, 10, margin=0.1, alpha=0.5), "alpha must be between 0 and 0.5"),
    (lambda: eq.means(1, -1, 10, 1, 1, 10, margin=0.1), "--var-a must be a non-negative"),
    (lambda: eq.means(1, 1, 1, 1, 1, 10, margin=0.1), "--n-a must be at least 2"),
    (lambda: eq.means(0, 1, 10, 1, 1, 10, relative_margin=0.1), "non-zero arm A"),
])
def test_bad_input_is_a_usage_error_naming_the_flag(call, message):
    with pytest.raises(UsageError, match=message):
        call()


def test_cli_prints_interval_margin_and_verdict_and_exits_0_when_equivalent(opsctl):
    result = opsctl("ab", "equivalence", "--successes-a", "4000", "--trials-a", "10000",
                    "--successes-b", "4050", "--trials-b", "10000", "--margin", "0.02")
    assert result.exit_code == 0, result.output
    assert "90% interval: [-0.00640745, +0.0164074]" in result.stdout
    assert "margin: ±0.02" in result.stdout
    assert "verdict: EQUIVALENT" in result.stdout


def test_cli_exits_1_when_equivalence_is_not_shown(opsctl):
    result = opsctl("ab", "equivalence", "--successes-a", "4000", "--trials-a", "10000",
                    "--successes-b", "4050", "--trials-b", "10000", "--margin", "0.01", "-o", "json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["verdict"] == "not shown equivalent" and data["equivalent"] is False
    assert data["interval_high"] == pytest.approx(0.0164074, abs=1e-7)
    assert "not inside ±0.01" in result.stderr


def test_cli_means_in_yaml(opsctl):
    result = opsctl("ab", "equivalence", "--mean-a", "3.20", "--var-a", "1.44", "--n-a", "20000",
                    "--mean-b", "3.17", "--var-b", "1.50", "--n-b", "20000", "--relative-margin", "0.02",
                    "-o", "yaml")
    assert result.exit_code == 0, result.output
    assert "verdict: equivalent" in result.stdout and "kind: means" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["--successes-a", "1", "--trials-a", "10", "--margin", "0.1"], "missing --successes-b, --trials-b"),
    (["--successes-a", "1", "--trials-a", "10", "--successes-b", "1", "--trials-b", "10", "--mean-a", "1",
      "--margin", "0.1"], "not both"),
    (["--margin", "0.1"], "give --successes-a"),
    (["--successes-a", "12", "--trials-a", "10", "--successes-b", "1", "--trials-b", "10", "--margin", "0.1"],
     "--successes-a must be between"),
])
def test_cli_bad_input_exits_2(opsctl, args, message):
    result = opsctl("ab", "equivalence", *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
