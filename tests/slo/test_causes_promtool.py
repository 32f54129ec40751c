"""Causes, the fast-burn tier and absent metrics in the generated rules, checked by `promtool test
rules` against figures worked out from the raw per-step counts (tests/slo/rules_data.py's oracle
for the burn-rate pairs, the dominant cause and the fast tier computed here from the same counts).

The traffic: databricks at 10 requests/s. From minute 60 to 120 the vendor's auth layer answers 4 in
100 requests 401 (4% bad, cause auth); from minute 120 on it answers 6 in 100 with a 5xx and still 1
in 100 with a 401 (7% bad, cause server_error once a window holds enough of the later minutes). A
429 is the vendor's throttling, cause capacity since shape B (docs/design.md), not auth: the data
holds only 401s, so the figures below are those of the auth cause alone. The alert keeps its labels while its cause flips: only the annotations change.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from tests.conftest import REPO, write_config
from tests.slo import rules_data as r

HOUR = 360  # steps
NAME = "llm-inference-databricks-availability"
GOAL = 0.9999
FAST_FACTOR, FAST_MIN_RATE = 300.0, 1.0  # the shipped alerting.fast defaults (opsctl/config/alerting.py)
CAUSE_ORDER = ("server_error", "timeout", "auth", "capacity")  # ties: the first (never met below)


def outcomes(steps: int) -> dict[str, np.ndarray]:
    out = {o: np.zeros(steps, dtype=np.int64) for o in ("throttled", "auth_error", "server_error")}
    out["auth_error"][HOUR:2 * HOUR] = 4
    out["server_error"][2 * HOUR:] = 6
    out["auth_error"][2 * HOUR:] = 1
    return out


def series(data, bad: dict[str, np.ndarray]) -> list[dict]:
    """The oracle's input series, its one 5xx counter split into the outcomes the proxy records."""
    out = [s for s in r.input_series(data) if 'outcome="server_error"' not in s["series"]]
    for outcome, per_step in bad.items():
        out.append({"series": f'llm_proxy_requests_total{{backend="databricks",outcome="{outcome}"}}',
                    "values": r.encode(np.concatenate([[0], np.cumsum(per_step)]))})
    return out


def window(values: np.ndarray, ts: np.ndarray, minute: int, seconds: int) -> int:
    t = minute * 60
    return int(values[(ts > t - seconds) & (ts <= t)].sum())


def dominant(bad: dict[str, np.ndarray], ts: np.ndarray, minute: int, seconds: int) -> str:
    counts = {"server_error": window(bad["server_error"], ts, minute, seconds), "timeout": 0,
              "auth": window(bad["auth_error"], ts, minute, seconds),
              "capacity": window(bad["throttled"], ts, minute, seconds)}
    top = max(counts.values())
    assert list(counts.values()).count(top) == 1, f"a tie at minute {minute}: the test data must avoid one"
    return next(c for c in CAUSE_ORDER if counts[c] == top)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    from tests.conftest import run_opsctl

    work = tmp_path_factory.mktemp("causes")
    cfg = write_config(work, r.ALERTING_CONFIG + "quality: {rules: {enabled: false}}\n")
    out = work / "rules.yaml"
    result = run_opsctl("--config", str(cfg), "slo", "rules", str(REPO / "slos" / "databricks-availability.yaml"),
                        "--out", str(out))
    assert result.exit_code == 0, result.output
    steps = 3 * HOUR
    bad = outcomes(steps)
    all_bad = sum(bad.values())
    data = {"databricks": r.traffic(np.full(steps, 100), all_bad)}
    return work, out, yaml.safe_load(out.read_text()), data, bad


def test_the_page_names_the_dominant_cause_over_its_short_window_and_keeps_its_labels(scenario, tmp_path):
    work, path, doc, data, bad = scenario
    ts = data["databricks"].ts
    minutes = range(55, 3 * 60 + 1)
    expected = r.expected_alerts(data, [r.slo("databricks-availability")], minutes)

    def cause_for(f):
        return dominant(bad, ts, f.minute, {"5m": 300, "30m": 1800, "2h": 7200, "6h": 21600}[f.short])

    tests = r.alert_tests(expected, doc, ("page",), cause_for=cause_for)
    result = r.run_promtool_test(tmp_path, path, series(data, bad), tests)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    pages = {(m, f.long): cause_for(f) for m, fs in expected.items() for f in fs if f.severity == "page"}
    # By hand: 1h/5m holds once 4n/36000 > 0.001344 (n >= 13 failing steps: minute 63), pages at 65
    # with `for: 2m`, naming auth. After minute 120 the last 5m holds k later steps (6 5xx and one 429
    # each) and 30 - k earlier ones (4 auth each): 6k > 4 (30 - k) + k -> k >= 14, so 5xx dominates
    # from minute 123 (k = 18), while the alert keeps firing with the same labels.
    assert min(m for m, w in pages if w == "1h") == 65
    assert pages[(65, "1h")] == "auth" and pages[(122, "1h")] == "auth" and pages[(123, "1h")] == "server_error"
    # the 30m window of the 6h/30m page flips later: 6k > 4 (180 - k) + k -> k >= 81 steps, minute 134
    assert pages[(133, "6h")] == "auth" and pages[(134, "6h")] == "server_error"


def test_the_fast_tier_pages_at_the_first_evaluation_past_its_factor_with_the_cause(scenario, tmp_path):
    work, path, doc, data, bad = scenario
    t = data["databricks"]
    good, valid = t.requests - t.server_errors, t.requests
    [rule] = [x for g in doc["groups"] for x in g["rules"] if x.get("alert") == "SloFastBurnPage"]
    static = {k: v for k, v in rule["annotations"].items() if "{{" not in v}
    tests, fired = [], []
    for m in range(55, 3 * 60 + 1):
        g5, v5 = window(good, t.ts, m, 300), window(valid, t.ts, m, 300)
        g1, v1 = window(good, t.ts, m, 60), window(valid, t.ts, m, 60)
        burn5, burn1 = (1 - g5 / v5) / (1 - GOAL), (1 - g1 / v1) / (1 - GOAL)
        holds = burn5 > FAST_FACTOR and burn1 > FAST_FACTOR and v1 / 60 >= FAST_MIN_RATE  # for: 0s
        exp = []
        if holds:
            fired.append(m)
            cause = dominant(bad, t.ts, m, 60)
            exp.append({"exp_labels": {"slo": NAME, "backend": "databricks", "service": "llm-inference",
                                       "severity": "page", "category": "availability", "tier": "fast",
                                       "long_window": "5m", "short_window": "1m"},
                        "exp_annotations": {**static, "burn_rate": f"{burn5:.2f}", "cause": cause, "summary": (
                            f"databricks: {r.CAUSE_WORDS[cause]} at {burn5:.2f}x over 5m ({NAME} fast page above"
                            f" 300x over 5m and 1m)")}})
        tests.append({"eval_time": f"{m}m", "alertname": "SloFastBurnPage", "exp_alerts": exp})
    result = r.run_promtool_test(tmp_path, path, series(data, bad), tests)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    # By hand: 4% bad from minute 60; over 5m, 4n / 3000 > 0.03 -> n >= 23 failing steps: minute 64
    # (24 steps), four minutes before the 1h/5m page (65) with its `for:`, and it never stops.
    assert fired[0] == 64 and fired == list(range(64, 3 * 60 + 1))


def test_absent_metrics_alert_after_the_lookback_and_its_for(tmp_path):
    from tests.conftest import run_opsctl

    cfg = write_config(tmp_path, r.ALERTING_CONFIG + "quality: {rules: {enabled: false}}\n")
    out = tmp_path / "rules.yaml"
    result = run_opsctl("--config", str(cfg), "slo", "rules", str(REPO / "slos" / "databricks-availability.yaml"),
                        "--out", str(out))
    assert result.exit_code == 0, result.output
    data = {"databricks": r.traffic(np.full(180, 100))}  # 30 minutes, then the proxy stops exporting
    selector = 'llm_proxy_requests_total{backend="databricks",outcome=~"ok|auth_error|throttled|server_error|timeout"}'
    labels = {"slo": NAME, "backend": "databricks", "service": "llm-inference", "severity": "page",
              "category": "absent"}
    doc = yaml.safe_load(out.read_text())
    [rule] = [x for g in doc["groups"] for x in g["rules"] if x.get("alert") == "SloMetricsAbsent"]
    assert rule["expr"] == f"absent({selector})" and rule["for"] == "10m"
    # By hand: the last sample is at 30m; absent() finds it within its 5m lookback up to 35m, so the
    # condition holds from 36m and the alert fires 10 minutes later, at 46m.
    tests = [{"eval_time": f"{m}m", "alertname": "SloMetricsAbsent",
              "exp_alerts": [{"exp_labels": labels, "exp_annotations": rule["annotations"]}] if m >= 46 else []}
             for m in (30, 35, 36, 45, 46, 60)]
    result = r.run_promtool_test(tmp_path, out, r.input_series(data), tests)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


# ---------------------------------------------------------------------------------------------
# In-process (`opsctl slo alerts`): the same alerts, causes and texts over the embedded store


def _settings(tmp_path):
    from opsctl.config import load_config_file
    from opsctl.slo.rule_plan import RuleSettings

    return RuleSettings.from_config(load_config_file(write_config(tmp_path, r.ALERTING_CONFIG)))


def _store(tmp_path, data, bad):
    from opsctl.metrics.embedded import EmbeddedStore

    t = data["databricks"]
    store = EmbeddedStore.open(tmp_path / "metrics.sqlite", create=True)
    columns = {"req_ok": t.requests - t.server_errors, **{f"req_{o}": v for o, v in bad.items()},
               "lat_count": t.requests, **{f"le_{i}": t.le[i] for i in range(t.le.shape[0])}}
    store.write_steps("databricks", t.ts.tolist(), columns, mode="replace")
    return store


def test_in_process_alerts_name_the_same_causes_as_the_rules(scenario, tmp_path):
    from opsctl.slo.alerts import evaluate_alerts
    from opsctl.slo.loading import load_slos

    _, _, _, data, bad = scenario
    ts = data["databricks"].ts
    store = _store(tmp_path, data, bad)
    slos = load_slos([REPO / "slos" / "databricks-availability.yaml"], {"databricks", "internal"})
    settings = _settings(tmp_path)
    expected = r.expected_alerts(data, [r.slo("databricks-availability")], range(55, 181))
    try:
        for m in (64, 65, 122, 123, 133, 134, 180):
            got = evaluate_alerts(slos, store, m * 60, settings).firing
            pages = {(a.long_window, a.cause, a.annotations["summary"]) for a in got
                     if a.alertname == "SloBurnRatePage"}
            want = set()
            for f in expected[m]:
                if f.severity == "page":
                    cause = dominant(bad, ts, m, {"5m": 300, "30m": 1800}[f.short])
                    want.add((f.long, cause, r.summary(f, r.FACTOR_TEXT[f.long], cause)))
            assert pages == want, m
            fast = [a for a in got if a.alertname == "SloFastBurnPage"]
            assert [(a.cause, a.labels["tier"], a.category) for a in fast] == [(dominant(bad, ts, m, 60), "fast",
                                                                                "availability")], m
    finally:
        store.close()


def test_in_process_absent_metrics_fire_at_the_same_minute_as_the_rule(tmp_path):
    from opsctl.metrics.embedded import EmbeddedStore
    from opsctl.slo.alerts import evaluate_alerts
    from opsctl.slo.loading import load_slos

    t = r.traffic(np.full(180, 100))  # 30 minutes, then nothing
    store = EmbeddedStore.open(tmp_path / "metrics.sqlite", create=True)
    store.write_steps("databricks", t.ts.tolist(), {"req_ok": t.requests, "lat_count": t.requests}, mode="replace")
    slos = load_slos([REPO / "slos" / "databricks-availability.yaml"], {"databricks", "internal"})
    settings = _settings(tmp_path)
    try:
        fired = {m: [a.to_dict() for a in evaluate_alerts(slos, store, m * 60, settings).absent]
                 for m in (30, 36, 45, 46, 60)}
    finally:
        store.close()
    assert [m for m, alerts in fired.items() if alerts] == [46, 60]  # as promtool found above
    [alert] = fired[46]
    assert alert["alertname"] == "SloMetricsAbsent" and alert["cause"] == "absent"
    assert alert["labels"]["category"] == "absent" and alert["labels"]["slo"] == NAME
    assert alert["annotations"]["summary"].startswith("databricks: metrics absent: no series of")
