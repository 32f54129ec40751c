"""Every alert the rules generator writes has a runbook, and its runbook_url points at a generated file."""

from __future__ import annotations

import json

import yaml

from tests.conftest import REPO

BASE = "https://runbooks.example.com/llm-inference"  # alerting.runbook_base_url in the shipped opsctl.yaml, resolved
WRITTEN = "https://runbooks.example.com/{service}"  # as the shipped opsctl.yaml writes it (decision 0162)
SLO_NAMES = sorted(yaml.safe_load(p.read_text())["metadata"]["name"] for p in (REPO / "slos").glob("*.yaml"))


def alert_rules(opsctl, config, *, quality: bool = False):
    """The burn-rate alerts of `opsctl slo rules` (or, with `quality`, the live quality alerts)."""
    result = opsctl("--config", str(config), "slo", "rules")
    assert result.exit_code == 0, result.output
    return [r for g in yaml.safe_load(result.stdout)["groups"] for r in g["rules"]
            if "alert" in r and (r["labels"].get("category") == "quality") == quality]


def test_every_quality_alert_links_to_the_quality_regression_runbook_which_names_it(opsctl, shipped):
    rules = alert_rules(opsctl, shipped, quality=True)
    files = generate(opsctl, shipped)
    assert {r["alert"] for r in rules} == {"QualityPromptTokensShift", "QualityCompletionTokensDrift",
                                           "QualitySuggestionsDrop"}
    for rule in rules:
        url = rule["annotations"]["runbook_url"]
        assert url == BASE + "/scenario-quality-regression.md"
        text = files["scenario-quality-regression.md"]
        assert url in text and f"| `{rule['alert']}` | {rule['labels']['backend']} |" in text


def generate(opsctl, config):
    result = opsctl("--config", str(config), "runbook", "generate")
    assert result.exit_code == 0, result.output
    return {p.name: p.read_text() for p in (config.parent / "runbooks").glob("*.md")}


def test_every_generated_alert_links_to_a_generated_runbook_about_it(opsctl, shipped):
    rules = alert_rules(opsctl, shipped)
    files = generate(opsctl, shipped)
    # 9 SLOs x (4 window pairs (two page, two ticket) + SloMetricsAbsent), and the fast-burn page of
    # the 3 availability SLOs and the 3 99.9% latency SLOs
    assert len(rules) == len(SLO_NAMES) * 5 + 6 == 51
    for rule in rules:
        url = rule["annotations"]["runbook_url"]
        assert url.startswith(BASE + "/"), url
        name = url[len(BASE) + 1:]
        assert name in files, f"{rule['alert']} {rule['labels']['slo']}: {url} is not a generated runbook"
        text = files[name]
        if rule["alert"] in ("SloFastBurnPage", "SloMetricsAbsent"):  # served by the SLO's page runbook
            assert f"# SloBurnRatePage: {rule['labels']['slo']}\n" in text and f"`{rule['alert']}`" in text
        else:
            assert f"# {rule['alert']}: {rule['labels']['slo']}\n" in text
        if "long_window" in rule["labels"]:
            assert f"| {rule['labels']['long_window']} / {rule['labels']['short_window']} |" in text


def test_one_runbook_per_slo_and_severity_and_none_without_an_alert(opsctl, shipped):
    linked = {r["annotations"]["runbook_url"].rsplit("/", 1)[1] for r in alert_rules(opsctl, shipped)}
    expected = {f"{slo}-{severity}.md" for slo in SLO_NAMES for severity in ("page", "ticket")}
    assert linked == expected
    generated = {n for n in generate(opsctl, shipped) if not n.startswith("scenario-") and n != "README.md"}
    assert generated == expected


def test_list_reports_each_runbook_with_its_alert_url_and_state(opsctl, shipped):
    generate(opsctl, shipped)
    result = opsctl("--config", str(shipped), "runbook", "list", "-o", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == 1 + len(SLO_NAMES) * 2 + 8  # index, page and ticket per SLO, 8 scenarios
    assert {r["state"] for r in rows} == {"current"}
    alerts = [r for r in rows if r["kind"] == "alert"]
    assert {(r["slo"], r["severity"]) for r in alerts} == {(s, v) for s in SLO_NAMES for v in ("page", "ticket")}
    for r in alerts:
        assert r["url"] == f"{BASE}/{r['slo']}-{r['severity']}.md"
        assert r["alert"] == {"page": "SloBurnRatePage", "ticket": "SloBurnRateTicket"}[r["severity"]]
    scenarios = {r["scenario"] for r in rows if r["kind"] == "scenario"}
    assert scenarios == {"vendor-outage", "vendor-latency", "auth-throttling", "oauth-token-failure", "internal-capacity-loss",
                         "vendor-throttling", "quality-regression", "freeze-incident"}


def test_the_alerts_base_url_moves_the_links_and_the_runbooks_together(opsctl, shipped):
    text = shipped.read_text().replace(WRITTEN, "https://wiki.example.org/sre/llm")
    shipped.write_text(text)
    rules = alert_rules(opsctl, shipped)
    files = generate(opsctl, shipped)
    for rule in rules:
        url = rule["annotations"]["runbook_url"]
        assert url.startswith("https://wiki.example.org/sre/llm/")
        assert url in files[url.rsplit("/", 1)[1]]


def test_a_runbooks_base_url_other_than_the_alerts_is_refused(opsctl, shipped):
    shipped.write_text(shipped.read_text().replace(
        f"  # base_url: {WRITTEN}", "  base_url: https://elsewhere.example.com/rb"))
    result = opsctl("--config", str(shipped), "config", "validate")
    assert result.exit_code == 2
    assert "runbooks.base_url" in result.stderr and "alerting.runbook_base_url" in result.stderr


def test_the_page_runbook_says_how_long_the_fast_burn_page_stays_firing_as_its_rule_does(opsctl, shipped):
    """The runbook quotes the fast page's `keep_firing_for` from the rule itself, so on-call knows why
    it is still firing minutes after the failover emptied its window."""
    files = generate(opsctl, shipped)
    fast = [r for r in alert_rules(opsctl, shipped) if r["alert"] == "SloFastBurnPage"]
    assert len(fast) == 6  # 3 availability, 3 99.9% latency SLOs
    for rule in fast:
        # 28-day period: the slower page pairs' longest `for:` (2m) plus one 1m evaluation.
        assert rule["keep_firing_for"] == "3m"
        text = files[rule["annotations"]["runbook_url"].rsplit("/", 1)[1]]
        assert f"it stays firing for {rule['keep_firing_for']} after its condition ends (`keep_firing_for`)" in text
