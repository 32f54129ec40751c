"""The numbers a runbook quotes, checked against sums done by hand, and what changes with the config.

Shipped config: 28-day period, availability goal 99.99%, split databricks 80 / internal 20, peak
500 requests/s, 40 requests/s per replica, 25% headroom, at most 6 replicas (static, 6 ready).
"""

from __future__ import annotations

import os
import subprocess

import pytest

from opsctl.config import load_config_file
from opsctl.errors import OpsctlError, UsageError
from opsctl.runbooks import facts
from opsctl.runbooks.generator import generate as generate_in_process
from opsctl.runbooks.generator import load_plans, plan_runbooks
from opsctl.runbooks.render import render, template_environment
from opsctl.runbooks.writer import write

# By hand: 28 d x 1440 min x (1 - 0.9999) = 4.032 min of full outage.
BUDGET_MINUTES = "4.032 minutes"
# 1h/5m page pair: factor 0.02 x 28 d / 1 h = 13.44; 13.44 x 0.01% = 0.1344% = 1 in 744;
# the budget lasts 28 d / 13.44 = 50 h; 2% of 4.032 min = 4.84 s.
PAGE_ROW = "| 1h / 5m | 13.44x | 0.1344% (1 in 744) | 2% (4.84 s of budget) | 50 hours | 2m | 1 req/s |"
# Failover off databricks at peak: internal carries 100%: ceil(500 x 1.00 x 1.25 / 40) = ceil(15.625) = 16;
# databricks' 80% alone: ceil(500 x 0.8 x 1.25 / 40) = ceil(12.5) = 13; 6 replicas carry
# floor(6 x 40 / (500 x 1.25) x 100) = floor(38.4) = 38% of peak traffic, so databricks keeps 62%.


# With capacity read from Kubernetes, the GPU price needs its own replica count (it defaults to the
# static capacity.replicas).
BILLED_FROM_CAPACITY = "        gpus_per_replica: 1\n"
BILLED_AS_GIVEN = "        gpus_per_replica: 1\n        replicas: 6\n"


def generated(opsctl, config) -> dict[str, str]:
    result = opsctl("--config", str(config), "runbook", "generate")
    assert result.exit_code == 0, result.output
    return {p.name: p.read_text() for p in (config.parent / "runbooks").glob("*.md")}


def test_what_a_page_means_in_numbers(opsctl, shipped):
    text = generated(opsctl, shipped)["llm-inference-databricks-availability-page.md"]
    assert f"**{BUDGET_MINUTES}**" in text and "(4 min 2 s) of full outage over the 28-day period" in text
    assert PAGE_ROW in text
    # at databricks' 80% of 500 requests/s = 400 requests/s, 0.1344% fail: 0.5376 per second
    assert "(400 requests/s) that is\n  0.538 such requests per second" in text


def test_the_capacity_a_failover_needs_and_where_it_comes_from(opsctl, shipped):
    text = generated(opsctl, shipped)["scenario-vendor-outage.md"]
    assert "`ceil(500 requests/s x 100% x (1 + 0.25) / 40 requests/s per replica)` = **16**" in text
    assert "(databricks's 80% alone needs 13)" in text
    assert "**Short by 10 replicas at peak**" in text
    assert "(internal to 38%, databricks keeps 62%)" in text
    # static capacity: the configured replicas are all there is (opsctl cannot scale them)
    assert "- replicas available: **6** (`capacity.replicas`;" in text
    for key in ("runbooks.peak_rps", "capacity.rps_per_replica", "capacity.headroom", "capacity.replicas",
                "traffic.default_split"):
        assert f"`{key}`" in text


def test_enough_kubernetes_capacity_is_scaled_by_the_failover(opsctl, shipped):
    shipped.write_text(shipped.read_text()
                       .replace("  source: static\n  replicas: 6\n", "  source: kubernetes\n  deployment: vllm\n")
                       .replace(BILLED_FROM_CAPACITY, BILLED_AS_GIVEN)
                       .replace("  max_replicas: 6\n", "  max_replicas: 20\n"))
    text = generated(opsctl, shipped)["scenario-vendor-outage.md"]
    assert "= **16**" in text and "at most **20**" in text
    assert "the failover scales\n  Deployment llm/vllm up to what it needs" in text
    assert "That is enough at peak: the whole 80% moves." in text
    assert "Short by" not in text


def test_without_a_peak_rate_the_runbook_gives_the_formula_and_the_query(opsctl, shipped):
    shipped.write_text(shipped.read_text().replace("  peak_rps: 500 ", "  # peak_rps: 500 "))
    files = generated(opsctl, shipped)
    text = files["scenario-vendor-outage.md"]
    assert "`ceil(PEAK x 100% x (1 + 0.25) / 40 requests/s per replica)`" in text
    assert "max_over_time(sum(rate(llm_proxy_requests_total[5m]))[7d:5m])" in text
    assert "such requests per second" not in files["llm-inference-databricks-availability-page.md"]


def test_pagerduty_service_and_escalation_policy_are_named(opsctl, shipped):
    shipped.write_text(shipped.read_text().replace(
        "paging:\n  # local: a ledger under state_dir (the embedded environment). pagerduty: Events API v2 + REST API v2.\n"
        "  provider: local\n",
        "paging:\n  provider: pagerduty\n  pagerduty:\n    routing_key: {env: PD_KEY}\n"
        "    service_id: PSVC123\n    escalation_policy_id: PESC456\n"))
    text = generated(opsctl, shipped)["llm-inference-internal-availability-page.md"]
    assert "service `PSVC123`" in text and "escalation policy `PESC456`" in text


def test_auth_throttling_files_in_the_auth_category(opsctl, shipped):
    text = generated(opsctl, shipped)["scenario-auth-throttling.md"]
    assert "category\n`platform` reaches **Workspace / Platform**" in text
    assert "--category platform --severity Sev2" in text


def test_a_category_the_vendor_does_not_have_is_refused_naming_the_keys(opsctl, shipped):
    shipped.write_text(shipped.read_text().replace("auth_category: platform", "auth_category: identity"))
    result = opsctl("--config", str(shipped), "runbook", "generate")
    assert result.exit_code == 2
    assert "runbooks.tickets.auth_category 'identity' is not a category of tickets.vendors.databricks" in result.stderr


# -- pure functions ------------------------------------------------------------------------------


@pytest.mark.parametrize("word, quoted", [
    ("databricks", "databricks"),
    ("vendor outage: databricks", "'vendor outage: databricks'"),
    ("$INCIDENT", '"$INCIDENT"'),
    ('incident $INCIDENT, "quoted" $5', '"incident $INCIDENT, \\"quoted\\" \\$5"'),
])
def test_shell_quoting_keeps_placeholders_expandable_and_nothing_else(word, quoted):
    assert facts.sh(word) == quoted
    # what bash makes of it, with the placeholder set
    out = subprocess.run(["bash", "-c", f"printf '%s' {quoted}"], capture_output=True, text=True,
                         env={"INCIDENT": "INC-9", "PATH": os.environ["PATH"]}, timeout=10)
    assert out.stdout == word.replace("$INCIDENT", "INC-9")


def test_an_unknown_placeholder_is_refused():
    with pytest.raises(ValueError, match=r"\$NOPE"):
        facts.sh("see $NOPE")


def test_generation_is_pure_same_config_same_bytes(shipped):
    cfg = load_config_file(shipped)
    plans = load_plans(cfg)
    first = generate_in_process(cfg, plans)
    second = generate_in_process(load_config_file(shipped), load_plans(cfg))
    assert first == second and len(first) == 27  # index, 9 SLOs x (page, ticket), 8 scenarios
    assert list(first) == sorted(first)


def test_an_empty_result_is_an_error(shipped, tmp_path):
    cfg = load_config_file(shipped)
    with pytest.raises(UsageError, match="no SLOs"):
        plan_runbooks(cfg, [])
    with pytest.raises(UsageError, match="no runbooks generated"):
        render([], template_environment())
    with pytest.raises(OpsctlError, match="no runbooks to write"):
        write({}, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_slow_vendor_gets_a_partial_move_capped_by_internal_capacity_at_peak(opsctl, shipped):
    # half of databricks' 80% would take internal to 60%; 6 replicas carry 38% at peak (see above)
    text = generated(opsctl, shipped)["scenario-vendor-latency.md"]
    assert "opsctl traffic ramp internal=38 databricks=62 --incident \"$INCIDENT\"" in text
    # static capacity cannot be scaled: a higher max_replicas changes nothing
    shipped.write_text(shipped.read_text().replace("  max_replicas: 6\n", "  max_replicas: 20\n"))
    assert "ramp internal=38 databricks=62 --incident" in generated(opsctl, shipped)["scenario-vendor-latency.md"]
    # a Deployment scaled up to 20 replicas carries half: internal 20 + 40 = 60
    shipped.write_text(shipped.read_text()
                       .replace("  source: static\n  replicas: 6\n", "  source: kubernetes\n  deployment: vllm\n")
                       .replace(BILLED_FROM_CAPACITY, BILLED_AS_GIVEN))
    text = generated(opsctl, shipped)["scenario-vendor-latency.md"]
    assert "opsctl traffic ramp internal=60 databricks=40 --incident \"$INCIDENT\"" in text
    assert "(half of databricks's 80%)" in text


def test_configured_dashboards_are_linked_from_every_runbook_but_the_index(opsctl, shipped):
    shipped.write_text(shipped.read_text().replace(
        "  dashboards: {}", "  dashboards: {LLM proxy: 'https://grafana.example.com/d/llm-proxy'}"))
    for name, text in generated(opsctl, shipped).items():
        if name != "README.md":
            assert "- [LLM proxy](https://grafana.example.com/d/llm-proxy)" in text, name


def test_a_dashboard_that_is_not_a_url_is_refused_naming_the_key(opsctl, shipped):
    shipped.write_text(shipped.read_text().replace("  dashboards: {}", "  dashboards: {LLM proxy: grafana/d/1}"))
    result = opsctl("--config", str(shipped), "config", "validate")
    assert result.exit_code == 2
    assert "runbooks: dashboards.LLM proxy must start with http:// or https://" in result.stderr
