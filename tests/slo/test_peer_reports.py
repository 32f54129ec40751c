"""Peer formats reported on a real Prometheus holding 3 days of traffic (1 request in 100 failing
on internal, 2 in 100 on databricks): OpenSLO's openslo/v1alpha (Sloth's form), openslo.com/v2alpha
and v1 with `{{.Window}}` give the SLI and burn rates worked out by hand (#38 item 10); a Sloth and a
Pyrra SLO over a 28-day period report the share of the period their data cover, as slo-generator's
do, and an SLI whose error query counts more than its total (two different metrics) is reported as
broken, exit 3, naming both queries, never an SLI clamped to 0 (#38 item 8)."""

from __future__ import annotations

import json

import pytest

from tests.cli.inprocess import invoke
from tests.conftest import REPO, write_config
from tests.slo import data as d

pytestmark = pytest.mark.prometheus

END = 1_795_000_000
STEPS = 3 * 8640  # 3 days of 10 s steps
AT = "2026-11-18T11:06:40Z"  # END
REQ = "llm_proxy_requests_total"

SLOTH = """\
version: "prometheus/v1"
service: "young"
slos:
  - name: "requests-availability"
    objective: 99.9
    sli:
      events:
        error_query: sum(rate(llm_proxy_requests_total{backend="internal",outcome="server_error"}[{{.window}}]))
        total_query: sum(rate(llm_proxy_requests_total{backend="internal"}[{{.window}}]))
"""
PYRRA = """\
apiVersion: pyrra.dev/v1alpha1
kind: ServiceLevelObjective
metadata:
  name: young-pyrra-errors
spec:
  target: "99.9"
  window: 28d
  indicator:
    ratio:
      errors:
        metric: llm_proxy_requests_total{backend="internal",outcome="server_error"}
      total:
        metric: llm_proxy_requests_total{backend="internal"}
"""
# The error and total queries swapped: errors count every request, the total only the failed ones.
SLOTH_BROKEN = """\
version: "prometheus/v1"
service: "young"
slos:
  - name: "requests-availability"
    objective: 99.9
    sli:
      events:
        error_query: sum(rate(llm_proxy_requests_total{backend="internal"}[{{.window}}]))
        total_query: sum(rate(llm_proxy_requests_total{backend="internal",outcome="server_error"}[{{.window}}]))
"""
PYRRA_BROKEN = PYRRA.replace("young-pyrra-errors", "broken-pyrra-errors").replace(
    'errors:\n        metric: llm_proxy_requests_total{backend="internal",outcome="server_error"}\n      total:\n'
    '        metric: llm_proxy_requests_total{backend="internal"}',
    'errors:\n        metric: llm_proxy_requests_total{backend="internal"}\n      total:\n'
    '        metric: llm_proxy_requests_total{backend="internal",outcome="server_error"}')


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    from tests.conftest import PrometheusServer

    traffic = {"internal": d.make_traffic(END, STEPS, 100, error_share=0.01),
               "databricks": d.make_traffic(END, STEPS, 100, error_share=0.02)}
    work = tmp_path_factory.mktemp("young")
    (work / "traffic.om").write_text(d.openmetrics(traffic))
    server = PrometheusServer(work, openmetrics=work / "traffic.om")
    yield server
    server.stop()


def report(tmp_path, prometheus, files: dict[str, str]):
    slos = tmp_path / "slos"
    slos.mkdir()
    for name, text in files.items():
        (slos / name).write_text(text)
    cfg = write_config(tmp_path, slo_dir=slos)
    return invoke("--config", cfg, "slo", "report", "--prometheus-url", prometheus.url, "--at", AT, "-o", "json")


def test_sloth_and_pyrra_slos_say_how_much_of_the_period_their_data_cover(tmp_path, prometheus):
    result = report(tmp_path, prometheus, {"sloth.yaml": SLOTH, "pyrra.yaml": PYRRA})
    assert result.exit_code in (0, 1), result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    # By hand: the first sample is 3 days minus one step before AT; data starts are read to the
    # hour (28 days / 672), so the covered share is 3/28 to within 1/672.
    for name in ("young-requests-availability", "young-pyrra-errors"):
        assert rows[name]["period_covered"] == pytest.approx(3 / 28, abs=1 / 672), name
        assert any("only 3 days of the 28-day period have data" in n for n in rows[name]["notes"]), rows[name]["notes"]
        assert rows[name]["sli"] == pytest.approx(0.99, abs=1e-6), name  # 1 in 100 fails


@pytest.mark.parametrize("file, text, name, said", [
    ("sloth.yaml", SLOTH_BROKEN, "young-requests-availability",
     ["slos[0].sli.events.error_query", "slos[0].sli.events.total_query"]),
    ("pyrra.yaml", PYRRA_BROKEN, "broken-pyrra-errors",
     ["spec.indicator.ratio.errors.metric", "spec.indicator.ratio.total.metric"]),
], ids=["sloth", "pyrra"])
def test_an_error_count_above_the_total_is_a_broken_sli_exit_3_naming_both_queries(tmp_path, prometheus, file, text,
                                                                                     name, said):
    result = report(tmp_path, prometheus, {file: text})
    assert result.exit_code == 3, result.output
    line = [ln for ln in result.output.splitlines() if ln.startswith("error:") and "broken SLI" in ln]
    assert len(line) == 1 and name in line[0] and all(key in line[0] for key in said), result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows[name]["status"] == "unknown" and rows[name]["sli"] is None  # not clamped to 0
    assert all(v is None for v in rows[name]["burn_rate"].values())


VALID = REPO / "tests/slo/data/peers/valid"
WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")


@pytest.mark.parametrize("file, name, sli, goal", [
    # By hand: 99 of every 100 internal requests succeed, 98 of 100 on databricks, every step alike,
    # so every window's SLI is that share and its burn rate (1 - SLI) / (1 - goal).
    ("openslo-v1alpha-sloth.yml", "llm-inference-gateway-requests-0", 0.99, 0.999),
    ("openslo-v2alpha.yaml", "gateway-v2alpha", 0.98, 0.999),
    ("openslo-v1-window-template.yaml", "gateway-window-template", 0.99, 0.995),
], ids=["v1alpha", "v2alpha", "v1-window-template"])
def test_openslo_versions_give_the_figures_worked_out_by_hand(tmp_path, prometheus, file, name, sli, goal):
    result = report(tmp_path, prometheus, {file: (VALID / file).read_text()})
    assert result.exit_code in (0, 1), result.output
    row = {r["name"]: r for r in json.loads(result.stdout)}[name]
    assert row["sli"] == pytest.approx(sli, abs=1e-9)
    for window in WINDOWS:
        assert row["burn_rate"][window] == pytest.approx((1 - sli) / (1 - goal), rel=1e-6), window
