"""Any config file, SLO file or drill scenario: `validate` exits 0, or 2 with one error naming the file."""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cli.inprocess import invoke
from tests.conftest import REPO
from tests.property.helpers import assert_clean, dump_yaml, mutate, values

SHIPPED_CONFIG = yaml.safe_load((REPO / "opsctl.yaml").read_text())
SLO_FILES = sorted((REPO / "slos").glob("*.yaml"))
SCENARIOS = sorted((REPO / "chaos").glob("*.yaml"))


def write(directory: str, name: str, content: str | bytes) -> Path:
    path = Path(directory) / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
    return path


def with_paths_pinned(config: dict, directory: str) -> dict:
    """The shipped config with its SLO dir and state under a temp dir (mutations may undo this)."""
    if isinstance(config, dict):
        config.setdefault("state_dir", str(Path(directory) / "state"))
        if isinstance(config.get("slos"), dict) and config["slos"].get("dir") == "slos":
            config["slos"]["dir"] = str(REPO / "slos")
    return config


@given(st.data())
def test_a_mutated_config_validates_or_names_the_file(data):
    with tempfile.TemporaryDirectory() as d:
        config = with_paths_pinned(mutate(SHIPPED_CONFIG, data.draw), d)
        path = write(d, "opsctl.yaml", dump_yaml(config))
        result = invoke("--config", path, "config", "validate")
        assert_clean(result, naming=str(path))


@given(st.one_of(st.binary(max_size=200), st.text(max_size=200), values.map(dump_yaml)))
def test_any_bytes_as_a_config_validate_or_name_the_file(content):
    with tempfile.TemporaryDirectory() as d:
        path = write(d, "opsctl.yaml", content)
        result = invoke("--config", path, "config", "validate")
        assert_clean(result, naming=str(path))


@given(st.data(), st.sampled_from(SLO_FILES))
def test_a_mutated_slo_file_validates_or_names_the_file(data, original):
    with tempfile.TemporaryDirectory() as d:
        doc = mutate(yaml.safe_load(original.read_text()), data.draw)
        path = write(d, original.name, dump_yaml(doc))
        result = invoke("slo", "validate", path, env={"OPSCTL_CONFIG": str(REPO / "opsctl.yaml")})
        assert_clean(result, naming=str(path))


@given(st.one_of(st.binary(max_size=200), values.map(dump_yaml)))
def test_any_bytes_as_an_slo_file_validate_or_name_the_file(content):
    with tempfile.TemporaryDirectory() as d:
        path = write(d, "x.yaml", content)
        result = invoke("slo", "validate", path, env={"OPSCTL_CONFIG": str(REPO / "opsctl.yaml")})
        assert_clean(result, naming=str(path))


@settings(max_examples=80)
@given(st.data(), st.sampled_from(SCENARIOS))
def test_a_mutated_scenario_validates_or_names_the_file(data, original):
    with tempfile.TemporaryDirectory() as d:
        doc = mutate(yaml.safe_load(original.read_text()), data.draw)
        path = write(d, original.name, dump_yaml(doc))
        result = invoke("drill", "validate", path, "--live", env={"OPSCTL_CONFIG": str(REPO / "opsctl.yaml")})
        assert_clean(result, naming=str(path))


@given(st.one_of(st.binary(max_size=200), values.map(dump_yaml)))
def test_any_bytes_as_a_scenario_validate_or_name_the_file(content):
    with tempfile.TemporaryDirectory() as d:
        path = write(d, "x.yaml", content)
        result = invoke("drill", "validate", path, env={"OPSCTL_CONFIG": str(REPO / "opsctl.yaml")})
        assert_clean(result, naming=str(path))
