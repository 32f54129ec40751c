"""Margins drawn from the SLO a check protects (rollout.margins, docs/decisions/0530): a tenth of
the SLO's error budget 1 - goal, stated in the output; explicit margins still win. Every expected
figure is worked by hand in the comments."""

from __future__ import annotations

import json
import math
import textwrap

import pytest

from opsctl.quality.abtest import verdict
from opsctl.quality.latency_judge import judge
from opsctl.rollout.margins import MARGIN_FRACTION, ab_margin, latency_margin
from opsctl.rollout.plan import AbMetric
from tests.conftest import REPO, run_opsctl, write_config

INF = math.inf


def _shipped_slos():
    from opsctl.slo.loading import load_slos

    return load_slos([REPO / "slos"], ["internal", "databricks"])


def test_the_latency_margin_is_a_tenth_of_the_budget_of_the_slo_with_its_threshold():
    assert MARGIN_FRACTION == 0.1
    one_second = latency_margin(_shipped_slos(), "databricks", 1.0)
    # databricks-latency-1s: goal 0.999, budget 0.001 (0.1 point), a tenth: 0.0001 (0.01 point)
    assert (one_second.value, one_second.slo, one_second.goal) == (0.0001, "llm-inference-databricks-latency-1s", 0.999)
    assert one_second.describe() == ("±0.01 points = 10% of the 0.1-point error budget of SLO"
                                     " llm-inference-databricks-latency-1s (0.999)")
    half = latency_margin(_shipped_slos(), "databricks", 0.5)
    # databricks-latency-500ms: goal 0.99, budget 1 point, a tenth: 0.1 point (the old default was all of it)
    assert (half.value, half.slo) == (0.001, "llm-inference-databricks-latency-500ms")
    assert latency_margin(_shipped_slos(), "databricks", 1.0, 0.01).describe() == "±1 points (given)"


def test_no_slo_with_the_threshold_and_no_margin_is_refused_with_the_fix():
    from opsctl.errors import UsageError

    with pytest.raises(UsageError, match=r"no latency SLO with a 2s threshold covers databricks.*give the margin"):
        latency_margin(_shipped_slos(), "databricks", 2.0)


def _hist(total, under_1s):
    return {0.5: under_1s, 1.0: under_1s, INF: total}


def test_a_4_5x_growth_in_slow_requests_is_worse_with_the_derived_margin_and_equivalent_with_1_point():
    # 1,000,000 requests each; over 1 s: 200 (0.02%) on the baseline, 900 (0.09%, 4.5x) on the vendor.
    # d = 0.0007; se = sqrt(.0002 * .9998 / 1e6 + .0009 * .9991 / 1e6) = sqrt(1.0992e-9) = 3.3154e-5;
    # d / se = 21.1 > z_.95 = 1.645 and d >= 0.0001 (the derived margin): worse -> abort.
    a, b = _hist(1_000_000, 999_800), _hist(1_000_000, 999_100)
    drawn = latency_margin(_shipped_slos(), "databricks", 1.0)
    found = judge(a, b, threshold=1.0, margin=drawn.value)
    assert found.difference == pytest.approx(0.0007)
    assert found.standard_error == pytest.approx(3.3154e-5, rel=1e-3)
    assert (found.verdict, found.outcome) == ("worse", "abort")
    # with the old 1-point margin the 90% interval 0.0007 ± 1.645 * 3.3154e-5 = (0.000645, 0.000755)
    # lies inside ±0.01: "equivalent", the miss the issue reports
    assert judge(a, b, threshold=1.0, margin=0.01).verdict == "equivalent"


def _store(tmp_path, internal, databricks):
    from opsctl.metrics.embedded import EmbeddedStore

    end, count = 1_795_000_000, 360
    ts = [end - (count - 1 - i) * 10 for i in range(count)]
    store = EmbeddedStore.open(tmp_path / "state" / "metrics.sqlite", create=True)
    for backend, buckets in (("internal", internal), ("databricks", databricks)):
        cols = {"req_ok": [10_000] * count, "lat_count": [10_000] * count, "lat_sum": [2000.0] * count}
        cols.update({f"le_{i}": [c] * count for i, c in enumerate(buckets)})
        store.write_steps(backend, ts, cols, mode="replace")
    store.close()
    return write_config(tmp_path)


# per 10 s step, 10,000 requests; buckets 0.05 .. 10 s and +Inf; over 1 s: 2 (0.02%) and 9 (0.09%, 4.5x)
BASE = (5000, 8000, 9000, 9500, 9900, 9990, 9998, 10000, 10000, 10000, 10000)
GROWN = (5000, 8000, 9000, 9500, 9900, 9980, 9991, 10000, 10000, 10000, 10000)


def test_rollout_latency_draws_its_margin_from_the_slo_and_says_so(tmp_path):
    cfg = _store(tmp_path, BASE, GROWN)
    # 1 h: 3,600,000 requests each, 720 vs 3,240 over 1 s; d = 0.0007, se = sqrt(.0002*.9998/3.6e6
    # + .0009*.9991/3.6e6) = 1.7473e-5: worse beyond the 0.0001 margin, exit 1
    args = ["--config", cfg, "rollout", "latency", "--baseline", "internal", "--candidate", "databricks",
            "--threshold", "1"]
    result = run_opsctl(*args, "-o", "json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert (data["verdict"], data["margin"], data["margin_slo"], data["margin_source"]) == (
        "worse", 0.0001, "llm-inference-databricks-latency-1s", "slo")
    assert data["standard_error"] == pytest.approx(1.7473e-5, rel=1e-3)
    table = run_opsctl(*args)
    assert "margin ±0.01 points = 10% of the 0.1-point error budget of SLO llm-inference-databricks-latency-1s" in table.stdout
    # an explicit margin still works: ±1 point holds the interval (0.000671, 0.000729): equivalent, exit 0
    given = run_opsctl(*args, "--margin", "0.01", "-o", "json")
    assert given.exit_code == 0, given.output
    assert (json.loads(given.stdout)["verdict"], json.loads(given.stdout)["margin_source"]) == ("equivalent", "given")


def test_an_ab_metric_with_a_goal_takes_a_tenth_of_its_budget():
    metric = AbMetric("delivered", "s", "t", goal=0.95)
    assert ab_margin(metric).value == 0.005  # 0.1 x (1 - 0.95)
    assert ab_margin(AbMetric("acc", "s", "t", margin=0.01)).describe() == "±1 points (given)"
    with pytest.raises(ValueError, match="give margin"):
        AbMetric("acc", "s", "t")


def test_a_vendor_3_percent_worse_is_different_with_enough_samples():
    # baseline 0.32, vendor 3% worse: 0.3104 (d = -0.0096). 200,000 trials per arm:
    # se = sqrt(.32*.68/2e5 + .3104*.6896/2e5) = sqrt(1.088e-6 + 1.07027e-6) = 1.46910e-3;
    # 90% interval: -0.0096 ± 1.645 * 1.46910e-3 = (-0.012017, -0.007183).
    s_a, s_b, n = 64_000, 62_080, 200_000
    # goal 0.95: margin 0.005; the interval lies wholly below -0.005: different -> abort
    margin = ab_margin(AbMetric("acc", "s", "t", goal=0.95)).value
    found = verdict(s_a, n, s_b, n, margin=margin, needed=149_100)
    assert found.difference == pytest.approx(-0.0096)
    assert found.interval == pytest.approx((-0.012017, -0.007183), abs=2e-6)
    assert (found.verdict, found.outcome) == ("different", "abort")
    # the old 1-point margin: the interval crosses -0.01, inconclusive (a pause), never different
    assert verdict(s_a, n, s_b, n, margin=0.01, needed=1_000).verdict == "inconclusive"


def test_rollout_plan_sizes_the_ab_for_the_margin_drawn_from_the_goal(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(textwrap.dedent("""\
        name: ab-only
        backend: databricks
        baseline: internal
        start: "2026-11-02T09:00:00-05:00"
        stages:
          - ab:
              share: 10
              min_duration: 1d
              daily_trials: 400000
              metrics:
                - name: acceptance
                  successes: sum(increase(grammar_suggestions_accepted_total{arm="$arm"}[$window]))
                  trials: sum(increase(grammar_suggestions_shown_total{arm="$arm"}[$window]))
                  goal: 0.95
                  baseline: 0.32
        """))
    result = run_opsctl("--config", write_config(tmp_path), "rollout", "plan", plan)
    assert result.exit_code == 0, result.output
    # margin 0.1 x (1 - 0.95) = 0.005; n = (1.645 + 1.2816)^2 * 2 * .32 * .68 / .005^2 = 149,08x per arm;
    # the 10% arm of unequal ones (k = 9) needs n (1 + 1/9) / 2 = 82,82x, filled at 40,000 a day: 2.1 days
    assert "trials per arm for ±0.5 points with equal arms, 8282" in result.stdout
    assert "in the 10% arm of unequal ones (2.1 days at 400000/day" in result.stdout


def _ramp_plan(tmp_path, args: str):
    plan = tmp_path / f"ramp-{abs(hash(args))}.yaml"
    plan.write_text(textwrap.dedent(f"""\
        name: ramp-only
        backend: databricks
        baseline: internal
        start: "2026-11-02T09:00:00-05:00"
        stages:
          - ramp:
              steps:
                - {{weight: 20, soak: 1d}}
              analysis:
                - check: latency-judge
                  success: "result.verdict == 'equivalent'"
                  failure: "result.verdict == 'worse'"
                  args: {args}
        """))
    return plan


def test_a_latency_judge_with_no_slo_to_draw_from_is_refused_before_the_rollout_starts(tmp_path):
    cfg = write_config(tmp_path)
    # 2 s is a bucket bound but no shipped SLO has it: no margin to draw, refused by plan and start
    refused = _ramp_plan(tmp_path, "{threshold: 2}")
    for command in (("rollout", "plan"), ("rollout", "start", "--dry-run")):
        result = run_opsctl("--config", cfg, *command, refused)
        assert result.exit_code == 2, (command, result.output)
        assert ("stages[0].ramp.analysis[0].args.margin: no latency SLO with a 2s threshold covers databricks"
                in result.stderr), (command, result.stderr)
    # the 1 s SLO exists: its margin is drawn; an explicit margin needs no SLO
    for args in ("{threshold: 1}", "{threshold: 2, margin: 0.001}"):
        result = run_opsctl("--config", cfg, "rollout", "plan", _ramp_plan(tmp_path, args))
        assert result.exit_code == 0, (args, result.output)


def test_the_rollouts_latency_judge_draws_the_same_margin_and_aborts_on_the_growth(tmp_path):
    from opsctl.config.loading import load_config_file
    from opsctl.rollout.analyses import Evidence, latency_judge
    from opsctl.rollout.plan import load_plan

    cfg = load_config_file(_store(tmp_path, BASE, GROWN))
    plan = load_plan(_ramp_plan(tmp_path, "{threshold: 1}"), backends=list(cfg.backends))
    [analysis] = plan.stages[0].ramp.analysis
    result = latency_judge(analysis, Evidence(cfg, plan, 1_795_000_000))
    # the figures of test_rollout_latency_draws_its_margin_from_the_slo_and_says_so, over the 1 h interval
    assert (result["verdict"], result["margin"], result["margin_slo"]) == (
        "worse", 0.0001, "llm-inference-databricks-latency-1s")
    assert result["difference"] == pytest.approx(0.0007)
