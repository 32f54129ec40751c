"""`promtool test rules` on the generated rules: each scenario's traffic goes in as promtool input
series (a sample every 10 s, evaluation every minute), and promtool checks the alerts firing at every
minute against what the raw counts say (tests/slo/rules_data.py), plus figures worked out by hand.

Settings (tests/slo/rules_data.py): 28-day period, so page at 13.44x over 1h & 5m or 5.6x over
6h & 30m, ticket at 2.8x over 1d & 2h or 0.9333x over 3d & 6h; page `for: 2m` and at least 1 request/s
over the short window, ticket `for: 15m` and at least 0.1 request/s.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from tests.conftest import REPO, write_config
from tests.slo import rules_data as r

HOUR = 360  # steps


@pytest.fixture(scope="module")
def rules_for(tmp_path_factory):
    """Generate rules with `opsctl slo rules` for the named SLO files; returns (path, document)."""
    from tests.conftest import run_opsctl

    made = {}

    def make(*names: str):
        if names not in made:
            work = tmp_path_factory.mktemp("rules")
            cfg = write_config(work, r.ALERTING_CONFIG + "quality: {rules: {enabled: false}}\n")  # SLO groups alone
            out = work / "rules.yaml"
            files = [str(REPO / "slos" / f"{n}.yaml") for n in names]
            result = run_opsctl("--config", str(cfg), "slo", "rules", *files, "--out", str(out))
            assert result.exit_code == 0, result.output
            made[names] = (out, yaml.safe_load(out.read_text()))
        return made[names]

    return make


def check(tmp_path, rules, data, slos, minutes, severities=("page", "ticket")):
    path, doc = rules
    expected = r.expected_alerts(data, slos, minutes)
    result = r.run_promtool_test(tmp_path, path, r.input_series(data), r.alert_tests(expected, doc, severities))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    return expected


def test_fast_burn_pages_within_the_minutes_the_maths_predicts(tmp_path, rules_for):
    # 10 requests/s on internal, healthy for 2 h, then 1% of requests fail (100x the 0.01% budget).
    steps = 4 * HOUR
    requests = np.full(steps, 100)
    errors = np.zeros(steps, dtype=int)
    errors[2 * HOUR:] = 1
    data = {"internal": r.traffic(requests, errors)}
    onset = 120  # minutes
    # By hand: n failing steps (1 failure in 100 requests each) since the onset.
    # 1h: n / 36000 > 13.44 * 0.0001 -> n >= 49 (490 s); 5m: n / 3000 > 0.001344 -> n >= 5.
    # So the 1h/5m pair holds from the first evaluation 490 s after the onset: minute 9;
    # `for: 2m` -> pages at minute 11. 6h/30m: the 6h window holds all 720 + n steps so far:
    # n / (100 (720 + n)) > 5.6 * 0.0001 -> n >= 43 (430 s); 30m: n / 18000 > 0.00056 -> n >= 11:
    # holds from minute 8 (480 s), pages at minute 10, before the 1h/5m pair.
    expected = check(tmp_path, rules_for("internal-availability"), data, [r.slo("internal-availability")],
                     range(0, 4 * 60 + 1))
    name = "llm-inference-internal-availability"
    assert r.first_minute(expected, name, "6h") == onset + 10
    assert r.first_minute(expected, name, "1h") == onset + 11
    assert not any(expected[m] for m in range(0, onset + 1)), "nothing may fire before the onset"


def test_slow_burn_opens_a_ticket_but_never_pages(tmp_path, rules_for):
    # 250 requests/s, healthy for 2 h, then 1 failure per 2500 requests: 4x the budget for 6 h.
    steps = 8 * HOUR
    requests = np.full(steps, 2500)
    errors = np.zeros(steps, dtype=int)
    errors[2 * HOUR:] = 1
    data = {"internal": r.traffic(requests, errors)}
    onset = 120
    expected = check(tmp_path, rules_for("internal-availability"), data, [r.slo("internal-availability")],
                     range(0, 8 * 60 + 1))
    name = "llm-inference-internal-availability"
    # By hand, x minutes after the onset, in burn-rate units (4x while failing):
    # 6h (raw): holds 6 (120 + x) steps, 6x failing: 4x / (120 + x) > 0.9333 -> x >= 37.
    # 3d and 1d are derived from the 5m increases recorded every minute: summed over the window
    #   they count the steps up to each of the last five minutes, so failing / all =
    #   sum_j (x - j) / sum_j (120 + x - j), j = 0..4, = (5x - 10) / (5x + 590).
    # 3d/6h: 4 (5x - 10) / (5x + 590) > 0.9333 -> x >= 39 (raw 3d would hold from 37): holds from
    #        minute 39, fires after `for: 15m` at minute 54.
    # 1d/2h: 4 (5x - 10) / (5x + 590) > 2.8 -> x >= 283 (2h holds from 120 on): fires at 298.
    assert r.first_minute(expected, name, "3d") == onset + 54
    assert r.first_minute(expected, name, "1d") == onset + 298
    assert all(f.severity == "ticket" for fs in expected.values() for f in fs)


def test_error_rate_below_the_objective_never_alerts(tmp_path, rules_for):
    # 1000 requests/s with failures at 0.9x the budget (9 in every 100,000 requests, spread evenly,
    # never ahead of that pace), for 8 hours: under every factor, including the 0.9333x of 3d/6h.
    steps = 8 * HOUR
    requests = np.full(steps, 10_000)
    errors = np.diff(np.floor(np.arange(steps + 1) * 0.9).astype(int))
    data = {"internal": r.traffic(requests, errors)}
    expected = check(tmp_path, rules_for("internal-availability"), data, [r.slo("internal-availability")],
                     range(0, 8 * 60 + 1))
    assert not any(expected.values())
    assert errors.sum() == int(0.9 * steps)


def test_traffic_below_the_minimum_pages_on_its_bad_events(tmp_path, rules_for):
    # 0.4 requests/s, and every request fails for an hour: 10,000x the budget, under the page
    # minimum of 1 request/s, but 4 bad events a step reach the pairs' min_bad_events of 10 over 5m
    # in 3 steps: the 1h/5m pair holds at minute 61 (24 bad over 5m, 24 of 1,440 over 1h) and pages
    # at 63 (for: 2m), as at full traffic. The ticket (minimum 0.1 request/s) still opens.
    steps = 4 * HOUR
    requests = np.full(steps, 4)
    errors = np.zeros(steps, dtype=int)
    errors[HOUR:2 * HOUR] = 4
    data = {"internal": r.traffic(requests, errors)}
    expected = check(tmp_path, rules_for("internal-availability"), data, [r.slo("internal-availability")],
                     range(0, 4 * 60 + 1))
    assert r.first_minute(expected, "llm-inference-internal-availability", "1h") == 63
    # 1d/2h holds from the first failing step (minute 61: 2h of traffic averages 0.4 request/s),
    # fires 15 minutes later. 3d/6h: its 6h average stays under 0.1 request/s until minute 90, but
    # its 6h window counts 10 bad events from the third failing step: it holds at 61 too, fires at 76
    # (before the bad-event clause it waited for minute 90 and fired at 105).
    assert r.first_minute(expected, "llm-inference-internal-availability", "1d") == 61 + 15
    assert r.first_minute(expected, "llm-inference-internal-availability", "3d") == 61 + 15


def test_the_same_outage_at_exactly_the_minimum_traffic_pages(tmp_path, rules_for):
    # 1 request/s (the minimum: the guard is >=), every request failing from minute 60.
    steps = 2 * HOUR
    requests = np.full(steps, 10)
    errors = np.zeros(steps, dtype=int)
    errors[HOUR:] = 10
    data = {"internal": r.traffic(requests, errors)}
    expected = check(tmp_path, rules_for("internal-availability"), data, [r.slo("internal-availability")],
                     range(0, 2 * 60 + 1), severities=("page",))
    # 1h/5m: 100% failures over 5m, and over 1h n/360 > 0.001344 from the first failing step:
    # holds at minute 61, pages at 63 (for: 2m).
    assert r.first_minute(expected, "llm-inference-internal-availability", "1h") == 63


def test_latency_regression_at_500ms_alerts_the_latency_slo_not_availability(tmp_path, rules_for):
    # 100 requests/s on internal, 99.5% under 500 ms; from minute 120, 30% take 500 ms - 1 s
    # (none fail, none slower than 1 s): the 500 ms SLO (99%) burns 30x; the 1 s SLO and
    # availability stay at zero errors.
    steps = 4 * HOUR
    requests = np.full(steps, 1000)
    under_half = np.full(steps, 995)
    under_half[2 * HOUR:] = 700
    data = {"internal": r.traffic(requests, le_good={"0.5": under_half, "1.0": requests})}
    names = ("internal-availability", "internal-latency-500ms", "internal-latency-1s")
    slos = [r.slo(n) for n in names]
    expected = check(tmp_path, rules_for(*names), data, slos, range(0, 4 * 60 + 1))
    fired = {f.slo for fs in expected.values() for f in fs}
    assert fired == {"llm-inference-internal-latency-500ms"}
    # By hand, 1h/5m on the 99% SLO: (0.005 (360 - n) + 0.3 n) / 360 > 13.44 * 0.01 -> n >= 158
    # (1580 s): holds from minute 147 (120 + 27), pages at 149.
    assert r.first_minute(expected, "llm-inference-internal-latency-500ms", "1h") == 149


def test_exact_le_1_matcher_also_counts_buckets_exposed_as_1_0(tmp_path):
    """An SLO written with le="1" gets rules matching the "1.0" buckets OpenMetrics exporters write."""
    from tests.conftest import run_opsctl

    text = (REPO / "slos" / "internal-latency-1s.yaml").read_text()
    assert 'le=~"1|1\\\\.0*"' in text
    slo_dir = tmp_path / "slos"
    slo_dir.mkdir()
    (slo_dir / "exact.yaml").write_text(text.replace('le=~"1|1\\\\.0*"', 'le="1"'))
    cfg = write_config(tmp_path, r.ALERTING_CONFIG, slo_dir=slo_dir)
    out = tmp_path / "rules.yaml"
    result = run_opsctl("--config", str(cfg), "slo", "rules", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert 'le=~"1(\\\\.0*)?"' in out.read_text()
    requests = np.full(HOUR, 1000)
    under_one = np.full(HOUR, 996)
    data = {"internal": r.traffic(requests, le_good={"1.0": under_one})}
    promql = [{
        "expr": 'slo:sli_error:ratio_rate5m{slo="llm-inference-internal-latency-1s"}',
        "eval_time": "30m",
        "exp_samples": [{
            "labels": 'slo:sli_error:ratio_rate5m{slo="llm-inference-internal-latency-1s",'
                      'backend="internal",service="llm-inference"}',
            "value": 1 - 29880 / 30000,  # 4 in 1000 over 1 s (1.0 if the "1.0" bucket were missed)
        }],
    }]
    result = r.run_promtool_test(tmp_path, out, r.input_series(data), [], promql)
    assert result.returncode == 0, result.stdout[-3000:]
