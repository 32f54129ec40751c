"""SLO files as the other Prometheus SLO tools write them, read from the SLO dirs and computed on a
real Prometheus: a Sloth service file and a Sloth CRD, Pyrra ratio, latency and bool_gauge SLOs
with a grouping, OpenSLO as its own examples write it, slo-generator's subquery placeholder. Each
figure equals the tool's own PromQL written here by hand (each window, to 1e-9); what cannot be
mapped is refused with one line naming the feature; a query answering several series is refused
with its file and key, never one series taken.

The files are written afresh for these tests in the forms the tools document; one seeded
Prometheus serves the whole module."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from datetime import datetime, timezone

import numpy as np
import pytest

from tests.cli.inprocess import invoke
from tests.conftest import write_config
from tests.slo import data as d

pytestmark = pytest.mark.prometheus

END = 1_795_000_000
STEPS = 2 * 8640
AT = "2026-11-18T11:06:40Z"  # END
WINDOWS = {"5m": 300, "30m": 1800, "1h": 3600, "2h": 7200, "6h": 21600, "1d": 86400, "3d": 259200}
PERIOD = 28 * 86400
DOWN = (STEPS - 200, STEPS - 150)  # steps where the internal backend's up gauge reads 0

REQ = "llm_proxy_requests_total"
BUCKET = "llm_proxy_request_duration_seconds_bucket"
COUNT = "llm_proxy_request_duration_seconds_count"
UP = "llm_proxy_backend_up"


def gauge_lines(traffic) -> list[str]:
    lines = [f"# TYPE {UP} gauge"]
    for backend, t in traffic.items():
        up = np.ones(len(t.ts), dtype=np.int64)
        if backend == "internal":
            up[DOWN[0]:DOWN[1] + 1] = 0
        lines.extend(f'{UP}{{backend="{backend}"}} {int(v)} {int(s)}' for s, v in zip(t.ts, up))
    return lines


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    from tests.conftest import PrometheusServer

    traffic = {
        "internal": d.make_traffic(END, STEPS, 2000, error_share=0.0005, slow=[(STEPS - 900, STEPS - 400)],
                                   incidents=[(STEPS - 60, STEPS - 1, 0.01)]),
        "databricks": d.make_traffic(END, STEPS, 8000, incidents=[(STEPS - 2000, STEPS - 1700, 0.002)]),
    }
    work = tmp_path_factory.mktemp("peer-formats")
    text = d.openmetrics(traffic).removesuffix("# EOF\n") + "\n".join(gauge_lines(traffic)) + "\n# EOF\n"
    (work / "traffic.om").write_text(text)
    server = PrometheusServer(work, openmetrics=work / "traffic.om")
    yield server
    server.stop()


def promql(url: str, expr: str) -> float | None:
    """One instant query at AT, as a person would type it into Prometheus."""
    at = int(datetime.fromisoformat(AT.replace("Z", "+00:00")).timestamp())
    body = urllib.parse.urlencode({"query": expr, "time": at}).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query", data=body, timeout=30) as response:
        result = json.loads(response.read())["data"]["result"]
    assert len(result) <= 1, (expr, result)
    return float(result[0]["value"][1]) if result else None


def report(tmp_path, prometheus, files: dict[str, str], *extra, code=(0, 1)):
    slos = tmp_path / "slos"
    slos.mkdir(exist_ok=True)
    for name, text in files.items():
        (slos / name).write_text(text)
    cfg = write_config(tmp_path, slo_dir=slos)
    result = invoke("--config", cfg, "slo", "report", "--prometheus-url", prometheus.url, "--at", AT, "-o", "json",
                    *extra)
    assert result.exit_code in code, result.output
    return {row["name"]: row for row in json.loads(result.stdout)} if result.exit_code in (0, 1) else result


def assert_equal_to(row, url, error_ratio, goal):
    """Every window's burn rate and the period's SLI equal the hand-written error ratio's."""
    for window, seconds in WINDOWS.items():
        want = promql(url, error_ratio(f"{seconds}s"))
        assert row["burn_rate"][window] == pytest.approx(want / (1 - goal), rel=1e-9, abs=1e-9), (row["name"], window)
    assert row["sli"] == pytest.approx(1 - promql(url, error_ratio(f"{PERIOD}s")), abs=1e-9), row["name"]


# -- Sloth ----------------------------------------------------------------------------------------

SLOTH_SERVICE = f"""\
version: "prometheus/v1"
service: "checkout"
labels:
  owner: "inference-team"
slos:
  - name: "internal-requests"
    objective: 99.9
    description: "Server errors of the internal backend."
    labels: {{backend: internal}}
    sli:
      events:
        error_query: sum(rate({REQ}{{backend="internal",outcome="server_error"}}[{{{{.window}}}}]))
        total_query: sum(rate({REQ}{{backend="internal"}}[{{{{.window}}}}]))
    alerting:
      name: CheckoutInternalErrors
      page_alert: {{labels: {{tier: "1"}}}}
      ticket_alert: {{disable: true}}
  - name: "vendor-ratio"
    objective: 99.99
    sli:
      raw:
        error_ratio_query: |
          sum(rate({REQ}{{backend="databricks",outcome="server_error"}}[{{{{ .window }}}}]))
          /
          sum(rate({REQ}{{backend="databricks"}}[{{{{ .window }}}}]))
    alerting: {{name: VendorErrors}}
"""

SLOTH_CRD = f"""\
apiVersion: sloth.slok.dev/v1
kind: PrometheusServiceLevel
metadata:
  name: checkout-latency
  namespace: monitoring
spec:
  service: "checkout"
  slos:
    - name: "internal-fast"
      objective: 99
      labels: {{backend: internal}}
      sli:
        events:
          errorQuery: >-
            sum(increase({COUNT}{{backend="internal"}}[{{{{.window}}}}]))
            - sum(increase({BUCKET}{{backend="internal",le="0.5"}}[{{{{.window}}}}]))
          totalQuery: sum(increase({COUNT}{{backend="internal"}}[{{{{.window}}}}]))
      alerting:
        name: CheckoutSlow
        pageAlert: {{labels: {{severity: page}}}}
"""


@pytest.mark.slow
def test_a_sloth_service_file_equals_sloths_own_promql(tmp_path, prometheus):
    rows = report(tmp_path, prometheus, {"sloth.yaml": SLOTH_SERVICE})
    assert set(rows) == {"checkout-internal-requests", "checkout-vendor-ratio"}  # Sloth's ids
    events = rows["checkout-internal-requests"]
    assert (events["backend"], events["goal"]) == ("internal", 0.999)
    assert_equal_to(events, prometheus.url, lambda w: f'sum(rate({REQ}{{backend="internal",outcome="server_error"}}[{w}]))'
                    f' / sum(rate({REQ}{{backend="internal"}}[{w}]))', 0.999)
    # The events form keeps event counts: the period's requests, from the seeded counts alone.
    assert events["events"] == pytest.approx(2 * 8640 * 2000, rel=1e-3)
    raw = rows["checkout-vendor-ratio"]
    assert raw["goal"] == 0.9999 and raw["events"] is None  # a ratio: no event counts
    assert_equal_to(raw, prometheus.url, lambda w: f'sum(rate({REQ}{{backend="databricks",outcome="server_error"}}[{w}]))'
                    f' / sum(rate({REQ}{{backend="databricks"}}[{w}]))', 0.9999)


@pytest.mark.slow
def test_a_sloth_crd_equals_sloths_own_promql(tmp_path, prometheus):
    rows = report(tmp_path, prometheus, {"crd.yaml": SLOTH_CRD})
    row = rows["checkout-internal-fast"]
    assert row["kind"] == "latency" and row["goal"] == 0.99
    assert_equal_to(row, prometheus.url, lambda w: f'(sum(increase({COUNT}{{backend="internal"}}[{w}]))'
                    f' - sum(increase({BUCKET}{{backend="internal",le="0.5"}}[{w}])))'
                    f' / sum(increase({COUNT}{{backend="internal"}}[{w}]))', 0.99)
    assert min(row["burn_rate"].values()) < max(row["burn_rate"].values())  # the slow spell is in the data


def test_sloth_sli_plugins_are_refused_with_one_line_naming_the_feature(tmp_path):
    (tmp_path / "slos").mkdir()
    (tmp_path / "slos" / "p.yaml").write_text("""\
version: "prometheus/v1"
service: "checkout"
slos:
  - name: "availability"
    objective: 99.9
    sli:
      plugin:
        id: "sloth-common/kubernetes/apiserver/availability"
        options: {filter: 'verb="GET"'}
    alerting: {name: A}
""")
    result = invoke("--config", write_config(tmp_path, slo_dir=tmp_path / "slos"), "slo", "validate")
    assert result.exit_code == 2
    [problem] = [l for l in result.stderr.splitlines() if l.strip().startswith("-")]
    assert "p.yaml: slos[0].sli.plugin: Sloth SLI plugins ('sloth-common/kubernetes/apiserver/availability')" in problem


# -- Pyrra ----------------------------------------------------------------------------------------

def pyrra(name: str, indicator: str, target: str = "99.9") -> str:
    return f"""\
apiVersion: pyrra.dev/v1alpha1
kind: ServiceLevelObjective
metadata:
  name: {name}
  namespace: monitoring
  labels: {{prometheus: k8s, role: alert-rules}}
spec:
  target: "{target}"
  window: 4w
  description: written for opsctl's tests
  indicator:
{indicator}"""


PYRRA = {
    "ratio.yaml": pyrra("requests-errors", f"""\
    ratio:
      errors: {{metric: '{REQ}{{outcome="server_error"}}'}}
      total: {{metric: '{REQ}'}}
      grouping: [backend]
"""),
    "latency.yaml": pyrra("requests-fast", f"""\
    latency:
      success: {{metric: '{BUCKET}{{le="0.5"}}'}}
      total: {{metric: '{COUNT}'}}
      grouping: [backend]
""", target="99"),
    # Two documents in one file, the second a bool gauge.
    "gauge.yaml": "---\n" + pyrra("backend-up", f"""\
    bool_gauge:
      metric: '{UP}'
      grouping: [backend]
""", target="99.5") + "---\n" + pyrra("databricks-errors", f"""\
    ratio:
      errors: {{metric: '{REQ}{{backend="databricks",outcome="server_error"}}'}}
      total: {{metric: '{REQ}{{backend="databricks"}}'}}
""", target="99.99"),
}


@pytest.mark.slow
def test_pyrra_ratio_latency_and_bool_gauge_slos_are_one_sli_per_group_equal_to_pyrras_promql(tmp_path, prometheus):
    rows = report(tmp_path, prometheus, PYRRA)
    assert set(rows) == {f'{name}{{backend="{b}"}}' for name in ("requests-errors", "requests-fast", "backend-up")
                         for b in ("internal", "databricks")} | {"databricks-errors"}
    for b in ("internal", "databricks"):
        assert_equal_to(rows[f'requests-errors{{backend="{b}"}}'], prometheus.url,
                        lambda w: f'sum(rate({REQ}{{backend="{b}",outcome="server_error"}}[{w}]))'
                                  f' / sum(rate({REQ}{{backend="{b}"}}[{w}]))', 0.999)
        assert_equal_to(rows[f'requests-fast{{backend="{b}"}}'], prometheus.url,
                        lambda w: f'1 - sum(rate({BUCKET}{{backend="{b}",le="0.5"}}[{w}]))'
                                  f' / sum(rate({COUNT}{{backend="{b}"}}[{w}]))', 0.99)
        assert_equal_to(rows[f'backend-up{{backend="{b}"}}'], prometheus.url,
                        lambda w: f'1 - sum(sum_over_time({UP}{{backend="{b}"}}[{w}]))'
                                  f' / sum(count_over_time({UP}{{backend="{b}"}}[{w}]))', 0.995)
    assert_equal_to(rows["databricks-errors"], prometheus.url,
                    lambda w: f'sum(rate({REQ}{{backend="databricks",outcome="server_error"}}[{w}]))'
                              f' / sum(rate({REQ}{{backend="databricks"}}[{w}]))', 0.9999)
    assert rows['requests-fast{backend="internal"}']["kind"] == "latency"
    # The gauge was down for 51 of the 8640 steps of the last day: its 1d SLI, from the seeded values.
    up = rows['backend-up{backend="internal"}']
    assert 1 - up["burn_rate"]["1d"] * 0.005 == pytest.approx(1 - 51 / 8640, abs=2e-4)
    assert rows['backend-up{backend="databricks"}']["burn_rate"]["1d"] == 0


def test_pyrra_native_histograms_are_refused_with_one_line_naming_the_feature(tmp_path):
    (tmp_path / "slos").mkdir()
    (tmp_path / "slos" / "n.yaml").write_text(pyrra("native", """\
    latencyNative:
      latency: "0.5"
      total: {metric: 'llm_proxy_request_duration_seconds{backend="internal"}'}
"""))
    result = invoke("--config", write_config(tmp_path, slo_dir=tmp_path / "slos"), "slo", "validate")
    assert result.exit_code == 2
    [problem] = [l for l in result.stderr.splitlines() if l.strip().startswith("-")]
    assert "n.yaml: spec.indicator.latencyNative: native histograms" in problem


# -- OpenSLO as its examples write it -------------------------------------------------------------

OPENSLO = f"""\
apiVersion: openslo/v1
kind: DataSource
metadata: {{name: prom-list}}
spec:
  type: Prometheus
  connectionDetails:
    - url: http://127.0.0.1:9090
    - timeout: 5s
---
apiVersion: openslo/v1
kind: SLO
metadata:
  name: internal-availability
  labels: {{backend: internal}}
  annotations:
    created: 2022-01-01 12:00:00
spec:
  service: checkout
  indicator:
    metadata: {{name: internal-ok}}
    spec:
      ratioMetric:
        counter: true
        good:
          metricSource:
            metricSourceRef: thanos
            type: Prometheus
            spec:
              query: {REQ}{{backend="internal",outcome="ok"}}
              dimensions: [pod]
        total:
          metricSource:
            metricSourceRef: prom-list
            spec:
              query: {REQ}{{backend="internal"}}
  budgetingMethod: Occurrences
  timeWindow:
    - duration: 28d
      isRolling: true
  objectives:
    - target: 0.999
  alertPolicies:
"""


@pytest.mark.slow
def test_openslo_as_its_examples_write_it_equals_the_hand_written_promql(tmp_path, prometheus):
    rows = report(tmp_path, prometheus, {"openslo.yaml": OPENSLO})
    row = rows["internal-availability"]
    assert_equal_to(row, prometheus.url, lambda w: f'1 - sum(increase({REQ}{{backend="internal",outcome="ok"}}[{w}]))'
                    f' / sum(increase({REQ}{{backend="internal"}}[{w}]))', 0.999)
    assert any("dimensions (pod) ignored" in n for n in row["notes"]), row["notes"]
    # The data starts with the explicit zero sample one step before the first step: said to the
    # sample, not to the coverage search's hour.
    first = datetime.fromtimestamp(END - STEPS * d.STEP, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert row["data_since"] == first
    assert any("no DataSource 'thanos' in the files read; its inline type Prometheus is used" in n for n in row["notes"])


def test_an_unquoted_timestamp_no_longer_hides_the_real_reason(tmp_path):
    (tmp_path / "slos").mkdir()
    (tmp_path / "slos" / "cal.yaml").write_text(OPENSLO.replace("""\
    - duration: 28d
      isRolling: true""", """\
    - duration: 1M
      calendar:
        startTime: 2022-01-01 12:00:00
        timeZone: UTC"""))
    result = invoke("--config", write_config(tmp_path, slo_dir=tmp_path / "slos"), "slo", "validate")
    assert result.exit_code == 2
    assert "spec.timeWindow[0]: calendar-aligned windows are not supported" in result.stderr
    assert "datetime" not in result.stderr


# -- slo-generator's subquery placeholder, kinds ----------------------------------------------------

def slo_generator(name: str, method: str, sli: str, goal: float = 0.999) -> str:
    return f"""\
apiVersion: sre.google.com/v2
kind: ServiceLevelObjective
metadata: {{name: {name}}}
spec:
  backend: prometheus
  method: {method}
  goal: {goal}
  service_level_indicator:
{sli}"""


SUBQUERY = (f'avg_over_time((sum(rate({REQ}{{backend="internal",outcome="ok"}}[1m]))'
            f' / sum(rate({REQ}{{backend="internal"}}[1m])))[window:1m])')
FAST = (f'sum(increase({BUCKET}{{backend="internal",le="0.5"}}[window]))'
        f' / sum(increase({COUNT}{{backend="internal"}}[window]))')


@pytest.mark.slow
def test_the_window_subquery_form_runs_as_slo_generator_formats_it(tmp_path, prometheus):
    rows = report(tmp_path, prometheus, {"sub.yaml": slo_generator("subquery", "query_sli", f"    expression: '{SUBQUERY}'\n"),
                                         "fast.yaml": slo_generator("fast", "query_sli", f"    expression: '{FAST}'\n", 0.99)})
    # slo-generator's _fmt_query replaces the text `[window` by `[<seconds>s`.
    assert_equal_to(rows["subquery"], prometheus.url, lambda w: f"1 - ({SUBQUERY.replace('[window', '[' + w)})", 0.999)
    assert rows["subquery"]["kind"] == "availability"
    assert rows["fast"]["kind"] == "latency"  # a query_sli over histogram buckets means latency


# -- several series -------------------------------------------------------------------------------

PER_BACKEND = (f'sum by (backend) (increase({REQ}{{outcome="ok"}}[window]))'
               f' / sum by (backend) (increase({REQ}[window]))')


@pytest.mark.slow
def test_an_sli_query_answering_several_series_is_refused_never_one_taken(tmp_path, prometheus):
    files = {"many.yaml": slo_generator("per-backend", "query_sli", f"    expression: '{PER_BACKEND}'\n")}
    result = report(tmp_path, prometheus, files, code=(2,))
    [line] = [l for l in result.stderr.splitlines() if l.startswith("error")]
    assert f"{tmp_path / 'slos' / 'many.yaml'}: spec.service_level_indicator.expression: its query answers 2 series" in line
    assert "sum(...)" in result.stderr


@pytest.mark.slow
def test_validate_counts_each_querys_series_on_a_live_prometheus(tmp_path, prometheus):
    slos = tmp_path / "slos"
    slos.mkdir()
    (slos / "many.yaml").write_text(slo_generator("per-backend", "query_sli", f"    expression: '{PER_BACKEND}'\n"))
    (slos / "one.yaml").write_text(slo_generator("summed", "query_sli", f"    expression: '{FAST}'\n"))
    cfg = write_config(tmp_path, slo_dir=slos)
    result = invoke("--config", cfg, "slo", "validate", "--prometheus-url", prometheus.url, "--at", AT)
    assert result.exit_code == 2, result.output
    problems = [l for l in result.stderr.splitlines() if l.strip().startswith("-")]
    assert len(problems) == 1 and "many.yaml: spec.service_level_indicator.expression: its query answers 2 series" in problems[0]
    (slos / "many.yaml").unlink()
    assert invoke("--config", cfg, "slo", "validate", "--prometheus-url", prometheus.url, "--at", AT).exit_code == 0


# -- the rules of the mapped forms ------------------------------------------------------------------

def vector(url: str, expr: str) -> dict[str, float]:
    at = int(datetime.fromisoformat(AT.replace("Z", "+00:00")).timestamp())
    body = urllib.parse.urlencode({"query": expr, "time": at}).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query", data=body, timeout=30) as response:
        result = json.loads(response.read())["data"]["result"]
    return {r["metric"].get("backend", ""): float(r["value"][1]) for r in result}


@pytest.mark.slow
def test_the_rules_of_sloth_and_pyrra_slos_record_their_tools_error_ratios(tmp_path, prometheus):
    """The generated 1h error-ratio expression, run on the same Prometheus, is the tool's own
    (one series per group for a grouped Pyrra SLO)."""
    import yaml

    slos = tmp_path / "slos"
    slos.mkdir()
    (slos / "sloth.yaml").write_text(SLOTH_SERVICE)
    (slos / "ratio.yaml").write_text(PYRRA["ratio.yaml"])
    out = tmp_path / "rules.yaml"
    result = invoke("--config", write_config(tmp_path, slo_dir=slos), "slo", "rules", "--out", out)
    assert result.exit_code == 0, result.output
    exprs = {r["labels"]["slo"]: r["expr"] for g in yaml.safe_load(out.read_text())["groups"] for r in g["rules"]
             if r.get("record") == "slo:sli_error:ratio_rate1h"}
    sloth = vector(prometheus.url, exprs["checkout-internal-requests"])
    want = promql(prometheus.url, f'sum(rate({REQ}{{backend="internal",outcome="server_error"}}[1h]))'
                                  f' / sum(rate({REQ}{{backend="internal"}}[1h]))')
    assert sloth[""] == pytest.approx(want, rel=1e-9)
    grouped = vector(prometheus.url, exprs["requests-errors"])
    assert set(grouped) == {"internal", "databricks"}
    for b, value in grouped.items():
        assert value == pytest.approx(promql(prometheus.url, f'sum(rate({REQ}{{backend="{b}",outcome="server_error"}}[1h]))'
                                             f' / sum(rate({REQ}{{backend="{b}"}}[1h]))'), rel=1e-9, abs=1e-12), b


@pytest.mark.slow
def test_at_is_aligned_to_the_configured_prometheus_step(tmp_path, prometheus):
    slos = tmp_path / "slos"
    slos.mkdir()
    (slos / "o.yaml").write_text(OPENSLO)
    cfg = write_config(tmp_path, slo_dir=slos)
    cfg.write_text(cfg.read_text().replace("report_deadline: 30}", "report_deadline: 30, step: 30s}"))
    result = invoke("--config", cfg, "slo", "report", "--prometheus-url", prometheus.url,
                    "--at", "2026-11-18T11:06:25Z", "-o", "json")
    assert result.exit_code in (0, 1), result.output
    [row] = json.loads(result.stdout)
    assert row["at"] == "2026-11-18T11:06:00Z"
    assert any("falls between two 30 s samples" in n for n in row["notes"]), row["notes"]


# -- slo convert --to sloth | pyrra ----------------------------------------------------------------

SG_FORMS = {
    "ratio-valid.yaml": slo_generator("ratio-valid", "good_bad_ratio", f"""\
    filter_good: '{REQ}{{backend="internal",outcome="ok"}}'
    filter_valid: '{REQ}{{backend="internal"}}'
"""),
    "ratio-bad.yaml": slo_generator("ratio-bad", "good_bad_ratio", f"""\
    filter_good: '{REQ}{{backend="databricks",outcome="ok"}}'
    filter_bad: '{REQ}{{backend="databricks",outcome="server_error"}}'
""", 0.9999),
    "cut.yaml": slo_generator("cut", "distribution_cut", f"""\
    expression: '{BUCKET}{{backend="internal"}}'
    threshold_bucket: 0.5
""", 0.99),
    "sli.yaml": slo_generator("sli", "query_sli", f"    expression: '{FAST}'\n", 0.99),
}


def figures(rows):
    return {name: (row["sli"], row["burn_rate"], row["goal"], row["kind"], row["backend"]) for name, row in rows.items()}


@pytest.mark.slow
@pytest.mark.parametrize("to", ["sloth", "pyrra"])
def test_converted_slos_load_back_to_the_same_figures(tmp_path, prometheus, to):
    source = tmp_path / "source"
    source.mkdir()
    files = dict(SG_FORMS) if to == "pyrra" else {**SG_FORMS, "sloth.yaml": SLOTH_SERVICE}
    if to == "pyrra":  # only a latency SLO over selectors maps exactly onto Pyrra
        files = {"cut.yaml": SG_FORMS["cut.yaml"]}
    for name, text in files.items():
        (source / name).write_text(text)
    cfg = write_config(tmp_path, slo_dir=source)
    out = tmp_path / "converted"
    result = invoke("--config", cfg, "slo", "convert", source, "--to", to, "--out-dir", out)
    assert result.exit_code == 0, result.output
    for path in out.iterdir():
        assert ("version: prometheus/v1" if to == "sloth" else "apiVersion: pyrra.dev/v1alpha1") in path.read_text()

    def rows(directory):
        run = invoke("--config", cfg, "slo", "report", directory, "--prometheus-url", prometheus.url, "--at", AT, "-o", "json")
        assert run.exit_code in (0, 1), run.output
        return {row["name"]: row for row in json.loads(run.stdout)}

    before, after = rows(source), rows(out)
    if to == "sloth":  # Sloth names an SLO <service>-<name>; the default service is opsctl
        renamed = {n if n.startswith("checkout-") else f"opsctl-{n}": r for n, r in before.items()}
        before = renamed
    assert set(after) == set(before)
    for name, (sli, burns, goal, kind, backend) in figures(before).items():
        got = after[name]
        assert (got["goal"], got["kind"], got["backend"]) == (goal, kind, backend), name
        assert got["sli"] == pytest.approx(sli, abs=1e-9), name
        for window, value in burns.items():
            assert got["burn_rate"][window] == pytest.approx(value, rel=1e-9, abs=1e-9), (name, window)


def test_what_has_no_exact_pyrra_form_is_refused_with_the_file(tmp_path):
    (tmp_path / "slos").mkdir()
    (tmp_path / "slos" / "r.yaml").write_text(SG_FORMS["ratio-bad.yaml"])
    cfg = write_config(tmp_path, slo_dir=tmp_path / "slos")
    result = invoke("--config", cfg, "slo", "convert", tmp_path / "slos", "--to", "pyrra")
    assert result.exit_code == 2
    assert "r.yaml: ratio-bad: Pyrra takes series selectors" in result.stderr


@pytest.mark.slow
def test_a_ratio_of_subqueries_is_reported_and_its_rules_pass_promtool(tmp_path, prometheus):
    import subprocess

    from tests.conftest import require_binary

    good = f'sum(rate({REQ}{{backend="internal",outcome="ok"}}[1m]))[window:1m]'
    valid = f'sum(rate({REQ}{{backend="internal"}}[1m]))[window:1m]'
    files = {"sub.yaml": slo_generator("subqueries", "good_bad_ratio",
                                       f"    filter_good: '{good}'\n    filter_valid: '{valid}'\n    operators: [sum_over_time]\n")}
    rows = report(tmp_path, prometheus, files)
    assert_equal_to(rows["subqueries"], prometheus.url,
                    lambda w: f"1 - sum_over_time({good.replace('[window', '[' + w)})"
                              f" / sum_over_time({valid.replace('[window', '[' + w)})", 0.999)
    out = tmp_path / "rules.yaml"
    result = invoke("--config", write_config(tmp_path, slo_dir=tmp_path / "slos"), "slo", "rules", "--out", out)
    assert result.exit_code == 0, result.output
    check = subprocess.run([require_binary("promtool"), "check", "rules", str(out)], capture_output=True, text=True,
                           timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr


# -- Several periods in one config (issue #24 item 5) ---------------------------------------------

WEEK_WINDOWS = {"1m": 60, "8m": 480, "15m": 900, "30m": 1800, "1h30m": 5400, "6h": 21600, "18h": 64800}


@pytest.mark.slow
def test_a_7_day_and_a_28_day_slo_side_by_side_each_over_its_own_windows(tmp_path, prometheus):
    """Pyrra's `window: 1w` beside the config's 28d: the week's row is over windows a quarter of the
    table's (5m -> 1m, 30m -> 8m, 1h -> 15m, 2h -> 30m, 6h -> 1h30m, 1d -> 6h, 3d -> 18h, rounded to
    the minute) and its period is 7 days; the 28-day row keeps the table. Both equal hand-written PromQL."""
    ratio = f"""\
    ratio:
      errors: {{metric: '{REQ}{{backend="databricks",outcome="server_error"}}'}}
      total: {{metric: '{REQ}{{backend="databricks"}}'}}
"""
    week = pyrra("databricks-week", ratio, target="99.99").replace("window: 4w", "window: 1w")
    rows = report(tmp_path, prometheus, {"week.yaml": week, "month.yaml": pyrra("databricks-month", ratio, target="99.99")})

    def error_ratio(w):
        return f'sum(rate({REQ}{{backend="databricks",outcome="server_error"}}[{w}])) / sum(rate({REQ}{{backend="databricks"}}[{w}]))'

    week_row, month_row = rows["databricks-week"], rows["databricks-month"]
    assert (week_row["period"], month_row["period"]) == ("7d", "28d")
    assert set(week_row["burn_rate"]) == set(WEEK_WINDOWS) and set(month_row["burn_rate"]) == set(WINDOWS)
    for row, windows, period in ((week_row, WEEK_WINDOWS, 7 * 86400), (month_row, WINDOWS, PERIOD)):
        for window, seconds in windows.items():
            want = promql(prometheus.url, error_ratio(f"{seconds}s")) / 1e-4
            assert row["burn_rate"][window] == pytest.approx(want, rel=1e-9, abs=1e-9), (row["name"], window)
        assert row["sli"] == pytest.approx(1 - promql(prometheus.url, error_ratio(f"{period}s")), abs=1e-9)


def alerts_of(tmp_path, prometheus, files: dict[str, str]) -> dict:
    slos = tmp_path / "slos"
    slos.mkdir(parents=True)
    for name, text in files.items():
        (slos / name).write_text(text)
    result = invoke("--config", write_config(tmp_path, slo_dir=slos), "slo", "alerts", "--prometheus-url",
                    prometheus.url, "--at", AT, "-o", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.slow
def test_slo_alerts_reads_a_grouped_pyrra_slo_one_sli_per_group(tmp_path, prometheus):
    """`slo alerts` evaluates a `grouping: [backend]` SLO as one SLO per group (it was refused, exit 2):
    the same alerts, burn rates and `for:` as one ungrouped SLO per backend written out by hand."""
    grouped = pyrra("errors", f"""\
    ratio:
      errors: {{metric: '{REQ}{{outcome="server_error"}}'}}
      total: {{metric: '{REQ}'}}
      grouping: [backend]
""", target="99.99")
    apart = {f"{b}.yaml": pyrra(f"errors-{b}", f"""\
    ratio:
      errors: {{metric: '{REQ}{{backend="{b}",outcome="server_error"}}'}}
      total: {{metric: '{REQ}{{backend="{b}"}}'}}
""", target="99.99") for b in ("internal", "databricks")}
    got = alerts_of(tmp_path / "grouped", prometheus, {"grouped.yaml": grouped})
    want = alerts_of(tmp_path / "apart", prometheus, apart)

    def firing(data, name_of):
        return {(name_of(a), a["alertname"], a["tier"], a["long_window"], a["short_window"]):
                (a["burn_rate"], a["short_burn_rate"], a["request_rate"]) for a in data["firing"]}

    backend = lambda a: a["labels"]["backend"]  # noqa: E731
    expected = firing(want, lambda a: f'errors{{backend="{a["slo"].removeprefix("errors-")}"}}')
    assert expected, "the seeded incidents fire something"  # else the comparison proves nothing
    assert {k[0] for k in expected} == {'errors{backend="internal"}'}  # the seeded 1% incident, on internal
    actual = firing(got, lambda a: a["slo"])
    assert set(actual) == set(expected)
    for key, figures in expected.items():
        assert actual[key] == pytest.approx(figures, rel=1e-9), key
    for a in got["firing"]:  # each group's alert carries its group's label, as the recorded series do
        assert a["slo"] == f'errors{{backend="{backend(a)}"}}' and a["labels"]["slo"] == "errors"
    assert got["unknown"] == []
