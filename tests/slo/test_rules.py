"""`opsctl slo rules`: the generated rule file and PrometheusRule manifest pass `promtool check rules`,
carry the names, labels, factors, `for:` and runbook links the config asks for, and SLOs that
cannot be expressed, or no SLOs at all, are errors (exit 2) rather than an empty file."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import yaml

from tests.conftest import REPO, require_binary, write_config
from tests.slo import rules_data as r

SLO_NAMES = sorted(p.stem for p in (REPO / "slos").glob("*.yaml"))
BASE_RECORDS = ["slo:sli_good:increase5m", "slo:sli_valid:increase5m"]
HOURLY_RECORDS = ["slo:sli_good:increase1h", "slo:sli_valid:increase1h"]  # decision 0420
WINDOW_RECORDS = [f"slo:sli_error:ratio_rate{w}" for w in ("5m", "30m", "1h", "2h", "6h", "1d", "3d")]
GUARD_RECORDS = [f"slo:sli_valid:rate{w}" for w in ("5m", "30m", "2h", "6h")]
META_RECORDS = ["slo:objective:ratio", "slo:error_budget:ratio"]
CAUSE_RECORDS = [f"slo:sli_cause_error:ratio_rate{w}" for w in ("5m", "30m", "2h", "6h") for _ in range(4)]  # 4 causes
PERIOD_RECORDS = ["slo:sli_error:ratio_rate28d", "slo:period_error_budget_remaining:ratio"]

EXTRA = r.ALERTING_CONFIG + """\
  labels: {team: llm-platform}
  prometheus_rule: {name: llm-slo-rules, namespace: observability, labels: {release: kube-prometheus}}
quality: {rules: {enabled: false}}   # the SLO groups alone (tests/quality/test_live_rules.py: the quality group)
"""


def promtool_check(path):
    promtool = require_binary("promtool")
    return subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=120)


@pytest.fixture
def cfg(tmp_path):
    return write_config(tmp_path, EXTRA)


def generate(opsctl, cfg, *args):
    result = opsctl("--config", str(cfg), "slo", "rules", *args)
    assert result.exit_code == 0, result.output
    return result


def alerts_of(doc):
    return [rule for g in doc["groups"] for rule in g["rules"] if "alert" in rule]


def test_rule_file_passes_promtool_check_rules(opsctl, cfg, tmp_path):
    out = tmp_path / "slo-rules.yaml"
    out.write_text(generate(opsctl, cfg).stdout)
    check = promtool_check(out)
    assert check.returncode == 0, check.stdout + check.stderr
    # 9 SLOs x (8 error ratios + 4 guards + 3 budget figures + 4 alerts)
    # 9 SLOs x (15 records + 4 alerts + 2 period records + 1 absent-metrics alert), and the 3
    # availability SLOs' per-cause ratios (4 causes: server_error, timeout, auth, capacity, x the 4
    # short windows) and fast tier (4 causes over 1m + 1 alert): 9 x 22 + 3 x (16 + 5) = 261; and the
    # 3 99.9% latency SLOs' fast tier (1 alert each, no per-cause ratios; the 99% ones get none): 264;
    # and every SLO's hourly good and valid increases (9 x 2, decision 0420): 282
    assert "SUCCESS: 282 rules found" in check.stdout


def test_prometheusrule_manifest_groups_pass_promtool_check_rules(opsctl, cfg, tmp_path):
    manifest = yaml.safe_load(generate(opsctl, cfg, "--format", "prometheusrule").stdout)
    assert manifest["apiVersion"] == "monitoring.coreos.com/v1"
    assert manifest["kind"] == "PrometheusRule"
    assert manifest["metadata"] == {"name": "llm-slo-rules", "namespace": "observability",
                                    "labels": {"release": "kube-prometheus"}}
    extracted = tmp_path / "groups.yaml"
    extracted.write_text(yaml.safe_dump({"groups": manifest["spec"]["groups"]}, sort_keys=False))
    check = promtool_check(extracted)
    assert check.returncode == 0, check.stdout + check.stderr
    # 9 SLOs x (15 records + 4 alerts + 2 period records + 1 absent-metrics alert), and the 3
    # availability SLOs' per-cause ratios (4 causes: server_error, timeout, auth, capacity, x the 4
    # short windows) and fast tier (4 causes over 1m + 1 alert): 9 x 22 + 3 x (16 + 5) = 261; and the
    # 3 99.9% latency SLOs' fast tier (1 alert each, no per-cause ratios; the 99% ones get none): 264;
    # and every SLO's hourly good and valid increases (9 x 2, decision 0420): 282
    assert "SUCCESS: 282 rules found" in check.stdout


def test_per_slo_a_group_at_the_configured_interval_with_records_before_alerts_and_a_slower_period_group(opsctl, cfg):
    doc = yaml.safe_load(generate(opsctl, cfg).stdout)
    available = [n for n in SLO_NAMES if n.endswith("availability")]
    fast = available + [n for n in SLO_NAMES if n.endswith("latency-1s")]  # 99.9% latency: 30x; 99%: none
    assert [g["name"] for g in doc["groups"]] == [
        name for n in SLO_NAMES for name in (
            f"opsctl-slo-llm-inference-{n}",
            *([f"opsctl-slo-llm-inference-{n}-fast"] if n in fast else []),
            f"opsctl-slo-llm-inference-{n}-period")]
    groups = {g["name"]: g for g in doc["groups"]}
    for n in SLO_NAMES:
        group, period = groups[f"opsctl-slo-llm-inference-{n}"], groups[f"opsctl-slo-llm-inference-{n}-period"]
        assert group["interval"] == "1m"
        causes = CAUSE_RECORDS if n in available else []
        kinds = ["alert" if "alert" in rule else "record" for rule in group["rules"]]
        assert kinds == ["record"] * (17 + len(causes)) + ["alert"] * 5
        assert [rule["record"] for rule in group["rules"][:17 + len(causes)]] == (
            BASE_RECORDS + HOURLY_RECORDS + WINDOW_RECORDS + GUARD_RECORDS + META_RECORDS + causes)
        assert group["rules"][-1]["alert"] == "SloMetricsAbsent"
        # No alert reads the period's ratio or the budget left: evaluated every 5 minutes.
        assert period["interval"] == "5m"
        assert [rule["record"] for rule in period["rules"]] == PERIOD_RECORDS
        if n in available:  # the fast-burn tier: every 10 s, its 1m per-cause ratios before its alert
            fast = groups[f"opsctl-slo-llm-inference-{n}-fast"]
            assert fast["interval"] == "10s"
            assert [rule.get("record") or rule["alert"] for rule in fast["rules"]] == (
                ["slo:sli_cause_error:ratio_rate1m"] * 4 + ["SloFastBurnPage"])  # 4 causes


def test_long_windows_come_from_the_recorded_increases_weighted_by_traffic(opsctl, cfg):
    doc = yaml.safe_load(generate(opsctl, cfg).stdout)
    rules = {(g["name"], r.get("record")): r["expr"] for g in doc["groups"] for r in g["rules"]}
    own = 'slo="llm-inference-internal-availability",service="llm-inference"'  # both: names may repeat across services
    main, period = "opsctl-slo-llm-inference-internal-availability", "opsctl-slo-llm-inference-internal-availability-period"
    assert rules[(main, "slo:sli_error:ratio_rate1d")] == (
        f"1 - (sum_over_time(slo:sli_good:increase5m{{{own}}}[86399s])"
        f" / sum_over_time(slo:sli_valid:increase5m{{{own}}}[86399s]))")
    assert rules[(period, "slo:sli_error:ratio_rate28d")].startswith("1 - (sum_over_time(slo:sli_good:increase5m")
    assert "[28d]" not in "\n".join(rules.values()) and "[1d]" not in "\n".join(rules.values())
    # The hourly increases: the base ones over 1h - 1s (60 samples), each event in 5 of them.
    assert rules[(main, "slo:sli_good:increase1h")] == f"sum_over_time(slo:sli_good:increase5m{{{own}}}[3599s]) / 5"
    assert rules[(main, "slo:sli_valid:increase1h")] == f"sum_over_time(slo:sli_valid:increase5m{{{own}}}[3599s]) / 5"
    # The base increases aggregate away every label (pod, instance, ...): one series per SLO.
    assert rules[(main, "slo:sli_valid:increase5m")].startswith("sum(increase(llm_proxy_requests_total{")


def test_recording_rules_carry_slo_backend_and_service_labels(opsctl, cfg):
    doc = yaml.safe_load(generate(opsctl, cfg).stdout)
    seen = {}
    for group in doc["groups"]:
        for rule in group["rules"]:
            if "record" in rule:
                # per-cause ratios add the cause; every series keeps one SLO's labels
                assert set(rule["labels"]) - {"cause"} == {"slo", "backend", "service"}
                assert rule["labels"].get("cause", "auth") in ("server_error", "timeout", "auth", "capacity")
                assert rule["labels"]["service"] == "llm-inference"
                seen[rule["labels"]["slo"]] = rule["labels"]["backend"]
    assert seen["llm-inference-service-availability"] == "all"
    assert seen["llm-inference-internal-latency-500ms"] == "internal"
    assert seen["llm-inference-databricks-latency-1s"] == "databricks"


@pytest.mark.parametrize("period, factors", [
    ("28d", {"1h": 13.44, "6h": 5.6, "1d": 2.8, "3d": 0.9333333333}),
    ("30d", {"1h": 14.4, "6h": 6.0, "1d": 3.0, "3d": 1.0}),
])
def test_burn_rate_factors_follow_the_period(opsctl, tmp_path, period, factors):
    cfg = write_config(tmp_path, EXTRA)
    cfg.write_text(cfg.read_text().replace("period: 28d", f"period: {period}"))
    doc = yaml.safe_load(generate(opsctl, cfg, str(REPO / "slos" / "internal-availability.yaml")).stdout)
    for rule in alerts_of(doc):
        if rule["alert"] in ("SloFastBurnPage", "SloMetricsAbsent"):  # a fixed factor / no factor
            continue
        long, short = rule["labels"]["long_window"], rule["labels"]["short_window"]
        threshold = f"> {factors[long]!r}"
        assert f'slo:sli_error:ratio_rate{long}{{slo="llm-inference-internal-availability",service="llm-inference"}} / (1 - 0.9999) {threshold}' in rule["expr"]
        assert f'slo:sli_error:ratio_rate{short}{{slo="llm-inference-internal-availability",service="llm-inference"}} / (1 - 0.9999) {threshold}' in rule["expr"]
    records = [rule["record"] for g in doc["groups"] for rule in g["rules"] if "record" in rule]
    assert f"slo:sli_error:ratio_rate{period}" in records


def test_alerts_have_severity_for_guard_labels_and_runbook_links(opsctl, cfg):
    doc = yaml.safe_load(generate(opsctl, cfg, str(REPO / "slos" / "databricks-latency-500ms.yaml")).stdout)
    rules = alerts_of(doc)
    assert [(a["alert"], a["labels"].get("long_window"), a["labels"].get("short_window"), a["for"]) for a in rules] == [
        ("SloBurnRatePage", "1h", "5m", "2m"),
        ("SloBurnRatePage", "6h", "30m", "2m"),
        ("SloBurnRateTicket", "1d", "2h", "15m"),
        ("SloBurnRateTicket", "3d", "6h", "15m"),
        ("SloMetricsAbsent", None, None, "10m"),
    ]
    page, ticket = rules[0], rules[2]
    assert page["labels"] == {
        "team": "llm-platform", "slo": "llm-inference-databricks-latency-500ms", "backend": "databricks",
        "service": "llm-inference", "severity": "page", "category": "latency", "long_window": "1h",
        "short_window": "5m",
    }
    assert page["annotations"]["cause"] == "latency"
    assert 'slo:sli_valid:rate5m{slo="llm-inference-databricks-latency-500ms",service="llm-inference"} >= 1.0' in page["expr"]
    assert 'slo:sli_valid:rate2h{slo="llm-inference-databricks-latency-500ms",service="llm-inference"} >= 0.1' in ticket["expr"]
    assert page["annotations"]["runbook_url"] == (
        "https://runbooks.test/llm/llm-inference-databricks-latency-500ms-page.md")
    assert ticket["annotations"]["runbook_url"] == (
        "https://runbooks.test/llm/llm-inference-databricks-latency-500ms-ticket.md")
    assert page["annotations"]["burn_rate"] == '{{ printf "%.2f" $value }}'
    assert page["annotations"]["summary"] == (
        'databricks: slow answers (latency) at {{ printf "%.2f" $value }}x over 1h'
        " (llm-inference-databricks-latency-500ms page above 13.44x over 1h and 5m)")
    assert "Objective 99% over 28d" in page["annotations"]["description"]


def test_runbook_name_is_slo_and_severity():
    from opsctl.slo.conventions import runbook_name, runbook_url

    assert runbook_name("llm-inference-internal-availability", "page") == "llm-inference-internal-availability-page.md"
    assert runbook_url("https://x.test/rb/", "s", "ticket") == "https://x.test/rb/s-ticket.md"
    with pytest.raises(ValueError):
        runbook_name("s", "sms")


def test_recorded_budget_figures_match_the_counts(tmp_path, opsctl, cfg):
    """Objective, budget, budget left and the traffic guard, as Prometheus records them."""
    out = tmp_path / "rules.yaml"
    generate(opsctl, cfg, str(REPO / "slos" / "internal-availability.yaml"), "--out", str(out))
    steps = 6 * 360
    requests = np.full(steps, 500)  # 50 requests/s
    errors = np.zeros(steps, dtype=int)
    errors[::60] = 3  # 3 failures every 10 minutes: 108 over 6 h out of 1,080,000 requests
    data = {"internal": r.traffic(requests, errors)}
    labels = 'slo="llm-inference-internal-availability",backend="internal",service="llm-inference"'

    def sample(record, value):
        return {"expr": f'{record}{{slo="llm-inference-internal-availability"}}', "eval_time": "360m",
                "exp_samples": [{"labels": f"{record}{{{labels}}}", "value": value}]}

    tests = [
        sample("slo:objective:ratio", 0.9999),
        sample("slo:error_budget:ratio", 1 - 0.9999),
        # promtool compares exactly. The period's ratio is derived from the 5m increases recorded at
        # minutes 1..360: summed, they count the steps of the last 6 h up to 4 minutes ago five
        # times each (steps in minutes 356-360 fewer). Worked out from the data: valid =
        # 50 req/s x (21600 + 21540 + 21480 + 21420 + 21360) s = 5,370,000; the 36 failure steps
        # (3 each, at 10 s + 10 min k) all precede minute 356, so bad = 5 x 108 = 540. (Raw
        # increase over the 6 h would say 108 / 1,080,000, exactly the budget; the start-up edge
        # of the recorded series weights the failure-free newest minutes less.)
        sample("slo:sli_error:ratio_rate28d", 1 - ((5_370_000 - 540) / 5_370_000)),
        sample("slo:period_error_budget_remaining:ratio", 1 - ((1 - ((5_370_000 - 540) / 5_370_000)) / (1 - 0.9999))),
        sample("slo:sli_valid:rate5m", 50.0),
        sample("slo:sli_error:ratio_rate1h", 1 - (180_000 - 18) / 180_000),
    ]
    result = r.run_promtool_test(tmp_path, out, r.input_series(data), [], tests)
    assert result.returncode == 0, result.stdout[-3000:]


def test_out_writes_the_same_rules_as_stdout_and_no_temp_files(opsctl, cfg, tmp_path):
    target = tmp_path / "out" / "rules.yaml"
    target.parent.mkdir()
    result = opsctl("--config", str(cfg), "slo", "rules", "--out", str(target))
    assert result.exit_code == 0, result.output
    # 9 SLOs x 2 groups + 6 fast groups (3 availability, 3 99.9% latency); 9 x 17 records + 3 x (16 + 4)
    # per-cause (4 causes), and 9 x 2 hourly increases (decision 0420); 9 x 5 + 6 fast alerts
    assert "24 groups, 231 recording rules, 51 alerting rules" in result.stderr
    assert target.read_text() == generate(opsctl, cfg).stdout
    assert [p.name for p in target.parent.iterdir()] == ["rules.yaml"]
    assert target.read_text().startswith("# Generated by `opsctl slo rules`")


def write_slo(directory, name, good, valid, goal=0.99):
    directory.mkdir(exist_ok=True)
    (directory / f"{name}.yaml").write_text(textwrap.dedent(f"""\
        apiVersion: sre.google.com/v2
        kind: ServiceLevelObjective
        metadata:
          name: {name}
          labels: {{backend: internal, slo_name: {name}}}
        spec:
          description: test
          backend: prometheus
          method: good_bad_ratio
          service_level_indicator:
            filter_good: '{good}'
            filter_valid: '{valid}'
          goal: {goal}
        """))


@pytest.mark.parametrize("name, good, valid, says", [
    ("internal-latency-no-le", 'llm_proxy_request_duration_seconds_bucket{backend="internal"}',
     'llm_proxy_request_duration_seconds_count{backend="internal"}', "needs exactly one `le=` or `le=~` matcher"),
    ("internal-latency-no-histogram", 'llm_proxy_requests_total{backend="internal",outcome="ok"}',
     'llm_proxy_requests_total{backend="internal"}', "a latency SLO needs a histogram"),
    ("internal-latency-other-count", 'llm_proxy_request_duration_seconds_bucket{backend="internal",le="0.5"}',
     'llm_proxy_requests_total{backend="internal"}', "filter_valid must count every request of the same histogram"),
    ("internal-latency-inf", 'llm_proxy_request_duration_seconds_bucket{backend="internal",le="+Inf"}',
     'llm_proxy_request_duration_seconds_count{backend="internal"}', "not a finite bucket bound"),
])
def test_slo_whose_sli_cannot_be_expressed_is_exit_2_and_writes_nothing(opsctl, tmp_path, name, good, valid, says):
    slo_dir = tmp_path / "slos"
    write_slo(slo_dir, name, good, valid)
    write_slo(slo_dir, "internal-fine", 'llm_proxy_requests_total{outcome="ok"}', "llm_proxy_requests_total")
    cfg = write_config(tmp_path, slo_dir=slo_dir)
    out = tmp_path / "rules.yaml"
    result = opsctl("--config", str(cfg), "slo", "rules", "--out", str(out))
    assert result.exit_code == 2, result.output
    assert says in result.stderr and f"{name}.yaml" in result.stderr
    assert not out.exists()


def test_no_slo_files_is_exit_2_not_an_empty_file(opsctl, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    cfg = write_config(tmp_path, slo_dir=empty)
    out = tmp_path / "rules.yaml"
    result = opsctl("--config", str(cfg), "slo", "rules", "--out", str(out))
    assert result.exit_code == 2
    assert "no SLO files found" in result.stderr
    assert not out.exists()


@pytest.mark.parametrize("extra, says", [
    ("alerting:\n  labels: {severity: low}\n", "alerting: labels: 'severity' is set by opsctl"),
    ("alerting:\n  evaluation_interval: 45s\n", "evaluation_interval must be a multiple of 10s"),
    ("alerting:\n  page: {for_duration: 2m}\n", "alerting.page.min_request_rate: required key is missing"),
    ("alerting:\n  runbook_base_url: runbooks/\n", "runbook_base_url must start with http"),
    ("alerting:\n  paging: {}\n", "alerting.paging: unknown key"),
])
def test_bad_alerting_config_is_exit_2_naming_the_key(opsctl, tmp_path, extra, says):
    cfg = write_config(tmp_path, extra)
    result = opsctl("--config", str(cfg), "slo", "rules")
    assert result.exit_code == 2
    assert says in result.stderr and str(cfg) in result.stderr


def test_unknown_format_is_a_usage_error(opsctl, cfg):
    result = opsctl("--config", str(cfg), "slo", "rules", "--format", "sloth")
    assert result.exit_code == 2


def test_rules_and_alerts_commands_stay_light(tmp_path, cfg):
    """Generating rules imports neither slo-generator nor numpy nor the cloud clients."""
    code = textwrap.dedent(f"""
        import sys
        from opsctl.cli.main import cli
        cli.main(args=["--config", {str(cfg)!r}, "slo", "rules", "--out", {str(tmp_path / 'r.yaml')!r}],
                 prog_name="opsctl", standalone_mode=False)
        import opsctl.slo.alerts
        heavy = [m for m in ("slo_generator", "numpy", "kubernetes", "pagerduty", "starlette", "uvicorn")
                 if m in sys.modules]
        print("HEAVY", heavy)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert "HEAVY []" in proc.stdout, proc.stdout + proc.stderr


def test_the_absent_alert_takes_its_for_from_the_config_and_both_new_kinds_can_be_turned_off(opsctl, tmp_path):
    slo = str(REPO / "slos" / "internal-availability.yaml")
    cfg = write_config(tmp_path, r.ALERTING_CONFIG + "  absent: {for_duration: 3m, severity: ticket}\n")
    rules = alerts_of(yaml.safe_load(generate(opsctl, cfg, slo).stdout))
    [absent] = [a for a in rules if a["alert"] == "SloMetricsAbsent"]
    assert absent["for"] == "3m" and absent["labels"]["severity"] == "ticket"
    assert absent["annotations"]["runbook_url"].endswith("llm-inference-internal-availability-ticket.md")
    (tmp_path / "off").mkdir()
    off = write_config(tmp_path / "off", r.ALERTING_CONFIG + "  absent: {enabled: false}\n  fast: {enabled: false}\n"
                       + "quality: {rules: {enabled: false}}\n")
    names = {a["alert"] for a in alerts_of(yaml.safe_load(generate(opsctl, off, slo).stdout))}
    assert names == {"SloBurnRatePage", "SloBurnRateTicket"}


def test_a_fast_tier_that_could_not_tell_noise_from_an_outage_is_refused(opsctl, tmp_path):
    cfg = write_config(tmp_path, r.ALERTING_CONFIG + "  fast: {long: 1m, short: 5m}\n")
    result = opsctl("--config", str(cfg), "slo", "rules")
    assert result.exit_code == 2
    assert "alerting.fast" in result.stderr and "short < long" in result.stderr
