"""Shared CLI value types: every time option says its zone, every choice ignores case, usage errors are one line."""

from __future__ import annotations

import importlib

import click
import pytest

from opsctl.cli.main import COMMANDS
from tests.cli.inprocess import invoke
from tests.conftest import write_config

NAIVE = "2026-11-26T15:00:00"

TIME_OPTIONS = [
    ("slo", "report", "--at"),
    ("slo", "alerts", "--at"),
    ("cost", "report", "--at"),
    ("shadow", "report", "--backend", "internal", "--at"),
    ("freeze", "status", "--at"),
    ("freeze", "list", "--at"),
    ("sim", "generate", "--dry-run", "--end"),
]


def all_commands():
    """(command path, click command) for every leaf command of the CLI."""
    def walk(path, cmd):
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                yield from walk(path + [name], sub)
        else:
            yield " ".join(path), cmd

    for name, (target, _) in COMMANDS.items():
        module, attr = target.split(":")
        yield from walk(["opsctl", name], getattr(importlib.import_module(module), attr))


@pytest.fixture
def cfg(tmp_path):
    return write_config(tmp_path)


@pytest.mark.parametrize("args", TIME_OPTIONS, ids=lambda a: " ".join(a[:2]))
def test_a_time_without_a_zone_is_refused_by_every_time_option(cfg, args):
    result = invoke("--config", cfg, *args, NAIVE)
    assert result.exit_code == 2, result.output
    assert "has no time zone: add Z for UTC or an offset like +01:00" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args", TIME_OPTIONS, ids=lambda a: " ".join(a[:2]))
def test_a_time_that_is_not_rfc3339_is_a_one_line_usage_error(cfg, args):
    result = invoke("--config", cfg, *args, "yesterday")
    assert result.exit_code == 2
    assert "'yesterday' is not an RFC 3339 time" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_every_time_option_uses_the_shared_time_type():
    from opsctl.cli.params import TimeParam

    found = {}
    for path, cmd in all_commands():
        for p in cmd.params:
            if isinstance(p, click.Option) and (p.metavar == "RFC3339" or p.name in ("at", "end", "end_at", "since")):
                found[f"{path} {p.opts[0]}"] = isinstance(p.type, TimeParam)
    assert found and all(found.values()), found
    assert {"opsctl slo report --at", "opsctl freeze status --at", "opsctl sim generate --end"} <= set(found)


def test_the_time_type_gives_the_instant_the_zone_names():
    import calendar

    from opsctl.cli.params import parse_time

    utc_15h = calendar.timegm((2026, 11, 26, 15, 0, 0))
    assert parse_time("2026-11-26T15:00:00Z") == utc_15h
    assert parse_time("2026-11-26T10:00:00-05:00") == utc_15h
    assert parse_time("2026-11-26T16:00:00+01:00") == utc_15h


def test_an_incident_start_without_a_zone_is_refused_too(cfg):
    result = invoke("--config", cfg, "sim", "generate", "--dry-run", "--days", "0.01", "--end", "2026-11-18T15:00:00Z",
                    "--incident", "vendor-5xx@2026-11-18T14:55:00+2m")
    assert result.exit_code == 2
    assert "has no time zone" in result.stderr


def test_every_choice_option_ignores_case():
    choices = {f"{path} {p.opts[0]}": p.type.case_sensitive
               for path, cmd in all_commands() for p in cmd.params if isinstance(p.type, click.Choice)}
    assert choices and not any(choices.values()), [k for k, v in choices.items() if v]


def test_severity_sev2_is_taken_as_Sev2(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the built-in default: Databricks tickets on the local ledger
    result = invoke("ticket", "file", "--category", "inference", "--severity", "sev2",
                    "--subject", "Model Serving 5xx", "-o", "json")
    assert result.exit_code == 0, result.output
    assert '"severity": "Sev2"' in result.stdout


def test_page_severity_and_output_format_in_capitals_are_taken(cfg):
    result = invoke("--config", cfg, "page", "trigger", "-s", "databricks 5xx", "--severity", "CRITICAL",
                    "--dry-run", "-o", "JSON")
    assert result.exit_code == 0, result.output
    assert '"dry_run": true' in result.stdout


def test_a_bad_choice_is_one_line_naming_the_options_and_the_help(cfg):
    result = invoke("--config", cfg, "page", "trigger", "-s", "x", "--severity", "sev9")
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and "'critical', 'error', 'warning', 'info'" in line
    assert "`opsctl page trigger --help`" in line


def test_a_group_without_a_command_still_shows_its_help():
    result = invoke("page")
    assert result.exit_code == 2 and "Commands:" in result.output
