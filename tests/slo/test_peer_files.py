"""SLO files written as Sloth, Pyrra and OpenSLO write them (tests/slo/data/peers/, in the style of
each tool's own examples and test data): the valid ones are read, their own alert switches
honoured and their rules load into Prometheus (`promtool check rules`); the invalid ones are refused
in one line naming what is wrong, each as what it is (a rule file, another version, a plugin), never
validated as another format. Every SLO file the project ships gives rules promtool loads too."""

from __future__ import annotations

import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from tests.cli.inprocess import invoke
from tests.conftest import REPO, require_binary, write_config

PEERS = REPO / "tests/slo/data/peers"
VALID, INVALID = PEERS / "valid", PEERS / "invalid"


def promtool_check(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([require_binary("promtool"), "check", "rules", str(path)], capture_output=True, text=True)


def alerts_by_slo(doc: dict) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for group in doc["groups"]:
        for rule in group["rules"]:
            if "alert" in rule and "slo" in rule.get("labels", {}):
                out[rule["labels"]["slo"]].add(rule["alert"])
    return out


@pytest.fixture(scope="module")
def valid_rules(tmp_path_factory):
    work = tmp_path_factory.mktemp("peers")
    cfg = write_config(work, "quality: {rules: {enabled: false}}\n", slo_dir=VALID)
    out = work / "rules.yaml"
    result = invoke("--config", str(cfg), "slo", "rules", "--out", str(out))
    assert result.exit_code == 0, result.output
    return cfg, out, yaml.safe_load(out.read_text())


def test_the_peer_files_are_read_and_their_rules_load_into_prometheus(valid_rules):
    cfg, out, _ = valid_rules
    result = invoke("--config", str(cfg), "slo", "validate", "-o", "json")
    assert result.exit_code == 0, result.output
    checked = promtool_check(out)
    assert checked.returncode == 0, checked.stdout + checked.stderr


PAGE = {"SloBurnRatePage", "SloFastBurnPage"}
TICKET = {"SloBurnRateTicket"}


@pytest.mark.parametrize("slo, expected", [
    # Sloth's page_alert.disable and ticket_alert.disable: no alert of either (recording rules kept).
    ("llm-inference-requests-availability-quiet", set()),
    ("llm-inference-requests-availability-tickets", TICKET),
    ("llm-inference-requests-availability", TICKET),  # the CRD's pageAlert.disable
    # Pyrra's burnrates: false, and alerting.disabled with absent: false.
    ("gateway-errors-recorded", set()),
    ("gateway-errors-silent", set()),
    # Formats with no switch keep every alert.
    ("llm-inference-gateway-requests-0", {"SloBurnRatePage"} | TICKET),  # Sloth's good/total: no counts, no fast tier
    ("gateway-v2alpha", PAGE | TICKET | {"SloMetricsAbsent"}),
])
def test_the_files_own_alert_switches_are_honoured(valid_rules, slo, expected):
    _, _, doc = valid_rules
    assert alerts_by_slo(doc).get(slo, set()) == expected
    records = [r for g in doc["groups"] for r in g["rules"] if "record" in r and r.get("labels", {}).get("slo") == slo]
    assert any(r["record"].startswith("slo:sli_error:ratio_rate") for r in records)  # still recorded


def test_runbooks_follow_the_switches(tmp_path):
    cfg = write_config(tmp_path, slo_dir=VALID)
    out = tmp_path / "runbooks"
    result = invoke("--config", str(cfg), "runbook", "generate", "--out", str(out))
    assert result.exit_code == 0, result.output
    files = {p.name for p in out.iterdir()}
    assert "llm-inference-requests-availability-tickets-ticket.md" in files
    assert "llm-inference-requests-availability-tickets-page.md" not in files
    assert not {f for f in files if f.startswith("llm-inference-requests-availability-quiet-")}
    assert {"gateway-v2alpha-page.md", "gateway-v2alpha-ticket.md"} <= files


def test_sloth_label_values_are_stringified_as_sloth_reads_them(tmp_path):
    cfg = write_config(tmp_path, slo_dir=VALID)
    result = invoke("--config", str(cfg), "slo", "validate", str(VALID / "sloth-no-alerts.yml"))
    assert result.exit_code == 0, result.output  # `tier: 2` and `critical: true` are "2" and "true"


@pytest.mark.parametrize("file, said", [
    ("sloth-probe-range.yml", "slos[0].sli.events: SLO 'blackbox-probe-availability': not PromQL Prometheus loads:"
                              " ranges only allowed for vector selectors"),
    ("sloth-generated-rules.yml", "(top level): a Prometheus rule file of Sloth's generated rules, not an SLO"),
    ("sloth-generated-k8s.yml", "(top level): a PrometheusRule manifest of Sloth's generated rules, not an SLO"),
    ("pyrra-generated-rules.yaml", "(top level): a Prometheus rule file of Pyrra's generated rules, not an SLO"),
    ("osko-openslo-com-v1.yaml", "apiVersion: 'openslo.com/v1' is not an OpenSLO version opsctl reads"),
    ("sloth-v999.yaml", "version: 'prometheus/v999' is not a Sloth spec version opsctl reads"),
    ("sloth-slo-plugins.yml", "slos[0].plugins: Sloth's SLO plugins (sloth.dev/contrib/info_labels/v1)"),
    ("sloth-empty-service-k8s.yaml", "spec.service: must name the service"),
    ("pyrra-v1alpha1-bad-target.yaml", "spec.target: must be a percentage strictly between 0 and 100, got '120'"),
    ("openslo-v1-increase-of-rate.yaml", "spec.indicator.spec.ratioMetric.good.metricSource.spec.query:"
                                         " SLO 'gateway-increase-of-rate': not PromQL Prometheus loads: duration '300'"),
])
@pytest.mark.parametrize("command", ["validate", "rules"])
def test_a_file_that_cannot_be_read_is_refused_in_one_line_naming_what_it_is(tmp_path, file, said, command):
    cfg = write_config(tmp_path, slo_dir=VALID)
    result = invoke("--config", str(cfg), "slo", command, str(INVALID / file))
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip().startswith("- ")]
    assert len(lines) == 1, result.output
    assert lines[0].strip() == f"- {INVALID / file}: {said}" or lines[0].strip().startswith(f"- {INVALID / file}: {said}")


SHIPPED = [REPO / "slos", REPO / "slos/examples/openslo", REPO / "opsctl/defaults/slos", VALID]


@pytest.mark.parametrize("slo_dir", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_and_test_slo_file_gives_rules_promtool_loads(tmp_path, slo_dir):
    cfg = write_config(tmp_path, slo_dir=slo_dir)
    out = tmp_path / "rules.yaml"
    result = invoke("--config", str(cfg), "slo", "rules", "--out", str(out))
    assert result.exit_code == 0, result.output
    checked = promtool_check(out)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_catalogs_slo_files_give_rules_promtool_loads(tmp_path):
    for service in ("chat", "search"):
        out = tmp_path / f"{service}.yaml"
        result = invoke("--catalog", str(REPO / "examples/catalog/services"), "--service", service,
                        "slo", "rules", "--out", str(out))
        assert result.exit_code == 0, result.output
        checked = promtool_check(out)
        assert checked.returncode == 0, checked.stdout + checked.stderr


def test_convert_keeps_the_switches_or_refuses(tmp_path):
    cfg = write_config(tmp_path, slo_dir=VALID)
    result = invoke("--config", str(cfg), "slo", "convert", str(VALID / "sloth-no-alerts.yml"), "--to", "sloth")
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    alerting = {d["slos"][0]["name"]: d["slos"][0]["alerting"] for d in docs}
    assert alerting["requests-availability-quiet"]["page_alert"] == {"disable": True}
    assert alerting["requests-availability-quiet"]["ticket_alert"] == {"disable": True}
    assert "ticket_alert" not in alerting["requests-availability-tickets"]
    refused = invoke("--config", str(cfg), "slo", "convert", str(VALID / "sloth-no-alerts.yml"), "--to", "openslo")
    assert refused.exit_code == 2 and "turns off its page, ticket alerts" in refused.output, refused.output
