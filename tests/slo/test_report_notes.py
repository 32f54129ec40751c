"""What a reader needs to read a report right: a period only partly covered by data says so, an
`--at` between two samples is evaluated at the same instant on both sources (and says so), and
burn-rate thresholds are printed one way everywhere."""

from __future__ import annotations

import json

import pytest

from opsctl.metrics.embedded import EmbeddedStore
from tests.conftest import write_config
from tests.slo import data as d

END = 1_795_000_000
DAYS = 4
STEPS = DAYS * 8640
OFF_GRID = "2026-11-18T10:59:57Z"  # END - 403 s: between two 10 s samples, inside an incident


@pytest.fixture(scope="module")
def traffic():
    # A 5xx burst whose per-step errors vary, so an instant between two samples shows extrapolation.
    t = d.make_traffic(END, STEPS, 8000, incidents=[(STEPS - 60, STEPS - 1, 0.02)])
    t.server_errors[STEPS - 60:] = [100 + 7 * (i % 9) for i in range(60)]
    return {"databricks": t, "internal": d.make_traffic(END, STEPS, 2000)}


@pytest.fixture
def embedded_config(tmp_path, traffic):
    cfg = write_config(tmp_path)
    store = EmbeddedStore.open(tmp_path / "state" / "metrics.sqlite", create=True)
    d.write(store, traffic)
    store.close()
    return cfg


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory, traffic):
    from tests.conftest import PrometheusServer

    work = tmp_path_factory.mktemp("notes")
    om = work / "traffic.om"
    om.write_text(d.openmetrics(traffic))
    server = PrometheusServer(work, openmetrics=om)
    yield server
    server.stop()


def test_a_period_only_partly_covered_says_how_much(opsctl, embedded_config):
    result = opsctl("--config", str(embedded_config), "slo", "report", "--at", "2026-11-18T11:06:40Z", "-o", "json")
    assert result.exit_code == 1 or result.exit_code == 0, result.output
    for row in json.loads(result.stdout):
        assert row["period_covered"] == pytest.approx(DAYS / 28)
        assert row["data_since"] == "2026-11-14T11:06:40Z"
        assert "only 4 days of the 28-day period have data" in " ".join(row["notes"])
    table = opsctl("--config", str(embedded_config), "slo", "report", "--at", "2026-11-18T11:06:40Z")
    assert table.stdout.count("only 4 days of the 28-day period") == 1  # one note, not one per SLO


def test_a_fully_covered_period_has_no_coverage_note(opsctl, embedded_config):
    cfg = embedded_config
    cfg.write_text(cfg.read_text().replace("period: 28d", "period: 3d"))
    rows = json.loads(opsctl("--config", str(cfg), "slo", "report", "--at", "2026-11-18T11:06:40Z", "-o", "json").stdout)
    assert all(r["data_since"] is None and r["notes"] == [] for r in rows)


@pytest.mark.prometheus
@pytest.mark.slow
def test_prometheus_reports_the_same_coverage_to_its_subquery_step(opsctl, embedded_config, prometheus):
    result = opsctl("--config", str(embedded_config), "slo", "report", "--prometheus-url", prometheus.url,
                    "--at", "2026-11-18T11:06:40Z", "-o", "json")
    for row in json.loads(result.stdout):
        # Data from 2026-11-14T11:06:30Z (the explicit zero sample); a 1 h subquery step.
        assert DAYS / 28 - 3600 / (28 * 86400) <= row["period_covered"] <= DAYS / 28 + 10 / (28 * 86400), row
        assert "of the 28-day period have data" in " ".join(row["notes"])


@pytest.mark.prometheus
@pytest.mark.slow
def test_an_at_between_samples_is_evaluated_alike_on_both_sources_and_said(opsctl, embedded_config, prometheus):
    emb = opsctl("--config", str(embedded_config), "slo", "report", "--at", OFF_GRID, "-o", "json")
    prom = opsctl("--config", str(embedded_config), "slo", "report", "--at", OFF_GRID,
                  "--prometheus-url", prometheus.url, "-o", "json")
    e_rows, p_rows = json.loads(emb.stdout), json.loads(prom.stdout)
    for e, p in zip(e_rows, p_rows):
        assert e["at"] == p["at"] == "2026-11-18T10:59:50Z"
        assert any("falls between two 10 s samples" in n for n in e["notes"])
        for window, value in e["burn_rate"].items():
            assert p["burn_rate"][window] == pytest.approx(value, rel=1e-6, abs=1e-9), (e["name"], window)
    # The burst is in the data: the databricks 5m burn is far above 1.
    assert next(r for r in e_rows if r["name"] == "llm-inference-databricks-availability")["burn_rate"]["5m"] > 100


def test_burn_thresholds_print_the_same_in_report_rules_and_runbooks(opsctl, tmp_path):
    from tests.conftest import REPO

    cfg = write_config(tmp_path)
    rules = opsctl("--config", str(cfg), "slo", "rules").stdout
    assert "0.9333x" in rules and "0.933333x" not in rules and "0.93x" not in rules
    runbook = (REPO / "runbooks" / "llm-inference-databricks-availability-ticket.md").read_text()
    assert "| 0.9333x |" in runbook and "0.933333x" not in runbook
    from opsctl.slo.budget import evaluate_status

    status = evaluate_status({"1d": 3.0, "2h": 3.0, "3d": 1.0, "6h": 1.0}, [], True, 28 * 86400)
    assert "ticket: 1d/2h burn > 2.8x" in status.reason and "ticket: 3d/6h burn > 0.9333x" in status.reason
