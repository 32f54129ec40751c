"""The service catalog (opsctl.config.catalog): services/<name>.yaml over an optional
_defaults.yaml, picked by --service, found by --catalog / $OPSCTL_CATALOG / ./services/."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from opsctl.config.catalog import Catalog, deep_merge
from tests.conftest import REPO, run_opsctl, write_config

EXAMPLE = REPO / "examples" / "catalog"


def catalog(tmp_path: Path, files: dict[str, str]) -> Path:
    directory = tmp_path / "services"
    directory.mkdir()
    for name, text in files.items():
        (directory / name).write_text(textwrap.dedent(text))
    return directory


DEFAULTS = """\
    backends:
      internal: {kind: internal}
      databricks: {kind: vendor, vendor: databricks}
    metrics:
      prometheus: {url: "http://127.0.0.1:9091", timeout: 7}
    freezes:
      - {name: shared, start: "2026-12-20T00:00", end: "2026-12-27T00:00", timezone: UTC}
    state_dir: state
    """


def test_the_defaults_merge_under_each_service_key_by_key_and_the_service_file_wins(tmp_path):
    directory = catalog(tmp_path, {
        "_defaults.yaml": DEFAULTS,
        "chat.yaml": """\
            service: chat
            metrics:
              prometheus: {timeout: 3}
            freezes:
              - {name: own, start: "2026-12-01T00:00", end: "2026-12-02T00:00", timezone: UTC}
            """,
        "search.yaml": "service: search\n",
    })
    chat = Catalog(directory).load("chat")
    search = Catalog(directory).load("search")
    assert chat.metrics.prometheus.timeout == 3.0  # the service's own value
    assert chat.metrics.prometheus.url == "http://127.0.0.1:9091"  # its sibling key from the defaults
    assert [f.name for f in chat.freezes] == ["own"]  # a list is replaced whole, never appended to
    assert [f.name for f in search.freezes] == ["shared"]
    assert search.metrics.prometheus.timeout == 7.0
    assert set(search.backends) == {"internal", "databricks"}
    assert deep_merge({"a": {"b": 1, "c": [1]}}, {"a": {"c": [2]}}) == {"a": {"b": 1, "c": [2]}}


def test_each_service_keeps_its_state_slos_runbooks_rule_groups_and_lease_apart(tmp_path):
    directory = catalog(tmp_path, {"_defaults.yaml": DEFAULTS, "chat.yaml": "service: chat\n",
                                   "search.yaml": "service: search\nalerting: {rule_group_prefix: team-slo}\n"})
    chat, search = Catalog(directory).load_all()
    assert (chat.service, search.service) == ("chat", "search")  # name order
    assert chat.state_path.resolve() == (directory / "state" / "chat").resolve()
    assert search.state_path.resolve() == (directory / "state" / "search").resolve()
    assert chat.slo_dir.resolve() == (directory / "slos" / "chat").resolve()
    assert chat.path(chat.runbooks.dir).resolve() == (directory / "runbooks" / "chat").resolve()
    assert chat.alerting.rule_group_prefix == "opsctl-slo-chat"
    assert search.alerting.rule_group_prefix == "team-slo-search"
    assert chat.automation.leader_election.lease_name == "opsctl-chat-serve"
    assert chat.catalog == str(directory) and chat.requires_service_matcher
    assert chat.service_matcher == 'service="chat"'


def test_a_file_whose_service_differs_from_its_name_is_refused(tmp_path):
    directory = catalog(tmp_path, {"_defaults.yaml": DEFAULTS, "chat.yaml": "service: search\n"})
    result = run_opsctl("--catalog", directory, "config", "validate")
    assert result.exit_code == 2, result.output
    assert "differs from the file name 'chat'" in result.stderr
    assert "Traceback" not in result.output


def test_an_unknown_service_is_no_data_naming_the_known_ones(tmp_path):
    directory = catalog(tmp_path, {"_defaults.yaml": DEFAULTS, "chat.yaml": "service: chat\n",
                                   "search.yaml": "service: search\n"})
    result = run_opsctl("--catalog", directory, "--service", "mail", "freeze", "status")
    assert result.exit_code == 3, result.output
    assert "known: chat, search" in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 2  # the error and its hint


def test_several_services_without_a_choice_is_a_usage_error_with_the_list(tmp_path):
    directory = catalog(tmp_path, {"_defaults.yaml": DEFAULTS, "chat.yaml": "service: chat\n",
                                   "search.yaml": "service: search\n"})
    result = run_opsctl("--catalog", directory, "freeze", "status")
    assert result.exit_code == 2, result.output
    assert "2 services (chat, search)" in result.stderr and "--service NAME" in result.stderr
    picked = run_opsctl("--catalog", directory, "freeze", "status", "-o", "json", env={"OPSCTL_SERVICE": "search"})
    assert picked.exit_code == 0, picked.output


def test_a_catalog_of_one_service_needs_no_choice(tmp_path):
    directory = catalog(tmp_path, {"chat.yaml": DEFAULTS + "service: chat\n"})
    result = run_opsctl("--catalog", directory, "config", "show", "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["service"] == "chat"


def test_the_catalog_is_found_by_env_and_as_services_when_no_config_file_is_found(tmp_path):
    directory = catalog(tmp_path, {"chat.yaml": DEFAULTS + "service: chat\n"})
    by_env = run_opsctl("config", "show", "-o", "json", env={"OPSCTL_CATALOG": str(directory)}, cwd=REPO)
    assert by_env.exit_code == 0 and json.loads(by_env.stdout)["service"] == "chat", by_env.output
    local = run_opsctl("config", "show", "-o", "json", cwd=tmp_path)  # ./services/
    assert local.exit_code == 0 and json.loads(local.stdout)["service"] == "chat", local.output
    write_config(tmp_path)  # ./opsctl.yaml wins over ./services/
    own = run_opsctl("config", "show", "-o", "json", cwd=tmp_path)
    assert own.exit_code == 0 and json.loads(own.stdout)["service"] == "llm-inference", own.output


def test_a_config_file_and_a_catalog_at_once_is_refused(tmp_path):
    directory = catalog(tmp_path, {"chat.yaml": DEFAULTS + "service: chat\n"})
    result = run_opsctl("--config", write_config(tmp_path), "--catalog", directory, "config", "show")
    assert result.exit_code == 2, result.output
    assert "not both" in result.stderr


def test_a_single_config_still_must_be_the_service_named(tmp_path):
    result = run_opsctl("--config", write_config(tmp_path), "--service", "chat", "freeze", "status")
    assert result.exit_code == 2, result.output
    assert "describes service 'llm-inference'" in result.stderr


@pytest.mark.parametrize("label", ["__name__x", "1abc", "backend", "a-b"])
def test_a_service_label_that_is_no_free_label_name_is_refused(tmp_path, label):
    cfg = write_config(tmp_path, f"")
    text = cfg.read_text().replace("max_data_age: 3650d", f'max_data_age: 3650d\n  service_label: "{label}"')
    cfg.write_text(text)
    result = run_opsctl("--config", cfg, "config", "validate")
    assert result.exit_code == 2, result.output
    assert "service_label" in result.stderr


# -- slo validate: every selector carries the service ------------------------------------------


def test_the_example_catalog_validates_and_an_slo_without_the_matcher_is_refused(tmp_path):
    shutil.copytree(EXAMPLE, tmp_path / "catalog")
    services = tmp_path / "catalog" / "services"
    for service in ("chat", "search"):
        ok = run_opsctl("--catalog", services, "--service", service, "slo", "validate", "-o", "json")
        assert ok.exit_code == 0, ok.output
        assert {row["name"] for row in json.loads(ok.stdout)} == {
            f"{service}-internal-availability", f"{service}-databricks-availability", f"{service}-service-latency-1s"}
    slo = tmp_path / "catalog" / "slos" / "chat" / "internal-availability.yaml"
    slo.write_text(slo.read_text().replace('{service="chat",backend="internal",outcome="ok"}',
                                           '{backend="internal",outcome="ok"}'))
    refused = run_opsctl("--catalog", services, "--service", "chat", "slo", "validate")
    assert refused.exit_code == 2, refused.output
    assert 'filter_good: llm_proxy_requests_total{backend="internal",outcome="ok"} lacks service="chat"' in refused.stderr
    assert "filter_valid" not in refused.stderr  # the valid selector carries it
    assert "hint:" in refused.stderr
    other = slo.read_text().replace('{backend="internal",outcome="ok"}', '{service="search",backend="internal",outcome="ok"}')
    slo.write_text(other)  # another service's matcher is no better
    assert run_opsctl("--catalog", services, "--service", "chat", "slo", "validate").exit_code == 2


def test_a_single_config_keeps_its_unlabelled_slos_unless_it_asks_for_the_check(tmp_path):
    cfg = write_config(tmp_path, slo_dir=REPO / "opsctl" / "defaults" / "slos")
    assert run_opsctl("--config", cfg, "slo", "validate").exit_code == 0  # backwards compatible
    cfg.write_text(cfg.read_text().replace("period: 28d}", "period: 28d, require_service_matcher: true}"))
    result = run_opsctl("--config", cfg, "slo", "validate")
    assert result.exit_code == 2, result.output
    assert 'lacks service="llm-inference"' in result.stderr


def test_a_single_config_adds_the_matcher_only_when_it_names_the_label(tmp_path):
    from opsctl.config import load_config_file
    from opsctl.traffic.capacity import rate_query

    extra = "capacity: {backend: internal, source: static, replicas: 2, rps_per_replica: 10}\n"
    plain = load_config_file(write_config(tmp_path, extra))
    assert plain.service_labels == {} and plain.service_matcher == ""  # a proxy that predates the label
    assert rate_query(plain.capacity, scope=plain.service_matcher) == "sum(rate(llm_proxy_requests_total[300s]))"
    named = tmp_path / "named"
    named.mkdir()
    cfg = write_config(named, extra)
    cfg.write_text(cfg.read_text().replace("max_data_age: 3650d", "max_data_age: 3650d\n  service_label: svc"))
    labelled = load_config_file(cfg)
    assert labelled.service_labels == {"svc": "llm-inference"}
    assert rate_query(labelled.capacity, "internal", labelled.service_matcher) == \
        'sum(rate(llm_proxy_requests_total{svc="llm-inference",backend="internal"}[300s]))'
    assert not labelled.requires_service_matcher  # the check stays opt-in for a single config
