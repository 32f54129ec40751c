"""The fast-burn tier against its own failover: `keep_firing_for` keeps SloFastBurnPage firing after
the moved traffic empties its 1m window, long enough for the slower page pair to fire, then resolves.

The traffic: databricks at 10 requests/s, clean; at ONSET half its requests fail (5xx); FAILOVER
steps later the automation moves all its traffic away (its counters stop growing, the series stay).
The fast tier's condition ends once the 1m window holds no databricks request (the minimum-traffic
guard); before this change the alert resolved at that evaluation and the episode started its restore
hold-down. The expected instants come from the raw per-step counts and a forward replay of
Prometheus' alert states (documented semantics of `for:` and `keep_firing_for`), written here apart
from opsctl's evaluator (which walks back from an instant). Checked three ways on the same samples:
`promtool test rules` (Prometheus' own rule engine) on the generated rules, every 10 s; opsctl's
in-process evaluator over the embedded store; and over a real Prometheus backfilled with them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from opsctl.clock import parse_rfc3339
from tests.conftest import REPO, write_config
from tests.slo import data as d
from tests.slo import rules_data as r

NAME = "llm-inference-databricks-availability"
GOAL = 0.9999
STEP = 10
FAST_FACTOR, FAST_MIN_RATE = 300.0, 1.0  # the shipped alerting.fast defaults (opsctl/config/alerting.py)
PAGE_FOR, EVALUATION = 120, 60  # r.ALERTING_CONFIG: page for_duration 2m, evaluation_interval 1m
KEEP = PAGE_FOR + EVALUATION  # what the rule must say: the slower page's for: plus one evaluation
STEPS = 240  # 40 minutes of 10 s steps
ONSET, FAILOVER = 120, 124  # step indices (the step ending at ts[i] = (i + 1) * 10 s)
BASE = int(parse_rfc3339("2025-06-03T12:00:00Z"))  # where the embedded store and Prometheus hold it
CONFIG = r.ALERTING_CONFIG + "quality: {rules: {enabled: false}}\n"
# The second case: the fast tier with `for: 1m`, and after the failover one step of databricks
# traffic (a probe, still half failing) whose 6 holding evaluations are fewer than `for:` needs.
HOLD = 60
CONFIG_HOLD = r.ALERTING_CONFIG + f"  fast: {{for_duration: {HOLD}s}}\nquality: {{rules: {{enabled: false}}}}\n"
PROBE = 150


def traffic(probe: bool = False) -> d.Traffic:
    requests = np.full(STEPS, 100, dtype=np.int64)
    errors = np.zeros(STEPS, dtype=np.int64)
    failover = FAILOVER + 16 if probe else FAILOVER  # with for: 1m, fired before its failover
    errors[ONSET:failover] = 50
    requests[failover:] = 0
    errors[failover:] = 0
    if probe:
        requests[PROBE], errors[PROBE] = 100, 50
    return r.traffic(requests, errors)


CASES = {"failover": (CONFIG, False, 0), "probe": (CONFIG_HOLD, True, HOLD)}


def condition(t: d.Traffic, at: int) -> tuple[bool, float]:
    """The fast pair at instant `at` (seconds from 0), from the raw counts; and its 5m burn."""
    good, valid = t.requests - t.server_errors, t.requests
    g5, v5 = d.window_sum(t, good, at, 300), d.window_sum(t, valid, at, 300)
    g1, v1 = d.window_sum(t, good, at, 60), d.window_sum(t, valid, at, 60)
    if not v5 or not v1:
        return False, math.nan
    burn5, burn1 = (1 - g5 / v5) / (1 - GOAL), (1 - g1 / v1) / (1 - GOAL)
    return burn5 > FAST_FACTOR and burn1 > FAST_FACTOR and v1 / 60 >= FAST_MIN_RATE, burn5


def replay(t: d.Traffic, keep: int, hold: int = 0) -> dict[int, float]:
    """Instant -> the value the firing alert shows, replaying Prometheus' states forward, one
    evaluation every STEP: pending while the condition holds under `for:`; firing from then; a firing
    alert whose condition fails keeps firing while less than `keep` has passed since the first failing
    evaluation, the value of its last holding one; holding again resets that (no new `for:`)."""
    firing: dict[int, float] = {}
    state, active_at, failing_since, value = "inactive", 0, None, math.nan
    for at in range(0, STEPS * STEP + 1, STEP):
        holds, burn = condition(t, at)
        if holds:
            failing_since, value = None, burn
            if state == "inactive":
                state, active_at = "pending", at
            if state == "pending" and at - active_at >= hold:
                state = "firing"
        elif state == "firing":
            failing_since = at if failing_since is None else failing_since
            if at - failing_since >= keep:
                state = "inactive"
        else:
            state = "inactive"
        if state == "firing":
            firing[at] = value
    return firing


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return _generate(tmp_path_factory, CONFIG)


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, tmp_path_factory):
    """(generated rules, traffic, the fast tier's for:) of each case."""
    config, probe, hold = CASES[request.param]
    return _generate(tmp_path_factory, config), traffic(probe), hold


def _generate(tmp_path_factory, config: str):
    from tests.conftest import run_opsctl

    work = tmp_path_factory.mktemp("keep")
    cfg = write_config(work, config)
    out = work / "rules.yaml"
    result = run_opsctl("--config", str(cfg), "slo", "rules", str(REPO / "slos" / "databricks-availability.yaml"),
                        "--out", str(out))
    assert result.exit_code == 0, result.output
    return work, cfg, out, yaml.safe_load(out.read_text())


def fast_rule(doc: dict) -> dict:
    [rule] = [x for g in doc["groups"] for x in g["rules"] if x.get("alert") == "SloFastBurnPage"]
    return rule


def test_only_the_fast_tier_keeps_firing_for_the_slower_page_for_plus_one_evaluation(generated):
    import subprocess

    from tests.conftest import require_binary

    _, _, path, doc = generated
    kept = {x["alert"]: x["keep_firing_for"] for g in doc["groups"] for x in g["rules"] if "keep_firing_for" in x}
    assert kept == {"SloFastBurnPage": "3m"}  # 2m + 1m; the slower pairs and the absent alert keep none
    check = subprocess.run([require_binary("promtool"), "check", "rules", str(path)], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_expected_timeline_is_the_flap_without_keep_firing_for():
    """Guard against a vacuous test: with no keep_firing_for the page resolves 60 s after the
    failover (the last databricks step leaves the 1m window), long before the slower page's
    `for:` plus an evaluation; with it, KEEP later."""
    t = traffic()
    failover_at = int(t.ts[FAILOVER - 1])  # the last step with databricks traffic ends here
    without, with_keep = replay(t, 0), replay(t, KEEP)
    # 50% failing: over 5m, 50n / 3000 > 0.03 -> n >= 2 failing steps; the first is the step ONSET.
    first = int(t.ts[ONSET + 1])
    assert min(without) == min(with_keep) == first
    # The 1m window still holds a step of traffic (100 requests >= 60) until failover_at + 50 s.
    assert max(without) == failover_at + 50
    assert max(with_keep) == failover_at + 50 + math.ceil(KEEP / STEP) * STEP
    assert sorted(with_keep) == list(range(first, max(with_keep) + STEP, STEP))


@pytest.mark.parametrize("page_for, interval, period_days, keep", [
    ("2m", "1m", 28, 120 + 60),  # the table's own period: for: 2m as written, plus the 1m evaluation
    ("2m", "1m", 30, 120 + 60),  # 28-30 days keep the table's windows and for:
    ("2m", "1m", 7, 60 + 60),  # 2m x 7/28 = 30 s, rounded half up to 1m (never under min(for, 1m)): 1m + 1m
    ("5m", "30s", 28, 300 + 30),
    ("8m", "1m", 7, 120 + 60),  # 8m x 7/28 = 2m
])
def test_the_keep_scales_with_the_slower_page_for_and_its_evaluation(tmp_path, page_for, interval, period_days,
                                                                     keep):
    from dataclasses import replace

    from opsctl.config import load_config_file
    from opsctl.slo.loading import load_slos
    from opsctl.slo.rule_plan import RuleSettings, plan_rules

    text = r.ALERTING_CONFIG.replace("page: {for_duration: 2m", f"page: {{for_duration: {page_for}").replace(
        "evaluation_interval: 1m", f"evaluation_interval: {interval}")
    assert f"for_duration: {page_for}" in text and f"evaluation_interval: {interval}" in text
    settings = RuleSettings.from_config(load_config_file(write_config(tmp_path, text)))
    settings = replace(settings, period_seconds=period_days * 86400)
    [plan] = plan_rules(load_slos([REPO / "slos" / "databricks-availability.yaml"], {"databricks"}), settings)
    assert {a.alertname: a.keep_firing_seconds for a in plan.alerts if a.keep_firing_seconds} == {
        "SloFastBurnPage": keep}


def _promtool_tests(doc: dict, expected: dict[int, float], instants) -> list[dict]:
    rule = fast_rule(doc)
    static = {k: v for k, v in rule["annotations"].items() if "{{" not in v}
    labels = {"slo": NAME, "backend": "databricks", "service": "llm-inference", "severity": "page",
              "category": "availability", "tier": "fast", "long_window": "5m", "short_window": "1m"}
    tests = []
    for at in instants:
        exp = []
        if at in expected:
            burn = f"{expected[at]:.2f}"
            exp.append({"exp_labels": labels, "exp_annotations": {
                **static, "burn_rate": burn, "cause": "server_error",
                "summary": (f"databricks: {r.CAUSE_WORDS['server_error']} at {burn}x over 5m ({NAME} fast page"
                            " above 300x over 5m and 1m)")}})
        tests.append({"eval_time": f"{at}s", "alertname": "SloFastBurnPage", "exp_alerts": exp})
    return tests


def test_the_probe_case_exercises_a_condition_holding_again_while_kept():
    """By hand: with for: 1m the alert fires at its 7th holding evaluation; the failover at step 140
    ends the condition at 1460 s; the probe step (ending 1510 s) holds it 1510-1560 s, under the 7
    evaluations a new firing needs, yet resets the keep: it resolves 180 s after 1570 s, not 1460 s."""
    firing = replay(traffic(True), KEEP, HOLD)
    assert min(firing) == 1220 + HOLD and max(firing) == 1570 + KEEP - STEP
    assert sorted(firing) == list(range(1280, 1750, STEP))
    assert max(replay(traffic(True), 0, HOLD)) == 1450  # without keep_firing_for: resolved at 1460 s


def test_prometheus_keeps_the_fast_page_firing_after_its_failover_then_resolves(case, tmp_path):
    """promtool evaluates the fast tier's group every 10 s (its interval) over the same samples."""
    (_, _, path, doc), t, hold = case
    fast_only = {"groups": [g for g in doc["groups"] if any(x.get("alert") == "SloFastBurnPage" for x in g["rules"])]}
    rules = tmp_path / "fast.yaml"
    rules.write_text(yaml.safe_dump(fast_only, sort_keys=False, width=1000))
    expected = replay(t, KEEP, hold)
    instants = range(int(t.ts[ONSET]) - 60, max(expected) + 120, STEP)
    test = {"rule_files": [str(rules)], "evaluation_interval": f"{STEP}s",
            "tests": [{"interval": f"{STEP}s", "input_series": r.input_series({"databricks": t}),
                       "alert_rule_test": _promtool_tests(doc, expected, instants)}]}
    path = tmp_path / "keep.test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False, width=1000))
    import subprocess

    from tests.conftest import require_binary

    result = subprocess.run([require_binary("promtool"), "test", "rules", str(path)], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    # Counted in evaluations: kept firing 18 evaluations after its condition's last (3m / 10 s).
    kept = [at for at in expected if at > max(at for at in expected if condition(t, at)[0])]
    assert len(kept) == KEEP // STEP


def _in_process(source, cfg_path, t: d.Traffic) -> dict[int, tuple[float, str, str]]:
    """Instant (from 0) -> (burn, cause, summary) of SloFastBurnPage, evaluated every 10 s at BASE + t."""
    from opsctl.config import load_config_file
    from opsctl.slo.alerts import AlertEvaluator
    from opsctl.slo.loading import load_slos
    from opsctl.slo.rule_plan import RuleSettings, plan_rules

    settings = RuleSettings.from_config(load_config_file(cfg_path))
    plans = plan_rules(load_slos([REPO / "slos" / "databricks-availability.yaml"], {"databricks", "internal"}),
                       settings)
    evaluator = AlertEvaluator(plans, source, settings)
    out = {}
    for at in range(int(t.ts[ONSET]) - 60, int(t.ts[-1]) + STEP, STEP):
        for a in evaluator.evaluate(BASE + at).firing:
            if a.alertname == "SloFastBurnPage":
                out[at] = (a.burn_rate, a.cause, a.annotations["summary"])
    return out


def _expected_in_process(t: d.Traffic, hold: int = 0) -> dict[int, tuple[str, str]]:
    return {at: (f"{burn:.2f}", "server_error") for at, burn in replay(t, KEEP, hold).items()}


def test_in_process_fires_and_keeps_at_the_same_evaluations_in_each_case(case, tmp_path):
    from opsctl.metrics.embedded import EmbeddedStore

    (_, cfg_path, _, _), t, hold = case
    store = EmbeddedStore.open(tmp_path / "metrics.sqlite", create=True)
    try:
        d.write(store, {"databricks": r.shifted(t, BASE)})
        got = _in_process(store, cfg_path, t)
        assert {at: (f"{b:.2f}", c) for at, (b, c, _) in got.items()} == _expected_in_process(t, hold)
    finally:
        store.close()


def test_in_process_keeps_the_fast_page_firing_at_the_same_evaluations(generated, tmp_path):
    from opsctl.metrics.embedded import EmbeddedStore
    from opsctl.slo.alerts import evaluate_alerts
    from opsctl.slo.loading import load_slos
    from opsctl.slo.rule_plan import RuleSettings
    from opsctl.config import load_config_file

    _, cfg_path, _, _ = generated
    t = traffic()
    store = EmbeddedStore.open(tmp_path / "metrics.sqlite", create=True)
    try:
        d.write(store, {"databricks": r.shifted(t, BASE)})
        got = _in_process(store, cfg_path, t)
        assert {at: (f"{b:.2f}", c) for at, (b, c, _) in got.items()} == _expected_in_process(t)
        # The kept alert shows its condition's last value, as Prometheus renders it once.
        last = max(at for at in got if condition(t, at)[0])
        assert {got[at] for at in got if at > last} == {got[last]}
        # A fresh evaluation (what `slo alerts` and a drill's single check use) agrees at the edges.
        settings = RuleSettings.from_config(load_config_file(cfg_path))
        slos = load_slos([REPO / "slos" / "databricks-availability.yaml"], {"databricks", "internal"})
        for at, fires in ((max(got), True), (max(got) + STEP, False), (last + STEP, True)):
            fast = [a for a in evaluate_alerts(slos, store, BASE + at, settings).firing
                    if a.alertname == "SloFastBurnPage"]
            assert bool(fast) is fires, at
    finally:
        store.close()


@pytest.mark.slow
def test_in_process_over_a_real_prometheus_keeps_it_firing_at_the_same_evaluations(generated, prometheus_factory,
                                                                                    tmp_path):
    from opsctl.config import PrometheusSource as Settings
    from opsctl.metrics.prometheus import PrometheusSource

    _, cfg_path, _, _ = generated
    t = traffic()
    openmetrics = tmp_path / "traffic.om"
    openmetrics.write_text(d.openmetrics({"databricks": r.shifted(t, BASE)}))
    server = prometheus_factory(openmetrics=openmetrics)
    source = PrometheusSource(Settings(url=server.url, timeout=10, report_deadline=60))
    source.check()
    got = _in_process(source, cfg_path, t)
    assert {at: (f"{b:.2f}", c) for at, (b, c, _) in got.items()} == _expected_in_process(t)


@pytest.mark.slow
def test_the_shipped_auth_throttling_drill_hands_its_fast_page_to_the_slower_one_without_a_restore_hold_down(
        tmp_path):
    """End to end with the shipped config and policies (the embedded drill runs the alerts through
    the policy engine `opsctl serve` runs). Before keep_firing_for the fast page resolved a minute
    after its own failover, the episode noted the resolve and started the restore hold-down, and the
    1h/5m page firing later noted its cancelling: three notes. Now the fast page is still firing
    when the slower page fires, so the episode writes only its opening note."""
    import json
    import sqlite3

    from tests.drills.conftest import CHAOS, DrillEnv

    env = DrillEnv(tmp_path)
    result = env.run("drill", "run", str(CHAOS / "auth-throttling.yaml"), "-o", "json")
    assert result.exit_code == 0, result.output
    timeline = [e for e in json.loads(result.stdout)["timeline"] if e["kind"] == "alert"]
    slo = "llm-inference-databricks-availability"
    [fast_fired] = [e["offset"] for e in timeline if e["message"].startswith(f"FIRING SloFastBurnPage {slo} ")]
    [slow_fired] = [e["offset"] for e in timeline if e["message"].startswith(f"FIRING SloBurnRatePage {slo} 1h/5m")]
    fast_resolved = [e["offset"] for e in timeline if e["message"] == f"resolved page {slo} 5m/1m"]
    assert fast_fired < slow_fired and all(t > slow_fired for t in fast_resolved), timeline
    with sqlite3.connect(env.run_dir() / "automation.sqlite") as conn:
        rows = conn.execute("SELECT episode, event_key, action FROM actions ORDER BY id").fetchall()
    # the episode's own actions, then only the canary restore's looks (automation.restore is set in the
    # shipped config, docs/decisions/0250: keyed by no alert, never a note of a resolve or a cancel)
    assert [a for _, _, a in rows[:4]] == ["failover", "page", "ticket", "note"], rows
    assert all(a == "restore" and key is None for _, key, a in rows[4:]), rows
    assert not any(key and key.endswith(":resolved") for _, key, _ in rows), rows
