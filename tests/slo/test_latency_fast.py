"""The fast-burn tier for latency SLOs with the shipped settings (opsctl.yaml's alerting.fast,
deploy/alertmanager.yml's paging route): a 10% tail above the 1 s threshold pages within 3 minutes,
checked by `promtool test rules` on the generated rules and by the in-process evaluation at the same
10 s evaluations; a week of clean simulated traffic at 500 and at 200,000 requests/s never fires it.

The traffic: databricks at 100 requests/s (1,000 a 10 s step). Before ONSET 1 request a step is
slower than 1 s (0.1%, the 99.9% SLO's budget: burn 1x); from ONSET on 100 a step are (a 10% tail).
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
import yaml

from opsctl.config import BUILTIN_CONFIG, load_config_file
from tests.conftest import REPO, require_binary, write_config
from tests.slo import data as d
from tests.slo import rules_data as r

NAME = "llm-inference-databricks-latency-1s"
SLO_FILE = REPO / "slos" / "databricks-latency-1s.yaml"
GOAL = 0.999
STEP = 10
PER_STEP, CLEAN_SLOW, TAIL_SLOW = 1000, 1, 100
STEPS, ONSET = 240, 120  # step i ends at ts[i] = (i + 1) * 10 s; the tail starts with step ONSET
BASE = 1_795_000_000 // 86400 * 86400
LATENCY_SHARE = 0.03  # the shipped alerting.fast.latency_share
FACTOR = 30.0  # by hand: 0.03 / (1 - 0.999)


def traffic() -> d.Traffic:
    requests = np.full(STEPS, PER_STEP, dtype=np.int64)
    slow = np.full(STEPS, CLEAN_SLOW, dtype=np.int64)
    slow[ONSET:] = TAIL_SLOW
    return r.traffic(requests, le_good={"0.5": requests - slow, "1.0": requests - slow})


def shipped():
    cfg = load_config_file(BUILTIN_CONFIG)
    routes = yaml.safe_load((REPO / "deploy" / "alertmanager.yml").read_text())["route"]["routes"]
    [route] = [x for x in routes if x.get("matchers") == ['severity="page"']]  # every page, the fast tier's too
    return cfg, int(route["group_wait"].rstrip("s"))


def test_the_shipped_latency_fast_tier_is_30x_on_a_99_9_slo_and_none_on_a_99_slo():
    from opsctl.slo.loading import load_slos
    from opsctl.slo.rule_plan import RuleSettings, plan_rules

    cfg, _ = shipped()
    assert cfg.alerting.fast.latency_share == LATENCY_SHARE
    slos = load_slos([SLO_FILE, REPO / "slos" / "databricks-latency-500ms.yaml"], cfg.backends)
    plans = {p.name: p for p in plan_rules(slos, RuleSettings.from_config(cfg))}
    [fast] = [a for a in plans[NAME].alerts if a.fast]
    assert (fast.factor, fast.long, fast.short, fast.interval) == (FACTOR, "5m", "1m", 10)
    # 99%: 0.03 / 0.01 = 3x, under the 1h/5m page's 13.44x: the slower pairs page first, no fast tier.
    assert not [a for a in plans["llm-inference-databricks-latency-500ms"].alerts if a.fast]


def test_a_ten_percent_tail_pages_within_three_minutes_by_the_burn_rate_maths():
    cfg, group_wait = shipped()
    # 5m window (30 steps) after k tail steps: (100 k + 1 x (30 - k)) / 30,000 > 0.03 -> 99 k > 870
    # -> k = 9; the 1m window (6 steps): (100 k + 6 - k) / 6,000 > 0.03 -> 99 k > 174 -> k = 2.
    samples = 9
    best = samples * STEP + cfg.alerting.fast.for_seconds + group_wait  # 91 s
    worst = best + STEP + cfg.alerting.fast.interval_seconds  # an onset inside a step, an evaluation just missed
    assert (best, worst) == (91, 111) and worst <= 180


def expected_firing() -> list[int]:
    """Instants (from 0) at which the fast page fires, from the raw counts: the tail goes on, so
    every evaluation from the first holding one (no `for:`)."""
    t = traffic()
    good, valid = t.le[6], t.requests
    out = []
    for at in range(int(t.ts[ONSET]) - 60, int(t.ts[-1]) + STEP, STEP):
        g5, v5 = d.window_sum(t, good, at, 300), d.window_sum(t, valid, at, 300)
        g1, v1 = d.window_sum(t, good, at, 60), d.window_sum(t, valid, at, 60)
        if (1 - g5 / v5) / (1 - GOAL) > FACTOR and (1 - g1 / v1) / (1 - GOAL) > FACTOR and v1 / 60 >= 1.0:
            out.append(at)
    return out


def test_the_expected_instants_are_nine_tail_samples_in():
    t = traffic()
    assert expected_firing()[0] == int(t.ts[ONSET + 8]) == ONSET * STEP + 90


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    from tests.conftest import run_opsctl

    work = tmp_path_factory.mktemp("latfast")
    cfg = write_config(work, r.ALERTING_CONFIG + "quality: {rules: {enabled: false}}\n")
    out = work / "rules.yaml"
    result = run_opsctl("--config", str(cfg), "slo", "rules", str(SLO_FILE), "--out", str(out))
    assert result.exit_code == 0, result.output
    return work, cfg, out, yaml.safe_load(out.read_text())


def _burn5(at: int) -> float:
    t = traffic()
    g5, v5 = d.window_sum(t, t.le[6], at, 300), d.window_sum(t, t.requests, at, 300)
    return (1 - g5 / v5) / (1 - GOAL)


def test_prometheus_pages_on_a_ten_percent_tail_at_the_expected_evaluation(generated, tmp_path):
    _, _, _, doc = generated
    [group] = [g for g in doc["groups"] if any(x.get("alert") == "SloFastBurnPage" for x in g["rules"])]
    [rule] = [x for x in group["rules"] if x.get("alert") == "SloFastBurnPage"]
    rules = tmp_path / "fast.yaml"
    rules.write_text(yaml.safe_dump({"groups": [group]}, sort_keys=False, width=1000))
    static = {k: v for k, v in rule["annotations"].items() if "{{" not in v}
    labels = {"slo": NAME, "backend": "databricks", "service": "llm-inference", "severity": "page",
              "category": "latency", "tier": "fast", "long_window": "5m", "short_window": "1m"}
    firing = set(expected_firing())
    t = traffic()
    tests = []
    for at in range(int(t.ts[ONSET]) - 60, min(firing) + 60, STEP):
        exp = []
        if at in firing:
            burn = f"{_burn5(at):.2f}"
            exp.append({"exp_labels": labels, "exp_annotations": {
                **static, "burn_rate": burn,
                "summary": f"databricks: slow answers (latency) at {burn}x over 5m ({NAME} fast page above 30x over 5m and 1m)"}})
        tests.append({"eval_time": f"{at}s", "alertname": "SloFastBurnPage", "exp_alerts": exp})
    test = {"rule_files": [str(rules)], "evaluation_interval": f"{STEP}s",
            "tests": [{"interval": f"{STEP}s", "input_series": r.input_series({"databricks": t}),
                       "alert_rule_test": tests}]}
    path = tmp_path / "latfast.test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False, width=1000))
    result = subprocess.run([require_binary("promtool"), "test", "rules", str(path)], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_in_process_pages_at_the_same_evaluations(generated, tmp_path):
    from opsctl.metrics.embedded import EmbeddedStore
    from opsctl.slo.alerts import AlertEvaluator
    from opsctl.slo.loading import load_slos
    from opsctl.slo.rule_plan import RuleSettings, plan_rules

    _, cfg_path, _, _ = generated
    t = traffic()
    settings = RuleSettings.from_config(load_config_file(cfg_path))
    plans = plan_rules(load_slos([SLO_FILE], {"databricks", "internal"}), settings)
    store = EmbeddedStore.open(tmp_path / "metrics.sqlite", create=True)
    try:
        d.write(store, {"databricks": r.shifted(t, BASE)})
        evaluator = AlertEvaluator(plans, store, settings)
        got = {}
        for at in range(int(t.ts[ONSET]) - 60, int(t.ts[-1]) + STEP, STEP):
            for a in evaluator.evaluate(BASE + at).firing:
                if a.alertname == "SloFastBurnPage":
                    got[at] = (f"{a.burn_rate:.2f}", a.cause)
    finally:
        store.close()
    assert got == {at: (f"{_burn5(at):.2f}", "latency") for at in expected_firing()}


@pytest.mark.parametrize("peak", [500.0, 200_000.0])
def test_no_latency_fast_page_fires_on_a_week_of_clean_traffic(peak):
    from opsctl.metrics import schema, simulator as sim

    cfg, _ = shipped()
    fast = cfg.alerting.fast
    week = 7 * 86400
    result = sim.simulate(BASE - week, BASE, peak_rps=peak, seed=7)
    le_1s = f"le_{schema.LE_LABELS.index('1.0')}"
    worst = {}
    for name, s in result.items():
        good, valid = s.columns[le_1s].astype(float), s.columns["lat_count"].astype(float)

        def rolling(values, steps):
            c = np.concatenate([[0], np.cumsum(values, dtype=np.float64)])
            return c[steps:] - c[:-steps]

        ls, ss = fast.long.seconds // STEP, fast.short.seconds // STEP
        g5, v5 = rolling(good, ls), rolling(valid, ls)
        g1, v1 = rolling(good, ss)[ls - ss:], rolling(valid, ss)[ls - ss:]
        with np.errstate(divide="ignore", invalid="ignore"):
            b5, b1 = (1 - g5 / v5) / (1 - GOAL), (1 - g1 / v1) / (1 - GOAL)
        holds = (b5 > FACTOR) & (b1 > FACTOR) & (v1 / fast.short.seconds >= fast.min_request_rate)
        assert not holds.any(), f"{name}: the latency fast tier fired on clean traffic at {peak:g} requests/s"
        worst[name] = float(np.nanmax(b1))
    assert max(worst.values()) < FACTOR / 4, worst
