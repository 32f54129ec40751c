"""OpenSLO v1 files read beside slo-generator's: the same SLO written in either format gives the same
report (embedded store and a real Prometheus, both checked against the seeded counts) and the same
rules (promtool accepts them); references resolve across files; what has no sound mapping is refused
with its file and key path, every problem at once."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from opsctl.metrics.embedded import EmbeddedStore
from tests.cli.inprocess import invoke
from tests.conftest import REPO, require_binary, write_config
from tests.slo import data as d

END = 1_795_000_000
STEPS = 2 * 8640
AT = "2026-11-18T11:06:40Z"  # END
WINDOWS = {"5m": 300, "30m": 1800, "1h": 3600, "2h": 7200, "6h": 21600, "1d": 86400, "3d": 259200}
PERIOD = 28 * 86400

OK = 'llm_proxy_requests_total{backend="databricks",outcome="ok"}'
ALL = 'llm_proxy_requests_total{backend="databricks"}'
BUCKETS = 'llm_proxy_request_duration_seconds_bucket{backend="internal"}'
ERRORS = 'llm_proxy_requests_total{backend="internal",outcome="server_error"}'
INTERNAL = 'llm_proxy_requests_total{backend="internal"}'
SLI_QUERY = (f"sum(increase({OK}[window])) / sum(increase({ALL}[window]))")

# The same four SLOs in slo-generator's format ...
SLO_GENERATOR = {
    "ratio": ("good_bad_ratio", 0.9999, "databricks", {"filter_good": OK, "filter_valid": ALL}),
    "latency": ("distribution_cut", 0.99, "internal", {"expression": BUCKETS, "threshold_bucket": 0.5}),
    "raw": ("query_sli", 0.999, None, {"expression": SLI_QUERY}),
}


def slo_generator_file(directory, key):
    method, goal, backend, sli = SLO_GENERATOR[key]
    labels = {"service_name": "checkout", **({"backend": backend} if backend else {})}
    doc = {"apiVersion": "sre.google.com/v2", "kind": "ServiceLevelObjective",
           "metadata": {"name": f"twin-{key}", "labels": labels},
           "spec": {"description": key, "backend": "prometheus", "method": method,
                    "service_level_indicator": sli, "goal": goal}}
    (directory / f"{key}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


# ... and in OpenSLO v1, written by hand: an SLI referenced from another file, a DataSource, an inline
# threshold SLI, a raw ratio, and an alert policy that is one of opsctl's own alerts.
OPENSLO = {
    "ratio.yaml": f"""\
apiVersion: openslo/v1
kind: SLO
metadata:
  name: twin-ratio
  labels: {{backend: databricks}}
spec:
  description: ratio
  service: checkout
  indicatorRef: databricks-ok
  budgetingMethod: Occurrences
  timeWindow: [{{duration: 4w, isRolling: true}}]
  objectives: [{{targetPercent: 99.99}}]
  alertPolicies:
    - kind: AlertPolicy
      metadata: {{name: slow-burn}}
      spec:
        conditions: [{{conditionRef: ticket-3d}}]
""",
    "shared.yaml": f"""\
apiVersion: openslo/v1
kind: SLI
metadata: {{name: databricks-ok}}
spec:
  ratioMetric:
    counter: true
    good: {{metricSource: {{metricSourceRef: prom, spec: {{query: '{OK}'}}}}}}
    total: {{metricSource: {{metricSourceRef: prom, spec: {{query: '{ALL}'}}}}}}
---
apiVersion: openslo/v1
kind: DataSource
metadata: {{name: prom}}
spec: {{type: Prometheus}}
---
apiVersion: openslo/v1
kind: AlertCondition
metadata: {{name: ticket-3d}}
spec:
  severity: ticket
  condition: {{kind: burnrate, op: gt, threshold: 0.9333, lookbackWindow: 3d, alertAfter: 3m}}
""",
    "latency.yaml": f"""\
apiVersion: openslo/v1
kind: SLO
metadata:
  name: twin-latency
  labels: {{backend: internal}}
spec:
  description: latency
  service: checkout
  indicator:
    metadata: {{name: internal-fast}}
    spec:
      thresholdMetric: {{metricSource: {{type: Prometheus, spec: {{query: '{BUCKETS}'}}}}}}
  budgetingMethod: Occurrences
  timeWindow: [{{duration: 28d, isRolling: true}}]
  objectives: [{{op: lte, value: 0.5, target: 0.99}}]
""",
    "raw.yaml": f"""\
apiVersion: openslo/v1
kind: SLO
metadata: {{name: twin-raw}}
spec:
  description: raw
  service: checkout
  indicator:
    metadata: {{name: precomputed}}
    spec:
      ratioMetric:
        rawType: success
        raw: {{metricSource: {{type: prometheus, spec: {{query: '{SLI_QUERY}'}}}}}}
  budgetingMethod: Occurrences
  objectives: [{{target: 0.999}}]
""",
}


def write_openslo(directory, names=OPENSLO):
    for name in names:
        (directory / name).write_text(OPENSLO[name])


@pytest.fixture(scope="module")
def traffic():
    return {
        "databricks": d.make_traffic(END, STEPS, 8000, incidents=[(STEPS - 240, STEPS - 1, 0.02)]),
        "internal": d.make_traffic(END, STEPS, 2000, error_share=0.0005, slow=[(STEPS - 900, STEPS - 400)]),
    }


def expected(traffic, key):
    """SLI and burn rates straight from the seeded counts."""
    t = traffic["databricks" if key in ("ratio", "raw") else "internal"]
    good_col = t.le[4] if key == "latency" else t.requests - t.server_errors  # le[4] is the 0.5 s bucket
    goal = SLO_GENERATOR[key][1]

    def ratio(seconds):
        return d.window_sum(t, good_col, END, seconds) / d.window_sum(t, t.requests, END, seconds)

    return {"sli": ratio(PERIOD), "burn": {w: (1 - ratio(s)) / (1 - goal) for w, s in WINDOWS.items()}}


def dirs(tmp_path, keys):
    sg, op = tmp_path / "sg", tmp_path / "openslo"
    sg.mkdir()
    op.mkdir()
    for key in keys:
        slo_generator_file(sg, key)
    write_openslo(op, [f"{k}.yaml" for k in keys] + (["shared.yaml"] if "ratio" in keys else []))
    return sg, op


def report(cfg, directory, *extra):
    result = invoke("--config", cfg, "slo", "report", str(directory), "--at", AT, "-o", "json", *extra)
    assert result.exit_code in (0, 1), result.output
    return {r["name"]: r for r in json.loads(result.stdout)}


def without_file(rows):
    """Every figure, status and note of a report; only the file each SLO came from differs."""
    return {name: {k: v for k, v in row.items() if k != "file"} for name, row in rows.items()}


def check(rows, traffic, keys, rel):
    for key in keys:
        want, got = expected(traffic, key), rows[f"twin-{key}"]
        assert got["sli"] == pytest.approx(want["sli"], rel=rel), key
        for window, value in want["burn"].items():
            assert got["burn_rate"][window] == pytest.approx(value, rel=rel, abs=1e-9), (key, window)


def test_both_formats_give_the_seeded_counts_on_the_embedded_store(tmp_path, traffic):
    keys = ("ratio", "latency")  # the embedded store answers selectors; query_sli needs PromQL
    sg, op = dirs(tmp_path, keys)
    cfg = write_config(tmp_path)
    store = EmbeddedStore.open(tmp_path / "state" / "metrics.sqlite", create=True)
    d.write(store, traffic)
    store.close()
    ours, theirs = report(cfg, op), report(cfg, sg)
    check(ours, traffic, keys, rel=1e-9)
    assert without_file(ours) == without_file(theirs)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory, traffic):
    from tests.conftest import PrometheusServer

    work = tmp_path_factory.mktemp("openslo-prom")
    om = work / "traffic.om"
    om.write_text(d.openmetrics(traffic))
    server = PrometheusServer(work, openmetrics=om)
    yield server
    server.stop()


@pytest.mark.prometheus
def test_both_formats_give_the_seeded_counts_on_a_real_prometheus(tmp_path, traffic, prometheus):
    keys = tuple(SLO_GENERATOR)
    sg, op = dirs(tmp_path, keys)
    cfg = write_config(tmp_path)
    ours = report(cfg, op, "--prometheus-url", prometheus.url)
    theirs = report(cfg, sg, "--prometheus-url", prometheus.url)
    check(ours, traffic, keys, rel=1e-6)
    assert without_file(ours) == without_file(theirs)


@pytest.mark.prometheus
def test_bad_over_total_gives_the_seeded_error_share(tmp_path, traffic, prometheus):
    (tmp_path / "slos").mkdir()
    (tmp_path / "slos" / "bad.yaml").write_text(f"""\
apiVersion: openslo/v1
kind: SLO
metadata: {{name: internal-errors, labels: {{backend: internal}}}}
spec:
  indicator:
    metadata: {{name: internal-5xx}}
    spec:
      ratioMetric:
        counter: true
        bad: {{metricSource: {{type: Prometheus, spec: {{query: '{ERRORS}'}}}}}}
        total: {{metricSource: {{type: Prometheus, spec: {{query: '{INTERNAL}'}}}}}}
  budgetingMethod: Occurrences
  objectives: [{{target: 0.999}}]
""")
    rows = report(write_config(tmp_path), tmp_path / "slos", "--prometheus-url", prometheus.url)
    t = traffic["internal"]
    for window, seconds in WINDOWS.items():
        share = d.window_sum(t, t.server_errors, END, seconds) / d.window_sum(t, t.requests, END, seconds)
        assert rows["internal-errors"]["burn_rate"][window] == pytest.approx(share / 0.001, rel=1e-6), window
    assert rows["internal-errors"]["sli"] == pytest.approx(
        1 - t.server_errors.sum() / t.requests.sum(), rel=1e-9)


def test_both_formats_generate_the_same_rules_and_promtool_accepts_them(tmp_path):
    promtool = require_binary("promtool")
    sg, op = dirs(tmp_path, tuple(SLO_GENERATOR))
    cfg = write_config(tmp_path)
    cfg.write_text(cfg.read_text().replace("service: llm-inference\n", "service: checkout\n", 1))  # the files'
    texts = {}
    for name, directory in (("sg", sg), ("openslo", op)):
        out = tmp_path / f"{name}.yaml"
        result = invoke("--config", cfg, "slo", "rules", str(directory), "--out", out)
        assert result.exit_code == 0, result.output
        check_rules = subprocess.run([promtool, "check", "rules", str(out)], capture_output=True, text=True, timeout=60)
        assert check_rules.returncode == 0, check_rules.stdout + check_rules.stderr
        texts[name] = out.read_text()
    assert yaml.safe_load(texts["openslo"]) == yaml.safe_load(texts["sg"])
    groups = yaml.safe_load(texts["openslo"])["groups"]
    assert {r["labels"]["service"] for g in groups if g["name"].startswith("opsctl-slo-") for r in g["rules"]} == {"checkout"}


def test_an_sli_referenced_from_another_file_resolves_in_any_order(tmp_path):
    from opsctl.slo.loading import load_slos

    _, op = dirs(tmp_path, ("ratio",))
    [slo] = load_slos([op / "shared.yaml", op / "ratio.yaml"], ["databricks"])
    assert (slo.name, slo.filter_good, slo.filter_valid, slo.goal) == ("twin-ratio", OK, ALL, 0.9999)
    assert slo.file == str(op / "ratio.yaml") and slo.source_format == "openslo"
    assert slo.service_name == "checkout" and slo.backend == "databricks"


def test_the_shipped_openslo_examples_are_the_shipped_slos(tmp_path):
    from opsctl.slo.loading import load_slos

    backends = ["internal", "databricks"]
    examples = {s.name: s for s in load_slos([REPO / "slos" / "examples" / "openslo"], backends)}
    shipped = {s.name: s for s in load_slos([REPO / "slos"], backends)}
    ours, theirs = examples["llm-inference-databricks-availability"], shipped["llm-inference-databricks-availability"]
    for attr in ("goal", "backend", "filter_good", "filter_valid", "method", "operators", "kind"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    # OpenSLO requires spec.service: the examples name the shipped config's; the shipped files none.
    assert (ours.service_name, theirs.service_name) == ("llm-inference", None)
    latency, twin = examples["llm-inference-internal-latency-500ms"], shipped["llm-inference-internal-latency-500ms"]
    assert (latency.kind, latency.threshold_seconds, latency.goal, latency.backend) == (
        twin.kind, twin.threshold_seconds, twin.goal, twin.backend)


def test_the_shipped_config_does_not_load_the_examples_twice():
    result = invoke("slo", "validate")
    assert result.exit_code == 0, result.output
    assert "examples" not in result.stdout
    assert len(result.stdout.splitlines()) == 9


BROKEN = """\
apiVersion: openslo/v1
kind: SLO
metadata: {name: broken, labels: {backend: [internal]}}
spec:
  budgetingMethod: Timeslices
  timeWindow: [{duration: 1M, calendar: {startTime: "2026-01-01 00:00:00", timeZone: UTC}}]
  indicatorRef: nowhere
  objectives: [{target: 0.99, timeSliceTarget: 0.9}]
  alertPolicies: [{alertPolicyRef: missing}]
---
apiVersion: openslo/v1
kind: SLO
metadata: {name: broken-sli}
spec:
  budgetingMethod: Occurrences
  timeWindow: [{duration: 30d, isRolling: true}]
  indicator:
    metadata: {name: x}
    spec:
      ratioMetric:
        counter: false
        good: {metricSource: {type: Datadog, spec: {query: 'sum:hits{ok}'}}}
        total: {metricSource: {type: Prometheus, spec: {query: 'x', step: 30}}}
  objectives: [{target: 0.99}]
  colour: blue
---
apiVersion: openslo/v1
kind: SLO
metadata: {name: broken-threshold}
spec:
  budgetingMethod: Occurrences
  indicator:
    metadata: {name: y}
    spec:
      thresholdMetric: {metricSource: {type: Prometheus, spec: {query: 'llm_proxy_request_duration_seconds_count'}}}
  objectives: [{op: gte, value: 0.5, target: 0.99}]
  alertPolicies:
    - kind: AlertPolicy
      metadata: {name: p}
      spec:
        conditions:
          - kind: AlertCondition
            metadata: {name: c}
            spec: {severity: page, condition: {kind: burnrate, op: gt, threshold: 2, lookbackWindow: 1h, alertAfter: 5m}}
"""


def test_every_problem_is_refused_at_once_with_file_and_key_path(tmp_path):
    slos = tmp_path / "slos"
    slos.mkdir()
    path = slos / "broken.yaml"
    path.write_text(BROKEN)
    result = invoke("--config", write_config(tmp_path, slo_dir=slos), "slo", "validate")
    assert result.exit_code == 2, result.output
    err = result.stderr
    one, two, three = (f"{path}: document {i}" for i in (1, 2, 3))
    expected = [
        f"{one}: metadata.labels.backend: must be one string, got ['internal']",
        f"{one}: spec.budgetingMethod: Timeslices counts good time slices",
        f"{one}: spec.timeWindow[0]: calendar-aligned windows are not supported",
        f"{one}: spec.objectives[0].timeSliceTarget: only for Timeslices budgeting",
        f"{one}: spec.indicatorRef: no SLI named 'nowhere'",
        f"{one}: spec.alertPolicies[0].alertPolicyRef: no AlertPolicy named 'missing'",
        f"{two}: spec.colour: unknown key",
        f"{two}: spec.indicator.spec.ratioMetric.total.metricSource.spec.step: unknown key",
        f"{three}: spec.objectives[0].op: a thresholdMetric maps onto a histogram as `op: lte`",
        f"{three}: spec.alertPolicies[0].spec.conditions[0].spec.condition.threshold: 2: opsctl's page alert over 1h"
        " fires at 13.44x",
        f"{three}: spec.alertPolicies[0].spec.conditions[0].spec.condition.alertAfter: 5m: opsctl's page alerts wait 120s",
    ]
    for line in expected:
        assert line in err, (line, err)


def test_a_valid_document_beside_refusals_is_still_checked_for_its_own_problems(tmp_path):
    """The second document's type and counter problems show once its unknown key is gone."""
    slos = tmp_path / "slos"
    slos.mkdir()
    second = BROKEN.split("---\n")[1].replace("  colour: blue\n", "").replace(", step: 30", "")
    (slos / "x.yaml").write_text(second)
    result = invoke("--config", write_config(tmp_path, slo_dir=slos), "slo", "validate")
    assert result.exit_code == 2
    x = slos / "x.yaml"
    assert "timeWindow" not in result.stderr  # 30d is its own period beside slos.period (28d)
    assert f"{x}: spec.indicator.spec.ratioMetric.counter: must be true" in result.stderr
    assert f"{x}: spec.indicator.spec.ratioMetric.good.metricSource.type: opsctl evaluates SLOs over PromQL" in result.stderr


def test_a_promql_problem_is_named_by_the_openslo_key_it_came_from(tmp_path):
    slos = tmp_path / "slos"
    slos.mkdir()
    (slos / "s.yaml").write_text(OPENSLO["latency.yaml"].replace(BUCKETS, "llm_proxy_request_duration_seconds_count"))
    result = invoke("--config", write_config(tmp_path, slo_dir=slos), "slo", "validate")
    assert result.exit_code == 2
    assert (f"{slos / 's.yaml'}: spec.indicator.spec.thresholdMetric.metricSource.spec.query: must select a"
            " histogram's `_bucket` series") in result.stderr


def test_both_formats_refuse_unknown_keys_and_wrong_types_through_one_engine(tmp_path):
    slos = tmp_path / "slos"
    slos.mkdir()
    (slos / "sg.yaml").write_text("""\
apiVersion: sre.google.com/v2
kind: ServiceLevelObjective
metadata: {name: sg, namespace: team-a}
spec:
  backend: prometheus
  method: good_bad_ratio
  goal: 0.99
  description: [not, a, string]
  service_level_indicator:
    filter_good: 'llm_proxy_requests_total{outcome="ok"}'
    filter_valid: 'llm_proxy_requests_total'
""")
    (slos / "os.yaml").write_text(OPENSLO["raw.yaml"].replace("metadata: {name: twin-raw}",
                                                              "metadata: {name: os, namespace: team-a}")
                                  .replace("  description: raw\n", "  description: [raw]\n"))
    result = invoke("--config", write_config(tmp_path, slo_dir=slos), "slo", "validate")
    assert result.exit_code == 2
    for name in ("sg", "os"):
        path = slos / f"{name}.yaml"
        assert f"{path}: metadata.namespace: unknown key (known keys: " in result.stderr, name
        assert f"{path}: spec.description: expected a string, got list" in result.stderr, name
