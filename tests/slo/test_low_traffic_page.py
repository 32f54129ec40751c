"""Low traffic never silences a page (issue 38 item 2): below `alerting.page.min_request_rate` a
burn-rate pair still holds when its short window counts `min_bad_events` bad events (the workbook's
advice for low-traffic services: a minimum count of bad events, not of requests).

The case: a 99.9% availability SLO at 0.5 requests/s (5 requests a 10 s step), clean for 400
minutes, then 1 request in 10 failing (every other step one 5xx): a 100x burn. By hand, with the
shipped page pair 1h/5m at 13.44x, `for: 2m`, minimum 1 request/s or 10 bad events over 5m:
- each minute after the onset adds 3 bad requests; the 1h window holds 1,800 requests;
- 1h: 3k / 1800 > 13.44 x 0.001 -> k > 8.06 -> k = 9 (27 bad, 1.5%);
- 5m: 150 requests; 3k > 10 bad events from k = 4 and its ratio 10% from then;
- so the pair holds from minute 409 and fires at 411: 11 minutes after the onset (< 15).
The 6h/30m pair (5.6x over 10,800 requests: 61 bad, k = 21) fires later, at minute 423.
Without the bad-event clause (min_bad_events: 0) the SLO never pages (0.5 < 1 request/s).
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from tests.conftest import REPO, run_opsctl, write_config
from tests.slo import data as d
from tests.slo import rules_data as r

NAME = "llm-inference-databricks-availability-999"
GOAL = 0.999
PER_STEP = 5  # 0.5 requests/s
ONSET_MINUTE, END_MINUTE = 400, 430
BASE = 1_795_000_000 // 86400 * 86400
QUIET = "quality: {rules: {enabled: false}}\n"
FIRST_PAGE_MINUTE = 411  # by hand, above
SIX_HOUR_MINUTE = 423  # 6h/30m: 61 bad from k = 21 (minute 421), + for: 2m


def traffic() -> d.Traffic:
    steps = END_MINUTE * 6
    requests = np.full(steps, PER_STEP, dtype=np.int64)
    errors = np.zeros(steps, dtype=np.int64)
    errors[ONSET_MINUTE * 6::2] = 1  # the step ending at ts = (i + 1) x 10 s: 3 a minute
    return r.traffic(requests, errors)


def slo_file(tmp_path):
    doc = yaml.safe_load((REPO / "slos" / "databricks-availability.yaml").read_text())
    doc["metadata"]["name"] = NAME
    doc["spec"]["goal"] = GOAL
    doc["spec"]["description"] = "99.9% of requests to Databricks succeed"
    path = tmp_path / "slo.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def by_hand_minutes():
    """From the raw counts: the minutes the 1h/5m page pair holds (the traffic clause as stated)."""
    t = traffic()
    good, valid = t.requests - t.server_errors, t.requests
    held = []
    for m in range(ONSET_MINUTE - 5, END_MINUTE + 1):
        at = m * 60
        g1, v1 = d.window_sum(t, good, at, 3600), d.window_sum(t, valid, at, 3600)
        g5, v5 = d.window_sum(t, good, at, 300), d.window_sum(t, valid, at, 300)
        enough = v5 / 300 >= 1.0 or v5 - g5 >= 10
        if (v1 - g1) / v1 / (1 - GOAL) > 13.44 and (v5 - g5) / v5 / (1 - GOAL) > 13.44 and enough:
            held.append(m)
    return held


def test_the_pair_holds_from_nine_minutes_after_the_onset():
    held = by_hand_minutes()
    assert held[0] == FIRST_PAGE_MINUTE - 2 and held == list(range(held[0], END_MINUTE + 1))


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    work = tmp_path_factory.mktemp("lowtraffic")
    cfg = write_config(work, r.ALERTING_CONFIG + QUIET)
    slo = slo_file(work)
    out = work / "rules.yaml"
    result = run_opsctl("--config", str(cfg), "slo", "rules", str(slo), "--out", str(out))
    assert result.exit_code == 0, result.output
    return work, cfg, slo, out


def _in_process(cfg_path, slo, store):
    from opsctl.config import load_config_file
    from opsctl.slo.alerts import AlertEvaluator
    from opsctl.slo.loading import load_slos
    from opsctl.slo.rule_plan import RuleSettings, plan_rules

    settings = RuleSettings.from_config(load_config_file(cfg_path))
    evaluator = AlertEvaluator(plan_rules(load_slos([slo], {"databricks", "internal"}), settings), store, settings)
    return {m: [a for a in evaluator.evaluate(BASE + m * 60).firing if a.alertname == "SloBurnRatePage"]
            for m in range(ONSET_MINUTE - 5, END_MINUTE + 1)}


def test_in_process_pages_eleven_minutes_after_the_onset_and_prometheus_agrees(generated, tmp_path):
    from opsctl.metrics.embedded import EmbeddedStore

    work, cfg_path, slo, rules = generated
    store = EmbeddedStore.open(tmp_path / "m.sqlite", create=True)
    try:
        d.write(store, {"databricks": r.shifted(traffic(), BASE)})
        got = _in_process(cfg_path, slo, store)
    finally:
        store.close()
    firing = {m: {(a.long_window, a.short_window) for a in alerts} for m, alerts in got.items() if alerts}
    assert min(firing) == FIRST_PAGE_MINUTE and min(firing) - ONSET_MINUTE == 11 <= 15
    assert firing[FIRST_PAGE_MINUTE] == {("1h", "5m")}
    assert min(m for m, pairs in firing.items() if ("6h", "30m") in pairs) == SIX_HOUR_MINUTE
    # promtool (Prometheus' rule engine) fires the same alerts, labels and annotations every minute.
    tests = [{"eval_time": r.minute(m), "alertname": "SloBurnRatePage", "exp_alerts": [
        {"exp_labels": {k: v for k, v in a.labels.items() if k != "alertname"}, "exp_annotations": dict(a.annotations)}
        for a in alerts]} for m, alerts in got.items()]
    result = r.run_promtool_test(tmp_path, rules, r.input_series({"databricks": traffic()}), tests)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_without_the_bad_event_clause_the_slo_never_pages(tmp_path):
    cfg = write_config(tmp_path, r.ALERTING_CONFIG.replace("min_bad_events: 10", "min_bad_events: 0") + QUIET)
    out = tmp_path / "rules.yaml"
    result = run_opsctl("--config", str(cfg), "slo", "rules", str(slo_file(tmp_path)), "--out", str(out))
    assert result.exit_code == 0, result.output
    tests = [{"eval_time": r.minute(m), "alertname": "SloBurnRatePage", "exp_alerts": []}
             for m in range(ONSET_MINUTE, END_MINUTE + 1)]
    check = r.run_promtool_test(tmp_path, out, r.input_series({"databricks": traffic()}), tests)
    assert check.returncode == 0, check.stdout[-4000:]
