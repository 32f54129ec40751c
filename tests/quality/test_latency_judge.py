"""The latency judge: difference in the share over 500 ms within a margin, an equivalence judgement;
figures by hand; false-positive rate on identical simulated backends and power on a 10% slowdown."""

from __future__ import annotations

import math

import pytest

from opsctl.errors import NoDataError, UsageError
from opsctl.quality.latency_judge import judge, read_histogram, share_over

INF = math.inf


def hist(total: int, under_half_second: int) -> dict[float, float]:
    return {0.2: under_half_second * 0.5, 0.5: under_half_second, 1.0: total, INF: total}


def test_share_over_the_threshold_comes_from_the_cumulative_buckets():
    assert share_over(hist(10_000, 9_500), 0.5) == (0.05, 10_000)
    with pytest.raises(UsageError, match="threshold 0.3s is not a bucket bound"):
        share_over(hist(10, 9), 0.3)
    with pytest.raises(NoDataError):
        share_over(hist(0, 0), 0.5)


def test_a_tenth_of_a_point_apart_on_ten_thousand_requests_each_is_equivalent():
    result = judge(hist(10_000, 9_500), hist(10_000, 9_490), margin=0.01)
    # d = 0.051 - 0.05 = 0.001; se = sqrt(.05*.95/1e4 + .051*.949/1e4) = 0.0030975
    assert result.difference == pytest.approx(0.001)
    assert result.standard_error == pytest.approx(math.sqrt(0.05 * 0.95 / 1e4 + 0.051 * 0.949 / 1e4))
    # TOST: (0.001 + 0.01) / se = 3.55 and (0.01 - 0.001) / se = 2.91, both above z_.95 = 1.645
    assert (result.verdict, result.outcome) == ("equivalent", "continue")


def test_three_points_slower_is_worse_and_aborts():
    result = judge(hist(10_000, 9_500), hist(10_000, 9_200), margin=0.01)
    assert (result.verdict, result.outcome) == ("worse", "abort")  # d = 0.03, z = 0.03 / 0.00348 = 8.6


def test_too_few_requests_to_tell_is_inconclusive_and_pauses():
    result = judge(hist(100, 95), hist(100, 93), margin=0.01)  # d = 0.02, se = 0.0336: z = 0.6
    assert (result.verdict, result.outcome) == ("inconclusive", "pause")


def test_a_trivial_but_significant_difference_at_scale_is_equivalent_not_a_regression():
    # ten million requests each, 5.0% vs 5.3% slow: z = 0.003 / 0.0000985 = 30, yet inside the 1-point margin
    result = judge(hist(10_000_000, 9_500_000), hist(10_000_000, 9_470_000), margin=0.01)
    assert result.difference / result.standard_error > 20
    assert result.verdict == "equivalent"


def test_faster_beyond_the_margin_is_better_and_continues():
    result = judge(hist(10_000, 9_200), hist(10_000, 9_500), margin=0.01)
    assert (result.verdict, result.outcome) == ("better", "continue")


def _simulate(rng, n: int, slowdown: float, bounds) -> dict[float, float]:
    """n requests of a lognormal backend (median 200 ms, sigma 0.5) slowed by a factor."""
    import numpy as np

    latencies = np.exp(rng.normal(math.log(0.2), 0.5, n)) * slowdown
    counts = np.searchsorted(np.sort(latencies), bounds, side="right")
    return {**{b: float(c) for b, c in zip(bounds, counts)}, INF: float(n)}


@pytest.mark.slow
def test_false_positive_rate_on_identical_backends_is_at_most_alpha_and_power_on_a_tenth_slower_is_high():
    import numpy as np

    rng = np.random.default_rng(20261102)
    bounds = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
    trials, n, alpha = 300, 20_000, 0.05
    worse_identical = sum(judge(_simulate(rng, n, 1.0, bounds), _simulate(rng, n, 1.0, bounds), margin=0.01,
                                alpha=alpha).verdict == "worse" for _ in range(trials))
    worse_slower = sum(judge(_simulate(rng, n, 1.0, bounds), _simulate(rng, n, 1.1, bounds), margin=0.01,
                             alpha=alpha).verdict == "worse" for _ in range(trials))
    assert worse_identical / trials <= alpha
    # By hand: share over 500 ms is P(Z > ln(2.5)/0.5) = 3.34% at full speed and P(Z > ln(0.5/0.22)/0.5)
    # = 5.02% 10% slower: d = 1.68 points, se = 0.2 points at 20,000 each; "worse" needs d_hat >= 1 point
    # and z > 1.645: P(d_hat >= 0.01) = P(Z > (0.01 - 0.0168) / 0.002) = P(Z > -3.4) > 0.99.
    assert worse_slower / trials >= 0.95


def test_histograms_are_read_from_the_embedded_store(tmp_path):
    from opsctl.config.loading import load_config
    from opsctl.metrics.base import open_source
    from opsctl.metrics.embedded import EmbeddedStore
    from tests.conftest import write_config

    end, count = 1_795_000_000, 360
    ts = [end - (count - 1 - i) * 10 for i in range(count)]
    le = (100, 400, 800, 950, 990, 996, 999, 1000, 1000, 1000, 1000)  # cumulative per 10 s step
    slow = (20, 100, 300, 600, 900, 960, 990, 998, 1000, 1000, 1000)
    store = EmbeddedStore.open(tmp_path / "state" / "metrics.sqlite", create=True)
    for backend, buckets in (("internal", le), ("databricks", slow)):
        cols = {"req_ok": [1000] * count, "lat_count": [1000] * count, "lat_sum": [200.0] * count}
        cols.update({f"le_{i}": [c] * count for i, c in enumerate(buckets)})
        store.write_steps(backend, ts, cols, mode="replace")
    store.close()
    source = open_source(load_config(str(write_config(tmp_path))))
    a = read_histogram(source, "internal", 3600, end)
    b = read_histogram(source, "databricks", 3600, end)
    steps = a[INF] / 1000
    assert a[0.5] == pytest.approx(990 * steps) and b[0.5] == pytest.approx(900 * steps)
    result = judge(a, b, threshold=0.5, margin=0.01)
    assert result.share_a == pytest.approx(0.01) and result.share_b == pytest.approx(0.10)
    assert result.verdict == "worse"
