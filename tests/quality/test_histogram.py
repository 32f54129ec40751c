"""Percentiles from cumulative buckets, interpolated like PromQL's histogram_quantile (by hand)."""

from __future__ import annotations

import math

import pytest

from opsctl.quality.histogram import histogram_quantile

INF = math.inf
# 100 observations: 50 at or under 0.1 s, 80 under 0.2, 95 under 0.5, all under +Inf.
BUCKETS = [(0.1, 50), (0.2, 80), (0.5, 95), (INF, 100)]


@pytest.mark.parametrize("q, expected", [
    (0.5, 0.1),                          # rank 50 -> first bucket, 0 + 0.1 * 50/50
    (0.6, 0.1 + 0.1 * (60 - 50) / 30),   # rank 60 -> (0.1, 0.2], 10 of its 30
    (0.9, 0.2 + 0.3 * (90 - 80) / 15),   # rank 90 -> (0.2, 0.5], 10 of its 15 = 0.4
    (0.25, 0.1 * 25 / 50),               # inside the first bucket, from 0
    (0.99, 0.5),                          # rank 99 in +Inf -> the highest finite bound
])
def test_quantile_interpolates_inside_the_bucket_holding_the_rank(q, expected):
    assert histogram_quantile(q, BUCKETS) == pytest.approx(expected, abs=1e-12)


def test_bucket_order_does_not_matter():
    assert histogram_quantile(0.9, list(reversed(BUCKETS))) == pytest.approx(0.4)


def test_no_observations_is_none_not_zero():
    assert histogram_quantile(0.5, [(0.1, 0), (INF, 0)]) is None


def test_a_histogram_without_the_inf_bucket_is_refused():
    with pytest.raises(ValueError, match=r"\+Inf"):
        histogram_quantile(0.5, [(0.1, 5), (0.2, 10)])
