"""`opsctl slo convert`: slo-generator <-> OpenSLO v1 keeps every SLO's meaning (a round trip loads back
to the same SLO, and the shipped SLOs converted give the same rules), and what has no counterpart
is refused with its file and key."""

from __future__ import annotations

import pytest
import yaml

from opsctl.slo.loading import load_slos
from tests.cli.inprocess import invoke
from tests.conftest import REPO, write_config
from tests.slo.test_slo_generator_forms import slo_file

BACKENDS = ["internal", "databricks"]
MEANING = ("name", "backend", "goal", "method", "filter_good", "filter_valid", "filter_bad", "operators",
           "expression", "service_name", "kind", "threshold_seconds")


def meaning(slo):
    return {attr: getattr(slo, attr) for attr in MEANING}


def convert(cfg, *args):
    return invoke("--config", cfg, "slo", "convert", *map(str, args))


@pytest.mark.parametrize("form", ["ratio-valid", "ratio-window-placeholder", "distribution-cut", "query-sli"])
def test_slo_generator_to_openslo_and_back_is_the_same_slo(tmp_path, form):
    source = tmp_path / "source"
    source.mkdir()
    path = slo_file(source, form)
    cfg = write_config(tmp_path, slo_dir=source)
    for step, to in (("openslo", "openslo"), ("back", "slo-generator")):
        result = convert(cfg, source if step == "openslo" else tmp_path / "openslo", "--to", to, "--out-dir", tmp_path / step)
        assert result.exit_code == 0, result.output
    [original] = load_slos([path], BACKENDS)
    [as_openslo] = load_slos([tmp_path / "openslo"], BACKENDS)
    [back] = load_slos([tmp_path / "back"], BACKENDS)
    assert as_openslo.source_format == "openslo" and back.source_format == "slo-generator"
    assert meaning(as_openslo) == meaning(original)
    assert meaning(back) == meaning(original)
    doc = yaml.safe_load((tmp_path / "openslo" / f"{form}.yaml").read_text())
    assert doc["spec"]["timeWindow"] == [{"duration": "28d", "isRolling": True}]
    assert doc["spec"]["budgetingMethod"] == "Occurrences"
    assert doc["spec"]["service"] == "checkout"


def test_openslo_to_slo_generator_and_back_is_the_same_slo(tmp_path):
    cfg = write_config(tmp_path)
    examples = REPO / "slos" / "examples" / "openslo"
    assert convert(cfg, examples, "--to", "slo-generator", "--out-dir", tmp_path / "sg").exit_code == 0
    assert convert(cfg, tmp_path / "sg", "--to", "openslo", "--out-dir", tmp_path / "again").exit_code == 0
    originals = {s.name: meaning(s) for s in load_slos([examples], BACKENDS)}
    for directory in ("sg", "again"):
        assert {s.name: meaning(s) for s in load_slos([tmp_path / directory], BACKENDS)} == originals, directory
    assert sorted(p.name for p in (tmp_path / "sg").iterdir()) == [
        "llm-inference-databricks-availability.yaml", "llm-inference-internal-latency-500ms.yaml"]


def test_the_shipped_slos_as_openslo_generate_the_same_rules(tmp_path):
    cfg = write_config(tmp_path)
    assert convert(cfg, REPO / "slos", "--to", "openslo", "--out-dir", tmp_path / "openslo").exit_code == 0
    assert len(list((tmp_path / "openslo").iterdir())) == 9
    rules = {}
    for name, directory in (("shipped", REPO / "slos"), ("openslo", tmp_path / "openslo")):
        result = invoke("--config", cfg, "slo", "rules", str(directory))
        assert result.exit_code == 0, result.output
        rules[name] = yaml.safe_load(result.stdout)
    assert rules["openslo"] == rules["shipped"]


@pytest.mark.parametrize("form, key, why", [
    ("ratio-bad", "spec.service_level_indicator.filter_bad", "no OpenSLO v1 form has the same counts"),
    ("ratio-operators", "spec.service_level_indicator.operators", "has no OpenSLO v1 form"),
])
def test_forms_without_an_openslo_counterpart_are_refused_with_file_and_key(tmp_path, form, key, why):
    path = slo_file(tmp_path, form)
    result = convert(write_config(tmp_path), path, "--to", "openslo")
    assert result.exit_code == 2
    assert f"{path}: {key}: " in result.stderr and why in result.stderr
    assert result.stdout == ""


def test_standard_output_holds_every_slo_as_one_yaml_stream(tmp_path):
    result = convert(write_config(tmp_path), REPO / "slos" / "databricks-availability.yaml",
                     REPO / "slos" / "internal-availability.yaml", "--to", "openslo")
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["metadata"]["name"] for d in docs] == ["llm-inference-databricks-availability",
                                                      "llm-inference-internal-availability"]
    assert {d["apiVersion"] for d in docs} == {"openslo/v1"}


def test_existing_files_are_not_overwritten_without_force(tmp_path):
    cfg = write_config(tmp_path)
    source = REPO / "slos" / "databricks-availability.yaml"
    out = tmp_path / "out"
    assert convert(cfg, source, "--to", "openslo", "--out-dir", out).exit_code == 0
    target = out / "llm-inference-databricks-availability.yaml"
    target.write_text("kept\n")
    result = convert(cfg, source, "--to", "openslo", "--out-dir", out)
    assert result.exit_code == 2
    assert str(target) in result.stderr and "--force" in result.stderr
    assert target.read_text() == "kept\n"
    assert convert(cfg, source, "--to", "openslo", "--out-dir", out, "--force").exit_code == 0
    assert yaml.safe_load(target.read_text())["apiVersion"] == "openslo/v1"


def test_openslo_fields_that_do_not_survive_are_named_on_stderr(tmp_path):
    result = convert(write_config(tmp_path), REPO / "slos" / "examples" / "openslo", "--to", "slo-generator")
    assert result.exit_code == 0, result.output
    assert "note: not carried into slo-generator's format: alertPolicies" in result.stderr


@pytest.mark.parametrize("args", [
    ("--to", "openslo"),  # no file
    ("slos/nowhere.yaml", "--to", "openslo"),
    ("slos/", "--to", "nobl9"),  # an unknown format (sloth and pyrra are known now)
    ("slos/",),  # no --to
])
def test_bad_arguments_exit_2(tmp_path, args):
    result = invoke("--config", write_config(tmp_path), "slo", "convert", *args)
    assert result.exit_code == 2, result.output


def test_help_shows_examples():
    result = invoke("slo", "convert", "--help")
    assert result.exit_code == 0
    assert "opsctl slo convert slos/ --to openslo --out-dir slos-openslo/" in result.stdout
