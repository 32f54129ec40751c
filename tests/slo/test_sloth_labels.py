"""`slos.sloth_labels: true` adds Sloth's sloth_id / sloth_service / sloth_slo labels to the same
recording series (no second copy); off by default, the generated rules do not change.

Sloth's values (slok/sloth, internal/prometheus/conventions.go and its spec loaders):
sloth_id = "<service>-<slo name>", sloth_service = the service, sloth_slo = the SLO's name as Sloth
knows it: an opsctl name already prefixed "<service>-" (what a Sloth file reads as, and what
`slo convert --to sloth` writes back without the prefix) is Sloth's id, not prefixed twice.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
import yaml

from tests.conftest import REPO, require_binary, run_opsctl, write_config
from tests.slo import rules_data as r

SERVICE = "llm-inference"  # write_config's service
SLO = "llm-inference-internal-availability"  # slos/internal-availability.yaml's name
# As Sloth labels this SLO once converted (service llm-inference, Sloth name internal-availability).
SLOTH = {"sloth_id": "llm-inference-internal-availability", "sloth_service": "llm-inference",
         "sloth_slo": "internal-availability"}
OWN = {"slo": SLO, "backend": "internal", "service": SERVICE}


def _rules(work, sloth: str | None) -> str:
    """`opsctl slo rules` text for one SLO; sloth: None (key absent), "true" or "false"."""
    work.mkdir(exist_ok=True)
    cfg = write_config(work, r.ALERTING_CONFIG + "quality: {rules: {enabled: false}}\n")
    if sloth is not None:
        text = cfg.read_text()
        assert "period: 28d}" in text
        cfg.write_text(text.replace("period: 28d}", f"period: 28d, sloth_labels: {sloth}}}"))
    out = work / "rules.yaml"
    result = run_opsctl("--config", str(cfg), "slo", "rules", str(REPO / "slos" / "internal-availability.yaml"),
                        "--out", str(out))
    assert result.exit_code == 0, result.output
    return out.read_text()


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    base = tmp_path_factory.mktemp("sloth")
    return {key: (base / key / "rules.yaml", _rules(base / key, key if key != "absent" else None))
            for key in ("absent", "false", "true")}


def test_off_by_default_rules_unchanged_byte_for_byte(generated):
    default, off, on = (generated[k][1] for k in ("absent", "false", "true"))
    assert default == off
    assert "sloth_" not in default
    # With the option on, the only differences are the three added label lines and one
    # sloth_slo_info rule (Sloth's metadata series) per SLO.
    doc = yaml.safe_load(on)
    for group in doc["groups"]:
        group["rules"] = [rule for rule in group["rules"] if rule.get("record") != "sloth_slo_info"]
        for rule in group["rules"]:
            rule["labels"] = {k: v for k, v in rule["labels"].items() if k not in SLOTH}
    assert doc == yaml.safe_load(default)
    stripped = "".join(line for line in on.splitlines(keepends=True)
                       if not line.lstrip().startswith(("sloth_id:", "sloth_service:", "sloth_slo:")))
    assert stripped != default and on != default


def test_every_recording_series_and_no_alert_carries_sloths_labels(generated):
    doc = yaml.safe_load(generated["true"][1])
    rules = [rule for g in doc["groups"] for rule in g["rules"]]
    records = [rule for rule in rules if "record" in rule]
    assert records and all(SLOTH.items() <= rule["labels"].items() for rule in records)
    assert all(not any(k.startswith("sloth_") for k in rule["labels"]) for rule in rules if "alert" in rule)
    # The same series, not a second copy: one rule per record name and label set, as without the option,
    # plus Sloth's metadata series sloth_slo_info (vector(1), its objective as Sloth writes it: 99.99).
    off = [rule for g in yaml.safe_load(generated["false"][1])["groups"] for rule in g["rules"] if "record" in rule]
    info = [x for x in records if x["record"] == "sloth_slo_info"]
    assert [(x["record"], x["expr"]) for x in records if x not in info] == [(x["record"], x["expr"]) for x in off]
    assert [(x["expr"], x["labels"]) for x in info] == [
        ("vector(1)", {**OWN, **SLOTH, "sloth_mode": "opsctl", "sloth_objective": "99.99"})]


def test_promtool_check_rules_passes_with_the_option(generated):
    promtool = require_binary("promtool")
    result = subprocess.run([promtool, "check", "rules", str(generated["true"][0])],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def _series(name: str, labels: dict[str, str]) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def test_recorded_series_carries_the_labels_and_equals_the_one_without(tmp_path, generated):
    # 10 requests/s on internal for 40 min, 1 of every 100 failing: every 5m error ratio is 1%.
    steps = 240
    data = {"internal": r.traffic(np.full(steps, 100), np.ones(steps, dtype=int))}
    ratio = 1 - 99 / 100  # bad share of valid events, by hand
    valid_5m = 100 * 30  # 30 steps of 100 requests in the 5m base window
    at = "30m"
    for key, extra in (("true", SLOTH), ("false", {})):
        labels = {**OWN, **extra}
        tests = [
            {"expr": f'slo:sli_error:ratio_rate5m{{slo="{SLO}"}}', "eval_time": at,
             "exp_samples": [{"labels": _series("slo:sli_error:ratio_rate5m", labels), "value": ratio}]},
            {"expr": f'slo:sli_valid:increase5m{{slo="{SLO}"}}', "eval_time": at,
             "exp_samples": [{"labels": _series("slo:sli_valid:increase5m", labels), "value": valid_5m}]},
            # No second copy: one series per record, so a sum over them is the ratio itself.
            {"expr": f'count(slo:sli_error:ratio_rate5m{{slo="{SLO}"}})', "eval_time": at,
             "exp_samples": [{"labels": "{}", "value": 1}]},
            {"expr": f'sum(slo:sli_error:ratio_rate5m{{slo="{SLO}"}})', "eval_time": at,
             "exp_samples": [{"labels": "{}", "value": ratio}]},
        ]
        if extra:  # Sloth's metadata series, listed by its dashboards' variables
            info = {**labels, "sloth_mode": "opsctl", "sloth_objective": "99.99"}
            tests.append({"expr": f'sloth_slo_info{{sloth_id="{SLOTH["sloth_id"]}"}}', "eval_time": at,
                          "exp_samples": [{"labels": _series("sloth_slo_info", info), "value": 1}]})
        work = tmp_path / key
        work.mkdir()
        path = work / "rules.yaml"
        path.write_text(generated[key][1])
        result = r.run_promtool_test(work, path, r.input_series(data), [], tests)
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


SLOTH_FILE = """\
version: "prometheus/v1"
service: "payments"
slos:
  - name: "backend-errors"
    objective: 99.5
    labels: {backend: internal}
    sli:
      events:
        error_query: sum(increase(llm_proxy_requests_total{backend="internal",outcome="server_error"}[{{.window}}]))
        total_query: sum(increase(llm_proxy_requests_total{backend="internal"}[{{.window}}]))
    alerting: {name: PaymentsBackendErrors}
"""


def test_a_sloth_files_series_carry_the_labels_sloth_itself_gives_them(tmp_path):
    # Sloth labels service payments' SLO backend-errors: sloth_id payments-backend-errors.
    (tmp_path / "slos").mkdir()
    (tmp_path / "slos" / "payments.yaml").write_text(SLOTH_FILE)
    cfg = write_config(tmp_path, r.ALERTING_CONFIG + "quality: {rules: {enabled: false}}\n", slo_dir=tmp_path / "slos")
    text = cfg.read_text()
    assert "period: 28d}" in text
    # the service comes from the config (docs/design.md shape D): the payments service's config
    cfg.write_text(text.replace("period: 28d}", "period: 28d, sloth_labels: true}")
                   .replace("service: llm-inference\n", "service: payments\n", 1))
    out = tmp_path / "rules.yaml"
    result = run_opsctl("--config", str(cfg), "slo", "rules", "--out", str(out))
    assert result.exit_code == 0, result.output
    records = [rule for g in yaml.safe_load(out.read_text())["groups"] for rule in g["rules"] if "record" in rule]
    expected = {"sloth_id": "payments-backend-errors", "sloth_service": "payments", "sloth_slo": "backend-errors"}
    assert records and all(expected.items() <= rule["labels"].items() for rule in records)
