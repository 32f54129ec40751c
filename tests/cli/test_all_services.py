"""`--all-services` on the read commands, over the shipped example catalog (two services)."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import REPO, run_opsctl

AT = "2026-11-20T00:00:00Z"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """The example catalog with a day of simulated traffic per service (different rates and seeds,
    so their figures differ)."""
    root = tmp_path_factory.mktemp("fleet") / "catalog"
    shutil.copytree(REPO / "examples" / "catalog", root)
    services = root / "services"
    # the data as before sim generate followed each service's split (chat's 100/0 would leave its
    # databricks SLO without data)
    for service, peak, seed, split in (("chat", "20", "3", "databricks=80,internal=20"),
                                       ("search", "40", "4", "databricks=80,internal=20")):
        result = run_opsctl("--catalog", services, "--service", service, "sim", "generate", "--days", "1",
                            "--end", AT, "--peak-rps", peak, "--seed", seed, "--split", split, "-o", "json")
        assert result.exit_code == 0, result.output
    return services


def test_slo_report_over_all_services_equals_each_services_own_report(fleet):
    every = run_opsctl("--catalog", fleet, "slo", "report", "--all-services", "--at", AT, "-o", "json")
    assert every.exit_code == 0, every.output
    rows = json.loads(every.stdout)
    assert [r["service"] for r in rows] == ["chat"] * 3 + ["search"] * 3
    for service in ("chat", "search"):
        own = run_opsctl("--catalog", fleet, "--service", service, "slo", "report", "--at", AT, "-o", "json")
        assert own.exit_code == 0, own.output
        expected = [{"service": service, **r} for r in json.loads(own.stdout)]
        assert [r for r in rows if r["service"] == service] == expected
    events = {r["name"]: r["events"] for r in rows}
    assert events["chat-internal-availability"] != events["search-internal-availability"]  # each its own store


def test_the_table_is_grouped_by_service(fleet):
    result = run_opsctl("--catalog", fleet, "slo", "report", "--all-services", "--at", AT)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.index("== chat ==") < text.index("chat-internal-availability") < text.index("== search ==")
    assert text.index("== search ==") < text.index("search-internal-availability")
    assert "search-" not in text[:text.index("== search ==")]


def test_traffic_and_freeze_status_list_every_service(fleet):
    traffic = run_opsctl("--catalog", fleet, "traffic", "status", "--all-services", "-o", "json")
    assert traffic.exit_code == 0, traffic.output
    splits = {d["service"]: d["split"]["weights"] for d in json.loads(traffic.stdout)}
    assert splits == {"chat": {"internal": 100, "databricks": 0}, "search": {"internal": 70, "databricks": 30}}
    freeze = run_opsctl("--catalog", fleet, "freeze", "status", "--all-services", "-o", "json")
    assert freeze.exit_code == 0, freeze.output
    assert [(d["service"], d["frozen"]) for d in json.loads(freeze.stdout)] == [("chat", False), ("search", False)]


def test_runbook_check_over_all_services_names_the_service_that_drifted(fleet):
    for service in ("chat", "search"):
        assert run_opsctl("--catalog", fleet, "--service", service, "runbook", "generate").exit_code == 0
    clean = run_opsctl("--catalog", fleet, "runbook", "check", "--all-services", "-o", "json")
    assert clean.exit_code == 0, clean.output
    assert [d["service"] for d in json.loads(clean.stdout)] == ["chat", "search"]
    victim = next((fleet.parent / "runbooks" / "search").glob("*.md"))
    victim.unlink()
    drifted = run_opsctl("--catalog", fleet, "runbook", "check", "--all-services")
    assert drifted.exit_code == 1, drifted.output
    assert "service search:" in drifted.stderr and "service chat:" not in drifted.stderr
    assert "== chat ==" in drifted.stdout  # the clean one is still shown
    assert "== search ==\n(failed, exit 1: the error is above)" in drifted.stdout  # never "(nothing shown)"
    assert run_opsctl("--catalog", fleet, "--service", "search", "runbook", "generate").exit_code == 0


def test_a_failing_service_does_not_hide_the_others_and_sets_the_exit_code(fleet, tmp_path):
    services = tmp_path / "catalog" / "services"
    shutil.copytree(fleet.parent, tmp_path / "catalog")
    shutil.rmtree(services.parent / ".opsctl" / "search")  # search has no metrics any more
    result = run_opsctl("--catalog", services, "slo", "report", "--all-services", "--at", AT, "-o", "json")
    assert result.exit_code == 3, result.output
    assert {r["service"] for r in json.loads(result.stdout)} == {"chat"}
    assert "service search: no embedded metrics" in result.stderr


def test_all_services_and_one_service_at_once_is_refused(fleet):
    result = run_opsctl("--catalog", fleet, "--service", "chat", "freeze", "status", "--all-services")
    assert result.exit_code == 2, result.output
    assert "--all-services" in result.stderr


def test_a_single_config_runs_as_a_fleet_of_one(tmp_path):
    from tests.conftest import write_config

    result = run_opsctl("--config", write_config(tmp_path), "freeze", "status", "--all-services", "-o", "json")
    assert result.exit_code == 0, result.output
    assert [d["service"] for d in json.loads(result.stdout)] == ["llm-inference"]


def test_the_fleet_dashboard_reads_every_service_of_the_catalog(fleet, tmp_path):
    out = tmp_path / "grafana"
    result = run_opsctl("--catalog", fleet, "slo", "dashboard", "--all-services", "--out-dir", out)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["opsctl-slo-chat.json", "opsctl-slo-fleet.json",
                                                      "opsctl-slo-search.json"]
    assert "6 SLOs of 2 service(s)" in result.stderr
