"""`opsctl slo rules` writes its YAML with libyaml's emitter where PyYAML has it, and the bytes are
the ones PyYAML's pure-Python emitter writes (the code before: commit 696bbb1): on the shipped SLOs
(slos/ and slos/examples/openslo/ with opsctl.yaml), on every service of the catalog example, in
both formats, and on generated strings, including those libyaml writes otherwise (a character
beyond the Basic Multilingual Plane, NEL, a block keeping its final line breaks), for which
render_yaml falls back to the pure-Python emitter."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from opsctl.slo.rules import render_yaml, same_in_libyaml
from tests.conftest import REPO, run_opsctl


def pure(document: dict[str, Any], header: str = "", base: type = yaml.SafeDumper) -> str:
    """render_yaml as it was before libyaml: PyYAML's SafeDumper (or `base`), multi-line strings as `|` blocks."""

    class Dumper(base):
        pass

    def text(dumper, value):
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    body = yaml.dump(document, Dumper=Dumper, sort_keys=False, width=1000, allow_unicode=True)
    return "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines()) + body


def documents(cfg, paths, fmt: str) -> tuple[dict, str]:
    """The rule document `opsctl slo rules` builds for `cfg` (with the live quality rules), and its header."""
    from opsctl.quality.rules import add_quality_group
    from opsctl.slo.loading import load_slos
    from opsctl.slo.rule_plan import RuleSettings, plan_rules
    from opsctl.slo.rules import header, rules_document

    settings_ = RuleSettings.from_config(cfg)
    plans = plan_rules(load_slos(paths, cfg.backends, config=cfg), settings_)
    document = rules_document(plans, settings_, fmt)
    add_quality_group(document, cfg)
    return document, header(plans, settings_)


def shipped() -> list[tuple[str, Any, list]]:
    from opsctl.config.catalog import Catalog
    from opsctl.config.loading import load_config_file

    main = load_config_file(REPO / "opsctl.yaml")
    out = [("slos", main, [main.slo_dir]), ("openslo-examples", main, [REPO / "slos" / "examples" / "openslo"])]
    out += [(f"catalog-{cfg.service}", cfg, [cfg.slo_dir])
            for cfg in Catalog(REPO / "examples" / "catalog" / "services").load_all()]
    assert len(out) == 4  # the two catalog services, chat and search
    return out


def test_libyaml_is_there_to_be_used():
    assert getattr(yaml, "CSafeDumper", None) is not None, "PyYAML without libyaml: the pure emitter is used"


@pytest.mark.parametrize("fmt", ["rules", "prometheusrule"])
def test_the_shipped_slos_and_the_catalogs_rules_are_written_as_the_pure_emitter_writes_them(fmt):
    for name, cfg, paths in shipped():
        document, lead = documents(cfg, paths, fmt)
        assert same_in_libyaml(document), name  # libyaml writes these
        assert render_yaml(document, lead) == pure(document, lead), name


def test_the_command_prints_those_bytes(tmp_path):
    from opsctl.config.loading import load_config_file

    cfg = load_config_file(REPO / "opsctl.yaml")
    document, lead = documents(cfg, [cfg.slo_dir], "rules")
    result = run_opsctl("--config", REPO / "opsctl.yaml", "slo", "rules")
    assert result.exit_code == 0, result.output
    assert result.stdout == pure(document, lead)
    written = tmp_path / "rules.yaml"
    assert run_opsctl("--config", REPO / "opsctl.yaml", "slo", "rules", "--out", written).exit_code == 0
    assert written.read_text(encoding="utf-8") == pure(document, lead)


DIFFERS = ["emoji \U0001f600", "x\x85y", "end\n\n", "\n", "a\n\u2028", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 beyond the BMP"]
KEYS_DIFFER = ["", "k" * 125, "ü" * 65, "\r"]  # `? key` in PyYAML beyond 124 characters, libyaml 128 bytes
SAME = ["k" * 120, "plain", "yes", "1.0", "a: b", "x #y", "trailing space ", "multi\nline\n", "multi\nline \n", "tab\tin",
        "ünïcode — dash", "\x07bell", "a\u2028b", "\ufeffbom", "long " * 300, "{{ $labels.x }}", "", "a\r\nb",
        "\nleading newline", "中文", "x" * 1200]


def rule(value: str, key: str = "summary") -> dict:
    return {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up == 0", "annotations": {key: value}}]}],
            "after": "last"}


@pytest.mark.parametrize("value", DIFFERS)
def test_a_string_libyaml_writes_otherwise_falls_back_to_the_pure_emitter(value):
    assert pure(rule(value), "h", getattr(yaml, "CSafeDumper")) != pure(rule(value), "h")  # libyaml's differs
    assert not same_in_libyaml(rule(value)) and not same_in_libyaml(rule("x", key=value))
    assert render_yaml(rule(value), "h") == pure(rule(value), "h")


@pytest.mark.parametrize("key", KEYS_DIFFER)
def test_a_key_libyaml_writes_otherwise_falls_back_to_the_pure_emitter(key):
    assert pure(rule("x", key=key), "h", getattr(yaml, "CSafeDumper")) != pure(rule("x", key=key), "h")
    assert not same_in_libyaml(rule("x", key=key))
    assert render_yaml(rule("x", key=key), "h") == pure(rule("x", key=key), "h")


@pytest.mark.parametrize("value", SAME)
def test_a_string_both_emitters_write_alike_is_written_by_libyaml(value):
    assert same_in_libyaml(rule(value))
    assert render_yaml(rule(value)) == pure(rule(value)) == pure(rule(value), "", getattr(yaml, "CSafeDumper"))


# Strings of any character (lone surrogates, astral ones, NEL, every line break) and keys of any
# length; and the Basic Multilingual Plane's strings without NEL, which libyaml is trusted with.
ANY = st.characters()
BMP = st.characters(max_codepoint=0xFFFF, exclude_characters="\x85", exclude_categories=("Cs",))
SPECIAL = "\n\r\t \u2028\u2029\ufeff\x00\x7f\xa0ab:#|-'\"&*!%@`,[]{}>?=~"


def documents_of(chars, special=SPECIAL + "\x85\U0001f600", long_keys="ké\t:#'\"?-ü😀\r", longest=130):
    keys = st.one_of(st.text(chars, min_size=1, max_size=30), st.text(long_keys, min_size=100, max_size=longest))
    scalars = st.one_of(st.text(chars, max_size=60), st.text(special, max_size=16), st.integers(),
                        st.floats(allow_nan=False), st.booleans(), st.none())
    trees = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                          st.dictionaries(keys, inner, max_size=4)), max_leaves=20)
    return st.dictionaries(keys, trees, min_size=1, max_size=4)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(documents_of(ANY))
def test_any_document_is_written_as_the_pure_emitter_writes_it(document):
    assert render_yaml(document, "header") == pure(document, "header")


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(documents_of(BMP, SPECIAL, long_keys="k\t:#'\"?-", longest=120))
def test_a_document_libyaml_is_trusted_with_is_written_by_it_as_the_pure_emitter_writes_it(document):
    assume(same_in_libyaml(document))
    assert pure(document, "header", getattr(yaml, "CSafeDumper")) == pure(document, "header")
    assert render_yaml(document, "header") == pure(document, "header")
