"""On the same data, the generated rules evaluated by promtool and opsctl's in-process evaluation fire
the same alerts, with the same labels and annotations, at the same minutes; and the in-process
evaluation gives the same answer over the embedded store and over a real Prometheus holding the data.

The data comes from the traffic simulator (opsctl.metrics.simulator): six hours of both backends with
Poisson requests, client errors, 429s, timeouts and lognormal latency, and four incidents: a 2% vendor
5xx burst (pages, then resolves), a latency spike on the internal pods (the 500 ms SLO), lost GPU
capacity (internal availability) and a slow vendor burn at 5x (ticket). The embedded store gets it
with `write_to_store`, Prometheus with `export_openmetrics` + promtool backfill, and promtool's unit
test reads its input series from that same OpenMetrics text.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict

import pytest
import yaml

from opsctl.clock import parse_rfc3339
from opsctl.config import load_config_file
from opsctl.metrics import simulator as sim
from opsctl.metrics.embedded import EmbeddedStore
from opsctl.slo.alerts import AlertEvaluator, evaluate_plans
from opsctl.slo.loading import load_slos
from opsctl.slo.rule_plan import RuleSettings, plan_rules
from tests.conftest import REPO, run_opsctl, write_config
from tests.slo import rules_data as r

MINUTES = 6 * 60
BASE = int(parse_rfc3339("2025-06-03T12:00:00Z"))  # a Tuesday, 8 am US Eastern: the morning ramp
BACKENDS = {"databricks": "vendor", "internal": "internal"}
RULE_METRICS = ("llm_proxy_requests_total", "llm_proxy_request_duration_seconds_bucket",
                "llm_proxy_request_duration_seconds_count")


def incidents():
    def at(minute, length, cls, **options):
        return cls(start=BASE + minute * 60, end=BASE + (minute + length) * 60, **options)

    return [
        at(60, 40, sim.Vendor5xx, backend="databricks", rate=0.02),
        at(150, 50, sim.LatencySpike, backend="internal", factor=4.0),
        at(215, 25, sim.GpuCapacityLoss, backend="internal", rate=0.005, factor=1.0),
        at(180, 180, sim.Vendor5xx, backend="databricks", rate=0.0005),
    ]


@pytest.fixture(scope="module")
def scenario():
    return sim.simulate(BASE, BASE + MINUTES * 60, backends=BACKENDS, peak_rps=200, seed=11, incidents=incidents())


@pytest.fixture(scope="module")
def openmetrics(tmp_path_factory, scenario):
    path = tmp_path_factory.mktemp("openmetrics") / "traffic.om"
    sim.export_openmetrics(scenario, str(path))
    return path


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+) (\d+)$")


def promtool_series(openmetrics_path) -> list[dict]:
    """The exporter's samples of the metrics the rules read, as promtool input (time 0 = BASE)."""
    values: dict[str, list[int]] = defaultdict(list)
    times: dict[str, list[int]] = defaultdict(list)
    for line in openmetrics_path.read_text().splitlines():
        m = _SAMPLE.match(line)
        if not m or m.group(1) not in RULE_METRICS:
            continue
        key = m.group(1) + (m.group(2) or "")
        values[key].append(int(m.group(3)))
        times[key].append(int(m.group(4)))
    out = []
    for key, ts in times.items():
        assert ts == list(range(BASE, BASE + 10 * len(ts), 10)), f"{key}: not a sample every 10 s from BASE"
        out.append({"series": key, "values": r.encode(values[key])})
    assert len(out) == 2 * (6 + 11 + 1)  # per backend: the 6 outcomes, 11 buckets and the count
    return out


@pytest.fixture(scope="module")
def setup(tmp_path_factory, scenario):
    work = tmp_path_factory.mktemp("equivalence")
    cfg_path = write_config(work, r.ALERTING_CONFIG)
    cfg = load_config_file(cfg_path)
    settings = RuleSettings.from_config(cfg)
    plans = plan_rules(load_slos([REPO / "slos"], cfg.backends), settings)
    store = EmbeddedStore.open(work / "state" / "metrics.sqlite", create=True)
    sim.write_to_store(store, scenario)
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


def test_promtool_fires_the_same_alerts_as_in_process_every_minute(tmp_path, setup, openmetrics, in_process):
    # Every minute: promtool evaluates the rules at each minute of the six hours whichever minutes
    # are checked (about 60 s of its CPU), so checking all of them costs nothing more.
    tests = []
    for m, firing in in_process.items():
        for severity, alertname in r.ALERTNAME.items():
            exp = [
                {"exp_labels": {k: v for k, v in a.labels.items() if k != "alertname"},
                 "exp_annotations": dict(a.annotations)}
                for a in firing.values() if a.alertname == alertname  # the fast tier: tests/slo/test_latency_fast.py
            ]
            tests.append({"eval_time": r.minute(m), "alertname": alertname, "exp_alerts": exp})
    result = r.run_promtool_test(tmp_path, setup["rules"], promtool_series(openmetrics), tests)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory, openmetrics):
    from tests.conftest import PrometheusServer

    server = PrometheusServer(tmp_path_factory.mktemp("prometheus"), openmetrics=openmetrics)
    yield server
    server.stop()


def compared_minutes(in_process) -> list[int]:
    """The minutes the Prometheus-backed evaluation is compared at: minute 0 (no increase yet over
    any window), every minute whose firing alerts differ from the minute before, and that minute
    before (a page or ticket starting, resolving, or another SLO joining), and every tenth minute
    (burn rates and annotations while alerts hold or nothing fires). Every evaluation of a sample
    is still exact: the evaluator works out each `for:` from the minutes before it, asked afresh.
    Comparing all 361 minutes cost about 80 s of CPU (Prometheus 67 s), these 92 about 45 s. Checked
    by breaking the Prometheus source once each: instant queries 10 s early, and the 2h window
    asked as 7190 s (only the 1d/2h tickets read it) both fail here as over every minute."""
    changed = {m for m in range(1, MINUTES + 1) if set(in_process[m]) != set(in_process[m - 1])}
    return sorted({0, *range(0, MINUTES + 1, 10), *changed, *(m - 1 for m in changed)})


def test_in_process_over_prometheus_equals_in_process_over_the_embedded_store(setup, in_process, prometheus):
    """At the minutes `compared_minutes` picks: the same alerts, burn rates, request rates and
    annotations, and the same SLOs without data, over Prometheus as over the embedded store."""
    from opsctl.config import PrometheusSource as Settings
    from opsctl.metrics.prometheus import PrometheusSource

    source = PrometheusSource(Settings(url=prometheus.url, timeout=10, report_deadline=60))
    source.check()
    mismatches = []
    evaluator = AlertEvaluator(setup["plans"], source, setup["settings"])
    minutes = compared_minutes(in_process)
    # Not vacuous: pages and tickets start and resolve among them, each beside the minute before.
    started = {in_process[m][k].severity for m in minutes if m for k in set(in_process[m]) - set(in_process[m - 1])}
    resolved = {in_process[m - 1][k].severity for m in minutes if m
                for k in set(in_process[m - 1]) - set(in_process[m])}
    assert started == resolved == {"page", "ticket"}
    assert all(m - 1 in minutes for m in minutes if m and set(in_process[m]) != set(in_process[m - 1]))
    for m in minutes:
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
        if evaluation.absent:  # asked as absent() itself: the series are there all along
            mismatches.append((m, "absent", [a.slo for a in evaluation.absent]))
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
