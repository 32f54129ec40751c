"""Every opsctl command quoted in a runbook parses against the real CLI.

Each command is run through the CLI's entry point (in-process, tests/cli/inprocess.py) against a temp copy of the shipped config:
commands that change something run with --dry-run, which also checks the backend, vendor, category
and severity names against the config (an unknown one is exit 2); the others run with --help, which
checks every option exists. A dry run may be refused by a guard (4) or lack data (3), never be a
usage error (2). The restore commands need a failover to restore from, so one is applied first.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import run_opsctl
from tests.runbooks.conftest import opsctl_commands

INCIDENT = "INC-RUNBOOK-TEST"
VALUES = {"$INCIDENT": INCIDENT, "$ACCEPTED_A": "4000", "$SESSIONS_A": "10000", "$ACCEPTED_B": "3990",
          "$SESSIONS_B": "10000"}
# (group, command) pairs that change something and take --dry-run
CHANGES = {("traffic", "failover"), ("traffic", "ramp"), ("traffic", "set"), ("traffic", "restore"),
           ("ticket", "file"), ("page", "trigger")}


def substitute(words: list[str]) -> list[str]:
    out = []
    for w in words:
        for name, value in VALUES.items():
            w = w.replace(name, value)
        assert "$" not in w, f"unresolved placeholder in {words}"
        out.append(w)
    return out


def how_to_run(words: list[str]) -> tuple[list[str], str]:
    """(argv after `opsctl`, mode): the command as quoted plus --dry-run or --help."""
    args = substitute(words[1:])
    if "--dry-run" in args:
        return args, "dry-run"
    if tuple(args[:2]) in CHANGES and "--abort" not in args and "--resume" not in args:
        return args + ["--dry-run"], "dry-run"
    return args + ["--help"], "help"


def run(argv: list[str], config) -> subprocess.CompletedProcess:
    result = run_opsctl(*argv, env={"OPSCTL_CONFIG": str(config), "OPSCTL_ACTOR": "runbook-test"}, cwd=config.parent)
    return subprocess.CompletedProcess(["opsctl", *argv], result.exit_code, result.stdout, result.stderr)


@pytest.fixture(params=["shipped", "enough-capacity"])
def generated(request, opsctl, shipped):
    """The shipped config, and one whose internal capacity carries a full failover at peak (its
    runbooks quote more command forms, e.g. shadow traffic after a vendor fix)."""
    if request.param == "enough-capacity":
        shipped.write_text(shipped.read_text().replace("  replicas: 6\n", "  replicas: 20\n")
                           .replace("  max_replicas: 6\n", "  max_replicas: 20\n"))
    out = shipped.parent / "runbooks"
    result = opsctl("--config", str(shipped), "runbook", "generate")
    assert result.exit_code == 0, result.output
    return {p.name: p.read_text() for p in sorted(out.glob("*.md"))}


def test_every_runbook_but_the_index_quotes_opsctl_commands(generated):
    for name, text in generated.items():
        if name != "README.md":
            assert opsctl_commands(text), f"{name} quotes no opsctl command"


def test_every_quoted_opsctl_command_parses_against_the_real_cli(generated, shipped):
    commands = {}
    for name, text in generated.items():
        for words in opsctl_commands(text):
            argv, mode = how_to_run(words)
            commands.setdefault(tuple(argv), (mode, name, " ".join(words)))
    assert len(commands) >= 40  # sanity: the extractor found the runbooks' commands
    if "replicas: 20" in shipped.read_text():
        assert any(argv[:2] == ("traffic", "set") and "--shadow" in argv for argv in commands)
    modes = {mode for mode, _, _ in commands.values()}
    assert modes == {"help", "dry-run"}

    # restore needs a failover of the incident to restore from: apply one for real in the temp state
    setup = run(["traffic", "failover", "--from", "databricks", "--incident", INCIDENT, "--yes"], shipped)
    assert setup.returncode == 0, setup.stdout + setup.stderr

    # one at a time: an in-process run owns the process's cwd, environment and streams
    results = dict(zip(commands, map(lambda argv: run(list(argv), shipped), commands)))

    failures = []
    for argv, proc in results.items():
        mode, name, quoted = commands[argv]
        ok = proc.returncode == 0 if mode == "help" else proc.returncode in (0, 3, 4)
        if not ok:
            failures.append(f"{name}: `{quoted}` ({mode}) exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    assert not failures, "\n".join(failures)


def test_a_command_with_a_wrong_backend_would_be_caught(shipped):
    """The check above has teeth: a dry run naming an unknown backend or category is a usage error."""
    bad_backend = run(["traffic", "failover", "--from", "dbx", "--incident", INCIDENT, "--dry-run"], shipped)
    assert bad_backend.returncode == 2, bad_backend.stderr
    bad_category = run(["ticket", "file", "--vendor", "databricks", "--category", "serving", "--severity", "Sev2",
                        "--subject", "x", "--dry-run"], shipped)
    assert bad_category.returncode == 2, bad_category.stderr
    bad_option = run(["traffic", "failover", "--form", "databricks", "--help"], shipped)
    assert bad_option.returncode == 2, bad_option.stderr
