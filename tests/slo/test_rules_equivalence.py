"""On the same data, the generated rules evaluated by promtool and opsctl's in-process evaluation fire
the same alerts, with the same labels and annotations, at the same minutes; and the in-process
evaluation gives the same answer over the embedded store and over a real Prometheus holding the data.

The data: six hours of noisy traffic on both backends (Poisson requests, binomial failures,
multinomial latency buckets) with three incidents: a 2% vendor 5xx burst (pages, then resolves),
an internal latency regression at 500 ms, and a slow internal availability burn (ticket).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import yaml

from opsctl.config import load_config_file
from opsctl.metrics.embedded import EmbeddedStore
from opsctl.slo.alerts import AlertEvaluator, evaluate_plans
from opsctl.slo.model import load_slos
from opsctl.slo.rules import RuleSettings, plan_rules
from tests.conftest import REPO, run_opsctl, write_config
from tests.slo import data as d
from tests.slo import rules_data as r

MINUTES = 6 * 60
STEPS = MINUTES * 6
BASE = (int(time.time()) - 2 * 86400) // 3600 * 3600  # recent enough for Prometheus' retention
BUCKET_SHARES = {  # probability of each latency bucket (0.05 .. 10 s, +Inf)
    "steady": (0.30, 0.30, 0.20, 0.10, 0.095, 0.003, 0.0015, 0.0004, 0.0001, 0.0, 0.0),
    "slow": (0.10, 0.10, 0.10, 0.10, 0.20, 0.25, 0.149, 0.001, 0.0, 0.0, 0.0),
}


def noisy(rng, rps, error_share, slow_mask) -> d.Traffic:
    requests = rng.poisson(rps * 10, STEPS)
    errors = rng.binomial(requests, error_share)
    le = np.empty((11, STEPS), dtype=np.int64)
    for kind, mask in (("steady", ~slow_mask), ("slow", slow_mask)):
        if mask.any():
            counts = rng.multinomial(requests[mask], BUCKET_SHARES[kind])
            le[:, mask] = np.cumsum(counts, axis=1).T
    return d.Traffic(np.arange(1, STEPS + 1, dtype=np.int64) * 10, requests, errors, le)


def minutes(first, last):
    mask = np.zeros(STEPS, dtype=bool)
    mask[first * 6:last * 6] = True
    return mask


@pytest.fixture(scope="module")
def scenario():
    rng = np.random.default_rng(20261129)
    vendor_errors = np.where(minutes(60, 100), 0.02, 0.00001)
    internal_errors = np.where(minutes(220, 360), 0.0005, 0.00001)
    return {
        "databricks": noisy(rng, 80, vendor_errors, np.zeros(STEPS, dtype=bool)),
        "internal": noisy(rng, 20, internal_errors, minutes(150, 200)),
    }


@pytest.fixture(scope="module")
def setup(tmp_path_factory, scenario):
    work = tmp_path_factory.mktemp("equivalence")
    cfg_path = write_config(work, r.ALERTING_CONFIG)
    cfg = load_config_file(cfg_path)
    settings = RuleSettings.from_config(cfg)
    plans = plan_rules(load_slos([REPO / "slos"], cfg.backends), settings)
    store = EmbeddedStore.open(work / "state" / "metrics.sqlite", create=True)
    d.write(store, {b: r.shifted(t, BASE) for b, t in scenario.items()})
    rules_path = work / "rules.yaml"
    result = run_opsctl("--config", str(cfg_path), "slo", "rules", "--out", str(rules_path))
    assert result.exit_code == 0, result.output
    yield {"work": work, "cfg": cfg_path, "settings": settings, "plans": plans, "store": store,
           "rules": rules_path}
    store.close()


@pytest.fixture(scope="module")
def in_process(setup):
    """minute -> {labels as a sorted tuple: firing alert}, evaluated over the embedded store."""
    out = {}
    evaluator = AlertEvaluator(setup["plans"], setup["store"], setup["settings"])  # remembers past minutes
    for m in range(MINUTES + 1):
        evaluation = evaluator.evaluate(BASE + m * 60)
        out[m] = {tuple(sorted(a.labels.items())): a for a in evaluation.firing}
        setup.setdefault("unknown", {})[m] = evaluation.unknown
    return out


def test_the_incident_window_exercises_pages_tickets_and_resolution(in_process):
    """Guard against a vacuous comparison: alerts of both severities start and stop in the window."""
    page_minutes = [m for m, fs in in_process.items() if any(a.severity == "page" for a in fs.values())]
    ticket_minutes = [m for m, fs in in_process.items() if any(a.severity == "ticket" for a in fs.values())]
    slos = {a.slo for fs in in_process.values() for a in fs.values()}
    assert page_minutes and ticket_minutes
    assert page_minutes[-1] < MINUTES, "a page resolves inside the window"
    assert {"llm-inference-databricks-availability", "llm-inference-internal-latency-500ms",
            "llm-inference-internal-availability", "llm-inference-service-availability"} <= slos
    assert not any(in_process[m] for m in range(0, 60)), "quiet before the first incident"


def test_promtool_fires_the_same_alerts_as_in_process_every_minute(tmp_path, setup, scenario, in_process):
    tests = []
    for m, firing in in_process.items():
        for severity, alertname in r.ALERTNAME.items():
            exp = [
                {"exp_labels": {k: v for k, v in a.labels.items() if k != "alertname"},
                 "exp_annotations": dict(a.annotations)}
                for a in firing.values() if a.severity == severity
            ]
            tests.append({"eval_time": r.minute(m), "alertname": alertname, "exp_alerts": exp})
    result = r.run_promtool_test(tmp_path, setup["rules"], r.input_series(scenario), tests)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory, scenario):
    from tests.conftest import PrometheusServer

    work = tmp_path_factory.mktemp("prometheus")
    om = work / "traffic.om"
    om.write_text(d.openmetrics({b: r.shifted(t, BASE) for b, t in scenario.items()}))
    server = PrometheusServer(work, openmetrics=om)
    yield server
    server.stop()


def test_in_process_over_prometheus_equals_in_process_over_the_embedded_store(setup, in_process, prometheus):
    from opsctl.config import PrometheusSource as Settings
    from opsctl.metrics.prometheus import PrometheusSource

    source = PrometheusSource(Settings(url=prometheus.url, timeout=10, report_deadline=60))
    source.check()
    mismatches = []
    evaluator = AlertEvaluator(setup["plans"], source, setup["settings"])
    for m in range(MINUTES + 1):
        evaluation = evaluator.evaluate(BASE + m * 60)
        got = {tuple(sorted(a.labels.items())): a for a in evaluation.firing}
        want = in_process[m]
        if set(got) != set(want):
            mismatches.append((m, sorted(set(got) ^ set(want))))
            continue
        for key, alert in got.items():
            other = want[key]
            if (alert.burn_rate, alert.short_burn_rate, alert.request_rate, alert.annotations) != (
                    other.burn_rate, other.short_burn_rate, other.request_rate, other.annotations):
                mismatches.append((m, key, alert.burn_rate, other.burn_rate))
        if evaluation.unknown != setup["unknown"][m]:
            mismatches.append((m, "unknown", evaluation.unknown, setup["unknown"][m]))
    assert not mismatches, mismatches[:5]
    # Minute 0 holds only the counters' zero sample: no increase over any window on either side.
    assert len(setup["unknown"][0]) == 9 and not any(setup["unknown"][m] for m in range(1, MINUTES + 1))


def test_a_fresh_evaluation_agrees_with_the_remembering_evaluator(setup, in_process):
    """`evaluate_plans` (no memory, what the CLI and drills' single checks use) at the busiest minutes."""
    busiest = sorted(in_process, key=lambda m: -len(in_process[m]))[:5] + [99, 100, 101, 200, 236]
    for m in busiest:
        evaluation = evaluate_plans(setup["plans"], setup["store"], BASE + m * 60, setup["settings"])
        assert {tuple(sorted(a.labels.items())) for a in evaluation.firing} == set(in_process[m]), m


def test_slo_alerts_cli_over_prometheus_lists_the_in_process_alerts(setup, in_process, prometheus):
    m = max(in_process, key=lambda k: len(in_process[k]))
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(BASE + m * 60))
    result = run_opsctl("--config", str(setup["cfg"]), "slo", "alerts", "--prometheus-url", prometheus.url,
                        "--at", at, "-o", "json")
    assert result.exit_code == 0, result.output
    listed = {tuple(sorted(a["labels"].items())) for a in yaml.safe_load(result.stdout)["firing"]}
    assert listed == set(in_process[m]) and listed
