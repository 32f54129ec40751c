"""Windows that scale with the period (issue #24 item 5): a 7-day SLO keeps the 28-day table's
factors (13.44 / 5.6 / 2.8 / 0.9333) over windows, `for:` and a recorded base window a quarter as
long, rounded to the minute as Pyrra rounds them; it sits beside a 28-day SLO in one config, and
promtool fires its alerts at the minutes those windows predict (worked out by hand below).
"""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
import yaml

from tests.conftest import REPO, require_binary, run_opsctl, write_config
from tests.slo import rules_data as r

SEVEN_DAYS = """\
apiVersion: pyrra.dev/v1alpha1
kind: ServiceLevelObjective
metadata:
  name: internal-errors-7d
  labels: {backend: internal}
spec:
  target: "99.99"
  window: 1w
  description: internal server errors over a week
  indicator:
    ratio:
      errors: {metric: 'llm_proxy_requests_total{backend="internal",outcome="server_error"}'}
      total: {metric: 'llm_proxy_requests_total{backend="internal"}'}
"""
WEEK = "internal-errors-7d"
MONTH = "llm-inference-internal-availability"  # slos/internal-availability.yaml, the config's 28d


@pytest.fixture(scope="module")
def rules(tmp_path_factory):
    work = tmp_path_factory.mktemp("period-windows")
    slos = work / "slos"
    slos.mkdir()
    (slos / "week.yaml").write_text(SEVEN_DAYS)
    (slos / "internal-availability.yaml").write_text((REPO / "slos" / "internal-availability.yaml").read_text())
    cfg = write_config(work, r.ALERTING_CONFIG + "quality: {rules: {enabled: false}}\n", slo_dir=slos)
    out = work / "rules.yaml"
    result = run_opsctl("--config", str(cfg), "slo", "rules", "--out", str(out))
    assert result.exit_code == 0, result.output
    return out, yaml.safe_load(out.read_text())


def burn_alerts(doc, slo):
    """(severity, long, short) -> (factor written in the rule, `for:`), the standard tier's."""
    out = {}
    for group in doc["groups"]:
        for rule in group["rules"]:
            labels = rule.get("labels", {})
            if "alert" in rule and labels.get("slo") == slo and "long_window" in labels and "tier" not in labels:
                factor = float(re.search(r"> ([0-9.e+-]+)\n", rule["expr"]).group(1))
                out[(labels["severity"], labels["long_window"], labels["short_window"])] = (factor, rule.get("for"))
    return out


def test_a_7_day_slo_keeps_the_28_day_factors_over_windows_a_quarter_as_long(rules):
    _, doc = rules
    # By hand, 7d / 28d = 1/4 of each window, rounded to the minute (halves up, as Go's Round):
    # 1h -> 15m, 5m -> 1m15s -> 1m; 6h -> 1h30m, 30m -> 7m30s -> 8m; 1d -> 6h, 2h -> 30m;
    # 3d -> 18h, 6h -> 1h30m. Factors of the 28-day table: 0.02 x 672 h / 1 h = 13.44,
    # 0.05 x 112 = 5.6, 0.1 x 28 = 2.8, 0.1 x 28 / 3 = 0.9333333333 (10 digits, as written).
    # for: page 2m / 4 = 30s -> 1m; ticket 15m / 4 = 3m45s -> 4m.
    assert burn_alerts(doc, WEEK) == {
        ("page", "15m", "1m"): (13.44, "1m"),
        ("page", "1h30m", "8m"): (5.6, "1m"),
        ("ticket", "6h", "30m"): (2.8, "4m"),
        ("ticket", "18h", "1h30m"): (0.9333333333, "4m"),
    }
    # The 28-day SLO beside it keeps the table as written.
    assert burn_alerts(doc, MONTH) == {
        ("page", "1h", "5m"): (13.44, "2m"),
        ("page", "6h", "30m"): (5.6, "2m"),
        ("ticket", "1d", "2h"): (2.8, "15m"),
        ("ticket", "3d", "6h"): (0.9333333333, "15m"),
    }
    records = {(rule["record"], rule["labels"]["slo"]) for g in doc["groups"] for rule in g["rules"] if "record" in rule}
    # Base window: 5m / 4 -> 1m (a multiple of the 1m evaluation interval); 6h, 18h and 7d derived from it.
    assert ("slo:sli_valid:increase1m", WEEK) in records and ("slo:sli_valid:increase5m", MONTH) in records
    assert ("slo:sli_error:ratio_rate7d", WEEK) in records and ("slo:sli_error:ratio_rate28d", MONTH) in records
    expr = {rule["record"]: rule["expr"] for g in doc["groups"] for rule in g["rules"]
            if "record" in rule and rule["labels"]["slo"] == WEEK}
    assert "slo:sli_good:increase1m" in expr["slo:sli_error:ratio_rate18h"]
    assert "[64799s]" in expr["slo:sli_error:ratio_rate18h"]  # 18 h, one second short
    assert "[1m]" in expr["slo:sli_valid:rate1m"] or "[60s]" in expr["slo:sli_valid:rate1m"]


def test_rules_for_7_and_28_day_slos_side_by_side_pass_promtool_check(rules):
    path, _ = rules
    result = subprocess.run([require_binary("promtool"), "check", "rules", str(path)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def firing(minute, slo, severity, long, short, burn):
    labels = {"slo": slo, "backend": "internal", "service": "llm-inference", "severity": severity,
              "category": "availability", "long_window": long, "short_window": short}
    return r.Firing(minute, slo, severity, long, short, burn, labels)


FACTOR = {(WEEK, "15m"): "13.44", (WEEK, "1h30m"): "5.6", (WEEK, "6h"): "2.8", (WEEK, "18h"): "0.9333",
          (MONTH, "1h"): "13.44", (MONTH, "6h"): "5.6"}


@pytest.mark.slow
def test_a_7_day_slos_alerts_fire_at_the_minutes_its_scaled_windows_predict(tmp_path, rules):
    path, doc = rules
    # 10 requests/s (100 per 10 s step) on internal, healthy for 2 h, then 1 failure per step (100x
    # the 0.01% budget). n failing steps at onset + 10 n s; an evaluation every minute.
    onset, steps = 120, 720 + 90
    errors = np.zeros(steps, dtype=int)
    errors[720:] = 1
    data = {"internal": r.traffic(np.full(steps, 100), errors)}
    # Page 15m/1m at 13.44x: 15m holds 9000 requests, n / 9000 > 0.001344 -> n >= 13; 1m: n >= 1.
    #   holds from minute 3 (n = 18), `for: 1m` -> fires at onset + 4 with n = 24: burn 24/9000/1e-4.
    # Page 1h30m/8m at 5.6x: n / 54000 > 0.00056 -> n >= 31; 8m: n / 4800 > 0.00056 -> n >= 3.
    #   holds from minute 6 (n = 36), fires at onset + 7.
    # Ticket 18h/1h30m at 0.9333x: 18h from the 1m increases recorded since minute 1, all the data:
    #   n / (600 (120 + m)) > 0.00009333 -> m = 2 (12 > 6.83; m = 1: 6 < 6.78); 1h30m: n / 54000 -> n >= 6.
    #   holds from minute 2, `for: 4m` -> fires at onset + 6 with n = 36: burn 36 / 75600 / 1e-4.
    # Ticket 6h/30m at 2.8x: the 6h window holds all 720 + n steps: n > 0.028 (720 + n) -> n >= 21;
    #   30m: n / 18000 > 0.00028 -> n >= 6; holds from minute 4 (n = 24), fires at onset + 8.
    # The 28-day SLO on the same traffic pages at onset + 10 (6h/30m, tests/slo/test_rules_promtool.py)
    # and tickets no earlier than onset + 15 (`for: 15m`).
    week_page = lambda m: firing(onset + m, WEEK, "page", "15m", "1m", 6 * m / 9000 / 1e-4)  # noqa: E731
    week_page2 = lambda m: firing(onset + m, WEEK, "page", "1h30m", "8m", 6 * m / 54000 / 1e-4)  # noqa: E731
    week_ticket = lambda m: firing(onset + m, WEEK, "ticket", "18h", "1h30m",  # noqa: E731
                                   6 * m / (600 * (onset + m)) / 1e-4)
    week_ticket2 = lambda m: firing(onset + m, WEEK, "ticket", "6h", "30m", 6 * m / (100 * (720 + 6 * m)) / 1e-4)  # noqa: E731
    expected = {
        ("page", onset + 3): [],
        ("page", onset + 4): [week_page(4)],
        ("page", onset + 6): [week_page(6)],
        ("page", onset + 7): [week_page(7), week_page2(7)],
        ("page", onset + 10): [week_page(10), week_page2(10),
                               firing(onset + 10, MONTH, "page", "6h", "30m", 60 / 78000 / 1e-4)],
        ("ticket", onset + 5): [],
        ("ticket", onset + 6): [week_ticket(6)],
        ("ticket", onset + 7): [week_ticket(7)],
        ("ticket", onset + 8): [week_ticket(8), week_ticket2(8)],
        ("ticket", onset + 10): [week_ticket(10), week_ticket2(10)],
    }
    static = r.static_annotations(doc)
    tests = [{"eval_time": r.minute(m), "alertname": r.ALERTNAME[sev], "exp_alerts": [
        {"exp_labels": f.labels,
         "exp_annotations": {**static[(f.slo, f.long, f.short)], "summary": r.summary(f, FACTOR[(f.slo, f.long)]),
                             "burn_rate": f"{f.burn:.2f}", "cause": "server_error"}} for f in alerts]}
        for (sev, m), alerts in expected.items()]
    result = r.run_promtool_test(tmp_path, path, r.input_series(data), tests)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


OPENSLO_7D = """\
apiVersion: openslo/v1
kind: SLO
metadata: {name: internal-week, labels: {backend: internal}}
spec:
  budgetingMethod: Occurrences
  timeWindow: [{duration: 7d, isRolling: true}]
  indicator:
    metadata: {name: internal-week}
    spec:
      ratioMetric:
        counter: true
        good: {metricSource: {type: Prometheus, spec: {query: 'llm_proxy_requests_total{backend="internal",outcome="ok"}'}}}
        total: {metricSource: {type: Prometheus, spec: {query: 'llm_proxy_requests_total{backend="internal"}'}}}
  objectives: [{target: 0.9999}]
"""


def test_in_process_alerts_of_an_openslo_7_day_slo_fire_at_the_same_minutes(tmp_path):
    """`slo alerts`' in-process evaluation of a 7-day OpenSLO SLO (over the embedded store) pages at
    onset + 4 (15m/1m) and tickets at onset + 6 (18h/1h30m), as worked out above for promtool."""
    from opsctl.config import load_config_file
    from opsctl.metrics.embedded import EmbeddedStore
    from opsctl.slo.alerts import AlertEvaluator
    from opsctl.slo.loading import load_slos
    from opsctl.slo.rule_plan import RuleSettings, plan_rules
    from tests.slo import data as d

    slos = tmp_path / "slos"
    slos.mkdir()
    (slos / "week.yaml").write_text(OPENSLO_7D)
    cfg = load_config_file(write_config(tmp_path, r.ALERTING_CONFIG, slo_dir=slos))
    settings = RuleSettings.from_config(cfg)
    plans = plan_rules(load_slos([slos], cfg.backends, config=cfg), settings)
    assert [(a.long, a.short, a.factor, a.for_seconds) for a in plans[0].alerts if not a.fast] == [
        ("15m", "1m", 13.44, 60), ("1h30m", "8m", 5.6, 60), ("6h", "30m", 2.8, 240), ("18h", "1h30m", 0.9333333333, 240)]
    onset, steps, base = 120, 720 + 90, 1_700_000_400  # a whole minute: the evaluation grid
    errors = np.zeros(steps, dtype=int)
    errors[720:] = 1
    store = EmbeddedStore.open(tmp_path / "metrics.sqlite", create=True)
    try:
        d.write(store, {"internal": r.shifted(r.traffic(np.full(steps, 100), errors), base)})
        evaluator = AlertEvaluator(plans, store, settings)
        firing = {m: sorted((a.severity, a.long_window) for a in evaluator.evaluate(base + m * 60).firing
                            if a.tier != "fast") for m in range(onset, onset + 11)}
    finally:
        store.close()
    first = {}
    for m, alerts in firing.items():
        for key in alerts:
            first.setdefault(key, m)
    assert first == {("page", "15m"): onset + 4, ("page", "1h30m"): onset + 7,
                     ("ticket", "18h"): onset + 6, ("ticket", "6h"): onset + 8}
