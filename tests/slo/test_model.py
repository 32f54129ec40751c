"""SLO files: the shipped ones validate, and every problem in a bad one is listed with file and field."""

from __future__ import annotations

import textwrap

import pytest

from opsctl.errors import ConfigError
from opsctl.slo.loading import load_slos
from tests.conftest import REPO

BACKENDS = ["internal", "databricks"]


def test_shipped_slos_cover_both_backends_and_the_service():
    slos = load_slos([REPO / "slos"], BACKENDS)
    table = {(s.backend, s.kind, s.goal) for s in slos}
    for backend in ("internal", "databricks", "all"):
        assert (backend, "availability", 0.9999) in table
        assert (backend, "latency", 0.99) in table
        assert (backend, "latency", 0.999) in table
    thresholds = sorted({s.threshold_seconds for s in slos if s.kind == "latency"})
    assert thresholds == [0.5, 1.0]


def test_shipped_slos_run_under_slo_generator_itself():
    """The same files, handed to slo-generator's compute with a client answering its queries."""
    import json

    from slo_generator.compute import compute

    class Client:
        def query(self, metric):
            value = "999.0" if "outcome=\"ok\"" in metric or "_bucket" in metric else "1000.0"
            return json.dumps({"data": {"result": [{"value": [0, value]}]}})

    shared = {"backends": {"prometheus": {}}, "error_budget_policies": {"default": {"steps": [
        {"name": "1h", "window": 3600, "burn_rate_threshold": 1, "alert": False,
         "message_alert": "a", "message_ok": "b"}]}}}
    for slo in load_slos([REPO / "slos"], BACKENDS):
        reports = compute(slo.slo_generator_config(), shared, timestamp=0, client=Client())
        assert reports[0]["valid"], reports[0]
        assert reports[0]["sli_measurement"] == pytest.approx(0.999)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_every_problem_is_listed_with_file_and_field(tmp_path):
    write(tmp_path, "bad.yaml", """\
        apiVersion: sre.google.com/v1
        kind: ServiceLevelObjective
        metadata: {name: x, labels: {backend: vendorx}}
        spec:
          backend: cloud_monitoring
          method: good_bad_ratio
          goal: 99.99
          service_level_indicator:
            filter_good: 'llm_proxy_requests_total{outcome="ok"'
        """)
    with pytest.raises(ConfigError) as info:
        load_slos([tmp_path], BACKENDS)
    text = str(info.value)
    f = str(tmp_path / "bad.yaml")
    assert f"{f}: apiVersion: must be 'sre.google.com/v2'" in text
    assert f"{f}: metadata.labels.backend: unknown backend 'vendorx'" in text
    assert f"{f}: spec.backend: opsctl evaluates SLOs over PromQL" in text
    assert f"{f}: spec.goal: must be a number strictly between 0 and 1" in text
    assert f"{f}: spec.service_level_indicator.filter_good:" in text
    assert f"{f}: spec.service_level_indicator.filter_valid: missing" in text
    assert info.value.exit_code == 2


def test_yaml_syntax_error_in_an_slo_file_names_the_line(tmp_path):
    write(tmp_path, "broken.yaml", "apiVersion: sre.google.com/v2\nspec: [\n")
    with pytest.raises(ConfigError) as info:
        load_slos([tmp_path], BACKENDS)
    assert "broken.yaml: YAML syntax error at line 3" in str(info.value)


def test_duplicate_names_are_refused(tmp_path):
    src = (REPO / "slos" / "internal-availability.yaml").read_text()
    write(tmp_path, "a.yaml", src)
    write(tmp_path, "b.yaml", src)
    with pytest.raises(ConfigError, match="also defined in"):
        load_slos([tmp_path], BACKENDS)


def test_empty_directory_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="no SLO files"):
        load_slos([tmp_path], BACKENDS)


def test_cli_validate_exit_2_lists_problems(opsctl, tmp_path):
    write(tmp_path, "bad.yaml", "apiVersion: sre.google.com/v2\nkind: Nope\n")
    result = opsctl("slo", "validate", str(tmp_path), cwd=tmp_path)
    assert result.exit_code == 2
    assert "kind: must be 'ServiceLevelObjective'" in result.stderr
    assert "metadata: missing" in result.stderr


def test_cli_validate_passes_on_shipped_slos(opsctl):
    result = opsctl("slo", "validate", str(REPO / "slos"))
    assert result.exit_code == 0, result.output
    assert result.stdout.count("ok  ") == 9
