"""The live quality rules: `promtool test rules` on the generated group, and the in-process
evaluation on the same series, against firing times worked out by hand.

The series (a sample every 10 s from 0, evaluation every minute), both backends at 1,000 answered
requests per step (100 requests/s), 450 prompt tokens, 180 completion tokens and 3 suggestions each:

  - from step 101 on, the vendor (databricks) counts 449 prompt tokens per request (a dropped
    beginning-of-text token);
  - from step 400 on, its answers hold 2.4 suggestions each (a 20% drop).

Settings: window 10m, baseline 1h earlier, at least 50 requests/s, prompt tokens 0.5 for 2m,
suggestions 0.1 for 5m, completion tokens 0.1 for 10m. The noise guard (5 sigma) passes: 60,000
requests a side over 10m against the 20,000 a prompt-token spread of 10 needs (2 x (5 x 10 / 0.5)^2),
3,042 for completion tokens (spread 0.78) and 1,682 for suggestions (0.58).

By hand, prompt tokens: at a minute T (seconds), k = T/10 - 100 of the window's 60 steps count
449, so the vendor's figure is 450 - k/60 and the shift k/60 exceeds 0.5 from k = 31: the first
minute is T = 1320 s (k = 32); `for: 2m` holds it at 22m, 23m and 24m: firing from 24m, value
k/60 = 44/60.
Suggestions: the baseline an hour earlier is 3.0 per answer; now k = T/10 - 399 steps count 2.4,
so the drop is 0.6 k / 60 / 3 = k/300, above 0.1 from k = 31: first minute T = 4320 s (k = 33),
`for: 5m` -> firing from 4620 s = 77m, when k = 60 (capped) and the drop is 0.2.
"""

from __future__ import annotations

import subprocess

import pytest
import yaml

from tests.conftest import require_binary, run_opsctl, write_config

T0 = 1_800_000_000  # on the minute grid
STEPS = 600  # 100 minutes
SETTINGS = """\
quality:
  rules:
    window: 10m
    baseline_offset: 1h
    min_request_rate: 50
    noise_sigmas: 5
    prompt_tokens: {threshold: 0.5, severity: page, for_duration: 2m, spread: 10}
    completion_tokens: {threshold: 0.1, severity: ticket, for_duration: 10m}
    suggestions: {threshold: 0.1, severity: page, for_duration: 5m}
"""
PROMPT_FIRES_AT = 24 * 60
PROMPT_VALUE = 44 / 60
SUGGESTIONS_FIRE_AT = 77 * 60
SUGGESTIONS_VALUE = 0.2


def increments(backend: str) -> dict[str, list[int]]:
    """Per-step increments of each counter (step i ends at i*10 s; step 0 is the zero sample)."""
    prompt = [450_000] * STEPS
    suggestions = [3_000] * STEPS
    if backend == "databricks":
        prompt = [450_000 if i < 101 else 449_000 for i in range(1, STEPS + 1)]
        suggestions = [3_000 if i < 400 else 2_400 for i in range(1, STEPS + 1)]
    return {"requests_ok": [1_000] * STEPS, "prompt_tokens": prompt,
            "completion_tokens": [180_000] * STEPS, "suggestions": suggestions}


def promtool_values(steps: list[int]) -> str:
    total, out = 0, ["0"]
    for x in steps:
        total += x
        out.append(str(total))
    return " ".join(out)


SERIES = {
    "requests_ok": 'llm_proxy_requests_total{{backend="{b}",outcome="ok"}}',
    "prompt_tokens": 'llm_proxy_prompt_tokens_total{{backend="{b}"}}',
    "completion_tokens": 'llm_proxy_completion_tokens_total{{backend="{b}"}}',
    "suggestions": 'llm_proxy_suggestions_total{{backend="{b}"}}',
}


@pytest.fixture
def cfg_path(tmp_path):
    return write_config(tmp_path, SETTINGS)


@pytest.fixture
def plan(cfg_path):
    from opsctl.config import load_config
    from opsctl.quality.rules import plan_quality

    return plan_quality(load_config(cfg_path))


def test_promtool_fires_the_quality_alerts_at_the_minutes_worked_out_by_hand(tmp_path, cfg_path, plan):
    promtool = require_binary("promtool")
    from opsctl.quality.rules import alert_annotations

    rules = tmp_path / "rules.yaml"
    result = run_opsctl("--config", str(cfg_path), "slo", "rules", "--out", str(rules))
    assert result.exit_code == 0, result.stderr
    groups = yaml.safe_load(rules.read_text())["groups"]
    assert groups[-1]["name"] == "opsctl-quality"
    series = [{"series": SERIES[k].format(b=b), "values": promtool_values(v)}
              for b in ("internal", "databricks") for k, v in increments(b).items()]
    by_key = {(a.alertname, a.backend): a for a in plan.alerts}
    shift, drop = by_key[("QualityPromptTokensShift", "databricks")], by_key[("QualitySuggestionsDrop", "databricks")]

    def expect(alert, value):
        labels = {"alertname": alert.alertname, "severity": alert.severity, "backend": alert.backend,
                  "service": "llm-inference", "category": "quality", "signal": alert.signal}
        if alert.reference:
            labels["reference"] = alert.reference
        return {"exp_labels": {k: v for k, v in labels.items() if k != "alertname"},
                "exp_annotations": alert_annotations(plan, alert, value)}

    tests = []
    for minute in (21, 22, 23):
        tests.append({"eval_time": f"{minute}m", "alertname": "QualityPromptTokensShift", "exp_alerts": []})
    tests.append({"eval_time": "24m", "alertname": "QualityPromptTokensShift", "exp_alerts": [expect(shift, PROMPT_VALUE)]})
    for minute in (72, 76):
        tests.append({"eval_time": f"{minute}m", "alertname": "QualitySuggestionsDrop", "exp_alerts": []})
    tests.append({"eval_time": "77m", "alertname": "QualitySuggestionsDrop",
                  "exp_alerts": [expect(drop, SUGGESTIONS_VALUE)]})
    for minute in (30, 99):
        tests.append({"eval_time": f"{minute}m", "alertname": "QualityCompletionTokensDrift", "exp_alerts": []})
    test_file = tmp_path / "quality.test.yaml"
    test_file.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": [
        {"interval": "10s", "input_series": series, "alert_rule_test": tests}]}, sort_keys=False, width=100000))
    run = subprocess.run([promtool, "test", "rules", str(test_file)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


@pytest.fixture
def store(tmp_path):
    from opsctl.metrics.embedded import EmbeddedStore

    s = EmbeddedStore.open(tmp_path / "m.sqlite", create=True)
    for backend in ("internal", "databricks"):
        inc = increments(backend)
        s.write_steps(backend, [T0 + 10 * i for i in range(1, STEPS + 1)],
                      {"req_ok": inc["requests_ok"], "prompt_tokens": inc["prompt_tokens"],
                       "completion_tokens": inc["completion_tokens"], "suggestions": inc["suggestions"]})
    yield s
    s.close()


def test_in_process_the_same_alerts_fire_at_the_same_minutes(plan, store):
    from opsctl.quality.live import first_firing

    first = first_firing(plan, store, [T0 + 60 * m for m in range(1, STEPS // 6 + 1)])
    assert first == {"QualityPromptTokensShift/databricks": T0 + PROMPT_FIRES_AT,
                     "QualitySuggestionsDrop/databricks": T0 + SUGGESTIONS_FIRE_AT}


def test_in_process_values_labels_and_the_page_name_quality(plan, store):
    from opsctl.quality.live import evaluate_quality

    result = evaluate_quality(plan, store, T0 + PROMPT_FIRES_AT)
    [alert] = result.firing
    assert alert.value == pytest.approx(PROMPT_VALUE, abs=1e-12)
    assert alert.labels["category"] == "quality" and alert.labels["reference"] == "internal"
    assert alert.annotations["summary"].startswith("Quality: databricks prompt tokens per request differ")
    assert "availability problem" in alert.annotations["description"]
    assert alert.annotations["runbook_url"].endswith("/scenario-quality-regression.md")


def test_the_minimum_traffic_guard_keeps_the_rules_quiet(tmp_path, store):
    from opsctl.config import load_config
    from opsctl.quality.live import first_firing
    from opsctl.quality.rules import plan_quality

    (tmp_path / "q").mkdir()
    quiet = plan_quality(load_config(write_config(tmp_path / "q", SETTINGS.replace("min_request_rate: 50",
                                                                                     "min_request_rate: 101"))))
    assert first_firing(quiet, store, [T0 + 60 * m for m in range(1, STEPS // 6 + 1)]) == {}


def test_quality_alerts_cli_reports_firing_and_unknown(tmp_path, cfg_path):
    from opsctl.metrics.embedded import EmbeddedStore

    store = EmbeddedStore.open(tmp_path / "state" / "metrics.sqlite", create=True)
    for backend in ("internal", "databricks"):
        inc = increments(backend)
        store.write_steps(backend, [T0 + 10 * i for i in range(1, STEPS + 1)],
                          {"req_ok": inc["requests_ok"], "prompt_tokens": inc["prompt_tokens"]})
    store.close()
    result = run_opsctl("--config", str(cfg_path), "quality", "alerts", "--at", "2027-01-15T08:24:00Z",
                        "-o", "json", "--fail-on", "page")
    assert result.exit_code == 1, result.stderr
    import json

    firing = json.loads(result.stdout)["firing"]
    assert [(a["alertname"], a["backend"]) for a in firing] == [("QualityPromptTokensShift", "databricks")]
    late = run_opsctl("--config", str(cfg_path), "quality", "alerts", "--at", "2027-01-16T08:24:00Z")
    assert late.exit_code == 3 and "no data" in late.stderr


@pytest.mark.slow
def test_on_simulated_traffic_promtool_and_the_in_process_evaluation_fire_the_same_alerts_minute_by_minute(tmp_path):
    """Three hours of simulated production traffic (a quality regression on the vendor in the last
    hour): every minute, Prometheus' rule engine (promtool) fires exactly the alerts, labels and
    rendered values the in-process evaluation fires on the same counts."""
    promtool = require_binary("promtool")
    import numpy as np

    from opsctl.clock import parse_rfc3339
    from opsctl.config import load_config
    from opsctl.metrics import schema
    from opsctl.metrics import simulator as sim
    from opsctl.metrics.embedded import EmbeddedStore
    from opsctl.quality.live import QualityEvaluator
    from opsctl.quality.rules import plan_quality

    cfg_path = write_config(tmp_path, SETTINGS.replace("min_request_rate: 50", "min_request_rate: 20000"))
    plan = plan_quality(load_config(str(cfg_path)))
    start = parse_rfc3339("2026-11-18T14:00:00Z")  # on the minute grid
    minutes = 180
    incident = sim.parse_incident("quality-regression@2026-11-18T16:00:00Z+1h:rate=0.4", sim.DEFAULT_BACKENDS)
    series = sim.simulate(start, start + 60 * minutes, peak_rps=200_000, seed=11, incidents=[incident])
    store = EmbeddedStore.open(tmp_path / "m.sqlite", create=True)
    sim.write_to_store(store, series)
    evaluator = QualityEvaluator(plan, store)
    expected = {m: evaluator.evaluate(start + 60 * m).firing for m in range(1, minutes + 1)}
    store.close()
    assert any(expected.values())  # the regression is caught ...
    assert not any(expected[m] for m in range(1, 121))  # ... and nothing fires before it

    input_series = []
    for name, s in series.items():
        for metric in (schema.REQUESTS, schema.PROMPT_TOKENS, schema.COMPLETION_TOKENS, schema.SUGGESTIONS):
            for own, column in schema.series_columns(metric).items():
                labels = ",".join(f'{k}="{v}"' for k, v in (("backend", name),) + own)
                values = np.concatenate(([0], np.cumsum(s.columns[column]))).astype(np.int64)
                input_series.append({"series": f"{metric}{{{labels}}}", "values": " ".join(map(str, values.tolist()))})
    tests = []
    for m, firing in expected.items():
        for alertname in ("QualityPromptTokensShift", "QualityCompletionTokensDrift", "QualitySuggestionsDrop"):
            tests.append({"eval_time": f"{m}m", "alertname": alertname, "exp_alerts": [
                {"exp_labels": {k: v for k, v in a.labels.items() if k != "alertname"}, "exp_annotations": a.annotations}
                for a in firing if a.alertname == alertname]})
    rules = tmp_path / "rules.yaml"
    assert run_opsctl("--config", str(cfg_path), "quality", "rules", "--out", str(rules)).exit_code == 0
    test_file = tmp_path / "sim.test.yaml"
    test_file.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": [
        {"interval": "10s", "input_series": input_series, "alert_rule_test": tests}]}, sort_keys=False, width=10**7))
    run = subprocess.run([promtool, "test", "rules", str(test_file)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


# ---------------------------------------------------------------------------------------------
# The minimum traffic from sampling noise: a rule below it is suppressed, and says why

NOISY = SETTINGS.replace(", spread: 10}", "}")  # the shipped spread of prompt tokens: 350 per request


def test_the_prompt_rule_is_suppressed_below_its_noise_minimum_in_the_rules_too(tmp_path):
    """100 requests/s a side over 10m is 60,000 requests: a 0.5-token threshold at 350 tokens of
    spread per request needs 2 x (5 x 350 / 0.5)^2 = 24,500,000 a side. promtool fires nothing where
    the spread of 10 above fired at 24m; the suggestions rule (spread 0.58) still fires at 77m."""
    promtool = require_binary("promtool")
    cfg = write_config(tmp_path, NOISY)
    rules = tmp_path / "rules.yaml"
    assert run_opsctl("--config", str(cfg), "quality", "rules", "--out", str(rules)).exit_code == 0
    series = [{"series": SERIES[k].format(b=b), "values": promtool_values(v)}
              for b in ("internal", "databricks") for k, v in increments(b).items()]
    tests = [{"eval_time": f"{m}m", "alertname": "QualityPromptTokensShift", "exp_alerts": []} for m in (24, 60, 99)]
    test_file = tmp_path / "quality.test.yaml"
    test_file.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": [
        {"interval": "10s", "input_series": series, "alert_rule_test": tests}]}, sort_keys=False, width=100000))
    run = subprocess.run([promtool, "test", "rules", str(test_file)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    text = rules.read_text()
    assert "<= 8.163265306e-08" in text  # (0.5 / (5 x 350))^2, the largest 1/n1 + 1/n2 it accepts


def test_quality_alerts_and_slo_alerts_say_a_rule_is_suppressed_and_why(tmp_path):
    import json

    from opsctl.metrics.embedded import EmbeddedStore

    cfg = write_config(tmp_path, NOISY)
    store = EmbeddedStore.open(tmp_path / "state" / "metrics.sqlite", create=True)
    for backend in ("internal", "databricks"):
        inc = increments(backend)
        store.write_steps(backend, [T0 + 10 * i for i in range(1, STEPS + 1)],
                          {"req_ok": inc["requests_ok"], "prompt_tokens": inc["prompt_tokens"],
                           "completion_tokens": inc["completion_tokens"], "suggestions": inc["suggestions"],
                           "lat_count": inc["requests_ok"]})
    store.close()
    at = "2027-01-15T08:24:00Z"
    quality = run_opsctl("--config", str(cfg), "quality", "alerts", "--at", at, "-o", "json")
    assert quality.exit_code == 0, quality.stderr
    data = json.loads(quality.stdout)
    assert data["firing"] == []  # the shift is there (44/60 of a token), the traffic is not
    [why] = [s for s in data["suppressed"] if s["alertname"] == "QualityPromptTokensShift"]
    assert why["backend"] == "databricks" and why["signal"] == "prompt_tokens"
    assert "sampling noise" in why["reason"] and "24,500,000 on each side" in why["reason"]
    assert "has 60,000 (databricks) and 60,000 (internal)" in why["reason"]
    assert not [s for s in data["suppressed"] if s["signal"] != "prompt_tokens"]  # the others have enough
    table = run_opsctl("--config", str(cfg), "quality", "alerts", "--at", at)
    assert "suppressed  QualityPromptTokensShift databricks: sampling noise" in table.stdout
    slo = run_opsctl("--config", str(cfg), "slo", "alerts", "--at", at, "-o", "json")
    listed = json.loads(slo.stdout)["quality"]
    assert listed["suppressed"] == data["suppressed"] and listed["firing"] == []
    late = run_opsctl("--config", str(cfg), "slo", "alerts", "--at", "2027-01-15T09:17:00Z", "-o", "json")
    fired = json.loads(late.stdout)["quality"]["firing"]
    assert [(q["alertname"], q["backend"]) for q in fired] == [("QualitySuggestionsDrop", "databricks")]
