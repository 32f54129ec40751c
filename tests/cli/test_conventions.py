"""The CLI conventions of docs/decisions/0009-cli-conventions.md and issue #27:
where the built-in default keeps its state, exit codes that say what happened, `-o` always the
format, one default instead of a required flag. Every run goes through the real `main()`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import REPO, run_opsctl, write_config


def state_home() -> Path:
    return Path(os.environ["XDG_STATE_HOME"])  # tests/conftest.py gives every test its own


# -- item 3: the built-in default's state ---------------------------------------------------------

def test_builtin_default_keeps_its_state_under_xdg_state_home_per_service_whatever_the_directory(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    expected = str(state_home() / "opsctl" / "llm-inference")
    for where in (one, two):
        shown = run_opsctl("config", "validate", "-o", "json", cwd=where)
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.stdout)["state_dir"] == expected
    assert not (one / ".opsctl").exists() and not (two / ".opsctl").exists()


def test_a_split_set_in_one_directory_is_seen_from_another(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    applied = run_opsctl("traffic", "set", "databricks=60", "internal=40", "--emergency", "--incident", "INC-9",
                         "--yes", cwd=one)
    assert applied.exit_code == 0, applied.output
    seen = run_opsctl("traffic", "status", "-o", "json", cwd=two)
    assert seen.exit_code == 0, seen.output
    assert json.loads(seen.stdout)["split"]["weights"] == {"internal": 40, "databricks": 60}


def test_without_xdg_state_home_the_state_goes_to_dot_local_state_in_home(tmp_path):
    shown = run_opsctl("config", "validate", "-o", "json", cwd=tmp_path, env={"XDG_STATE_HOME": None, "HOME": str(tmp_path)})
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["state_dir"] == str(tmp_path / ".local" / "state" / "opsctl" / "llm-inference")


def test_a_config_files_relative_state_dir_still_resolves_against_the_file(tmp_path):
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "opsctl.yaml").write_text("service: svc\nbackends: {a: {kind: internal}}\nstate_dir: st\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shown = run_opsctl("--config", conf_dir / "opsctl.yaml", "config", "validate", "-o", "json", cwd=elsewhere)
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["state_dir"] == str(conf_dir / "st")


# -- --service --------------------------------------------------------------------------------------

def test_service_option_and_environment_must_name_the_configs_service(tmp_path):
    assert run_opsctl("--service", "llm-inference", "config", "validate", cwd=tmp_path).exit_code == 0
    wrong = run_opsctl("--service", "search", "config", "validate", cwd=tmp_path)
    assert wrong.exit_code == 2
    assert wrong.stderr.startswith("error: --service search: <built-in> describes service 'llm-inference'")
    assert "hint:" in wrong.stderr
    by_env = run_opsctl("config", "validate", cwd=tmp_path, env={"OPSCTL_SERVICE": "search"})
    assert by_env.exit_code == 2 and "describes service 'llm-inference'" in by_env.stderr


# -- item 4: exit codes -----------------------------------------------------------------------------

def test_restore_of_an_incident_that_names_no_failover_is_no_data_exit_3(tmp_path):
    result = run_opsctl("traffic", "restore", "--incident", "INC-NEVER", "--yes", cwd=tmp_path)
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith("error: no applied failover is recorded for incident 'INC-NEVER'")


FROZEN = """\
freezes:
  - {name: launch, timezone: UTC, start: "2026-11-26T00:00:00", end: "2026-11-27T00:00:00", reason: launch}
"""


@pytest.mark.parametrize("at, flags, code", [
    ("2026-11-26T12:00:00Z", [], 0),                      # frozen, but nobody asked to fail on it
    ("2026-11-26T12:00:00Z", ["--fail-if-frozen"], 4),    # frozen: refused, as the freeze guard says it
    ("2026-11-28T12:00:00Z", ["--fail-if-frozen"], 0),    # not frozen
])
def test_freeze_status_fail_if_frozen_exits_4_only_while_frozen(tmp_path, at, flags, code):
    cfg = write_config(tmp_path, FROZEN)
    result = run_opsctl("--config", cfg, "freeze", "status", "--at", at, *flags)
    assert result.exit_code == code, result.output
    if code == 4:
        assert result.stderr.startswith("error: frozen: launch in force")
        assert "FROZEN  launch" in result.stdout  # the answer is still shown


# -- item 6: -o is the format; a directory is --out-dir ------------------------------------------------

def test_slo_convert_writes_a_directory_given_by_out_dir_and_o_is_not_a_directory(tmp_path):
    source = REPO / "slos" / "databricks-availability.yaml"
    out = tmp_path / "converted"
    written = run_opsctl("slo", "convert", source, "--to", "openslo", "--out-dir", out, cwd=tmp_path)
    assert written.exit_code == 0, written.output
    assert (out / "llm-inference-databricks-availability.yaml").is_file()
    refused = run_opsctl("slo", "convert", source, "--to", "openslo", "-o", "json", cwd=tmp_path)
    assert refused.exit_code == 2
    assert not (tmp_path / "json").exists(), "a directory named json must never be created"


# -- item 8: -o on every read command ----------------------------------------------------------------

def test_slo_validate_and_config_validate_take_o_json(tmp_path):
    slos = run_opsctl("slo", "validate", REPO / "slos", "-o", "json", cwd=tmp_path)
    assert slos.exit_code == 0, slos.output
    names = sorted(s["name"] for s in json.loads(slos.stdout))
    assert names == sorted(p.stem and _name(p) for p in (REPO / "slos").glob("*.yaml"))
    conf = run_opsctl("config", "validate", "-o", "yaml", cwd=tmp_path)
    assert conf.exit_code == 0, conf.output
    import yaml

    assert yaml.safe_load(conf.stdout)["ok"] is True


def _name(path: Path) -> str:
    import yaml

    return yaml.safe_load(path.read_text())["metadata"]["name"]


def test_a_minimal_config_validates_and_says_what_it_lacks_to_run(tmp_path):
    cfg = tmp_path / "opsctl.yaml"
    cfg.write_text("service: svc\nbackends: {a: {kind: internal}, b: {kind: vendor, vendor: v}}\n")
    result = run_opsctl("--config", cfg, "config", "validate", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert f"warning: slos.dir: {tmp_path / 'slos'} does not exist" in result.stdout
    assert "warning: traffic.default_split: not set" in result.stdout
    report = run_opsctl("--config", cfg, "slo", "report", cwd=tmp_path)
    assert report.exit_code == 2
    assert f"{tmp_path / 'slos'}: no such SLO file or directory" in report.stderr and "opsctl init" in report.stderr


# -- item 12: ticket file's category ------------------------------------------------------------------

def test_ticket_file_defaults_the_category_from_runbooks_tickets_category(tmp_path):
    shown = json.loads(run_opsctl("config", "show", "-o", "json", cwd=tmp_path).stdout)
    expected = shown["runbooks"]["tickets"]["category"]
    result = run_opsctl("ticket", "file", "--vendor", "databricks", "--severity", "Sev3",
                        "--subject", "drill ticket", "--drill", "-o", "json", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["category"] == expected == "inference"


# -- item 7: one split syntax ---------------------------------------------------------------------------

@pytest.fixture
def seeded(tmp_path):
    result = run_opsctl("sim", "generate", "--days", "1", "--ahead", "1h", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    return tmp_path


@pytest.mark.parametrize("argv", [
    ["traffic", "ramp", "databricks=100", "internal=0"],
    ["traffic", "ramp", "--to", "databricks=100", "internal=0"],  # what the issue typed: one target, not an error
    ["traffic", "ramp", "--to", "databricks=100", "--to", "internal=0"],  # the deprecated spelling still works
])
def test_ramp_takes_the_split_positionally_as_set_does(seeded, argv):
    result = run_opsctl(*argv, "--step", "10", "--interval", "0s", "--dry-run", "-o", "json", cwd=seeded)
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)["ramp"]["steps"]
    assert [s["weights"] for s in plan][-1] == {"internal": 0, "databricks": 100}
    assert ("deprecated" in result.stderr) == ("--to" in argv)


def test_extra_arguments_get_a_sentence_not_clicks_raw_message(tmp_path):
    result = run_opsctl("traffic", "failover", "--from", "databricks", "--incident", "INC-1", "internal=100",
                        "--dry-run", cwd=tmp_path)
    assert result.exit_code == 2
    assert "Got unexpected extra argument" not in result.stderr
    assert result.stderr.startswith("error: `opsctl traffic failover` takes no BACKEND=PCT here (internal=100)")


# -- item 10: --prometheus-url and $OPSCTL_PROMETHEUS_URL wherever metrics are read -----------------------

@pytest.mark.parametrize("argv", [
    ["traffic", "status"],
    ["traffic", "set", "databricks=70", "internal=30", "--reason", "x", "--yes"],
    ["traffic", "ramp", "internal=50", "--interval", "0s", "--reason", "x", "--yes"],
    ["traffic", "failover", "--from", "databricks", "--incident", "INC-1", "--dry-run"],
    ["slo", "report"],
    ["slo", "alerts"],
    ["quality", "alerts"],
])
@pytest.mark.parametrize("how", ["flag", "env"])
def test_every_command_that_reads_metrics_takes_a_prometheus_url(tmp_path, argv, how):
    """A URL nobody listens on: the command reaches for it (and says so) instead of the embedded store."""
    import socket

    with socket.socket() as s:  # a loopback port that was free a moment ago and has no listener
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    if how == "flag":
        result = run_opsctl(*argv, "--prometheus-url", url, cwd=tmp_path)
    else:
        result = run_opsctl(*argv, cwd=tmp_path, env={"OPSCTL_PROMETHEUS_URL": url})
    assert url in result.output, result.output
    assert "embedded" not in result.stderr.lower() or "metrics.sqlite" not in result.stderr


# -- item 5: the cross-check says it agreed ------------------------------------------------------------

@pytest.mark.slow
def test_slo_report_cross_check_says_that_slo_generator_agreed(seeded):
    slo_file = REPO / "slos" / "databricks-availability.yaml"
    result = run_opsctl("slo", "report", slo_file, "--cross-check", cwd=seeded)
    assert result.exit_code == 0, result.output
    assert ("cross-check: ok, slo-generator's SLI agrees with opsctl's on every window with data of 1 SLO(s)"
            in result.stderr)
    plain = run_opsctl("slo", "report", slo_file, cwd=seeded)
    assert plain.exit_code == 0 and "cross-check" not in plain.stderr


# -- item 8: drill report takes -o only ----------------------------------------------------------------------

@pytest.mark.slow
def test_drill_report_takes_its_formats_through_o(tmp_path):
    ran = run_opsctl("drill", "run", "escalation-only", "-q", cwd=tmp_path)
    assert ran.exit_code == 0, ran.output
    assert "--format" not in run_opsctl("drill", "report", "--help", cwd=tmp_path).stdout
    md = run_opsctl("drill", "report", "-o", "md", cwd=tmp_path)
    assert md.exit_code == 0 and md.stdout.startswith("# Drill report:"), md.output
    html = run_opsctl("drill", "report", "latest", "-o", "html", "--path", cwd=tmp_path)
    assert html.exit_code == 0 and html.stdout.strip().endswith("/report.html")
    as_json = run_opsctl("drill", "report", "-o", "json", cwd=tmp_path)
    assert json.loads(as_json.stdout)["outcome"] == "passed"
    old = run_opsctl("drill", "report", "--format", "md", cwd=tmp_path)
    assert old.stdout == md.stdout and "--format is deprecated: use -o md" in old.stderr
    both = run_opsctl("drill", "report", "--format", "md", "-o", "json", cwd=tmp_path)
    assert both.exit_code == 2


def test_source_embedded_on_the_line_beats_prometheus_url_from_the_environment(seeded):
    result = run_opsctl("slo", "report", REPO / "slos" / "databricks-availability.yaml", "--source", "embedded",
                        cwd=seeded, env={"OPSCTL_PROMETHEUS_URL": "http://127.0.0.1:9"})
    assert result.exit_code == 0, result.output
    both = run_opsctl("slo", "report", "--source", "embedded", "--prometheus-url", "http://127.0.0.1:9", cwd=seeded)
    assert both.exit_code == 2 and "contradict" in both.stderr
