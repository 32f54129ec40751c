"""Completion completes names in a real interactive bash, zsh and fish under tmux (issue 35 item 4): the
script `_OPSCTL_COMPLETE=bash_source opsctl` (zsh_source, fish_source) prints, sourced; Tab pressed; the
screen read back. Fish runs opsctl's own fish script (opsctl/cli/fish_complete.py): Click's fails on fish 3.6."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent  # the venv's opsctl console script sits beside its python


def _tmux() -> str:
    found = shutil.which("tmux")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("tmux is not installed: the completion tests need it under CI")
        pytest.skip("tmux is not installed")
    if not (BIN / "opsctl").exists():
        pytest.fail(f"no opsctl console script in {BIN}: pip install -e . in this environment")
    return found


def _wait_for(tmux: str, session: str, what: str, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = subprocess.run([tmux, "capture-pane", "-p", "-t", session], capture_output=True, text=True,
                                timeout=10).stdout
        if what in screen:
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{what!r} not on the screen within {timeout}s:\n{screen}")


SHELLS = {  # the shell, how it starts bare, how the completion script is sourced, and how it says 42
    "bash": (["bash", "--norc", "--noprofile"], 'eval "$(_OPSCTL_COMPLETE=bash_source opsctl)"', "$((6*7))"),
    "zsh": (["zsh", "-f"], 'autoload -Uz compinit && compinit -u; eval "$(_OPSCTL_COMPLETE=zsh_source opsctl)"',
            "$((6*7))"),
    # fish: a plain `$ ` prompt (its default names user, host and directory), no autosuggestions
    "fish": (["fish", "--no-config"], "function fish_prompt; echo -n '$ '; end; set -g fish_autosuggestion_enabled 0;"
             " _OPSCTL_COMPLETE=fish_source opsctl | source", "(math 6 \\* 7)"),
}


@pytest.fixture(params=sorted(SHELLS))
def bash(request, tmp_path):
    tmux = _tmux()
    argv, source, forty_two = SHELLS[request.param]
    if shutil.which(argv[0]) is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{argv[0]} is not installed: the completion tests need it under CI")
        pytest.skip(f"{argv[0]} is not installed")
    session = f"opsctl-complete-{os.getpid()}-{time.monotonic_ns()}"
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path), "TERM": "xterm", "PS1": "$ "}
    subprocess.run([tmux, "new-session", "-d", "-s", session, "-x", "200", "-y", "50", "-c", str(tmp_path),
                    "env", "-i", *[f"{k}={v}" for k, v in env.items()], *argv],
                   check=True, timeout=20)
    try:
        def type_keys(*keys: str) -> None:
            subprocess.run([tmux, "send-keys", "-t", session, *keys], check=True, timeout=10)

        type_keys(f"{source}; echo sourced-{forty_two}", "Enter")
        _wait_for(tmux, session, "sourced-42")
        yield tmux, session, type_keys
    finally:
        subprocess.run([tmux, "kill-session", "-t", session], timeout=10)


@pytest.mark.slow
@pytest.mark.parametrize("typed, completed", [
    ("opsctl drill run vendor-o", "opsctl drill run vendor-outage"),
    ("opsctl slo report llm-inference-databricks-a", "opsctl slo report llm-inference-databricks-availability"),
    ("opsctl traffic failover --from datab", "opsctl traffic failover --from databricks"),
])
def test_tab_completes_the_name_in_a_real_bash(bash, typed, completed):
    tmux, session, type_keys = bash
    type_keys(typed, "Tab")
    screen = _wait_for(tmux, session, completed)
    # the prompt's line is the whole name (tmux drops the space the shell adds after a single match)
    assert any(line.rstrip().endswith(f" {completed}") and line.rstrip()[:-len(completed)].strip() in ("$", "%", "#")
               or line.rstrip().endswith(f"# {completed}") for line in screen.splitlines()), screen


@pytest.mark.slow
def test_tab_completes_an_incident_id_the_automation_wrote(bash, tmp_path):
    """`opsctl incident show <Tab>` in a real shell offers the id of an incident in the built-in
    config's state (HOME is tmp_path: $HOME/.local/state/opsctl/<service>), written by the store
    serve writes with."""
    from opsctl.automation.engine_factory import incident_store
    from opsctl.config.loading import BUILTIN_CONFIG, load_config_file
    from opsctl.incident.record import IncidentAlert

    cfg = load_config_file(BUILTIN_CONFIG)
    store = incident_store(cfg, directory=tmp_path / ".local" / "state" / "opsctl" / cfg.service)
    joined = store.take_alert(IncidentAlert(fingerprint="f00d", alertname="SloBurnRatePage",
                                            starts_at="2026-12-07T03:00:00Z", backend="databricks",
                                            cause="server_error"))
    assert joined is not None and joined.opened
    ident = joined.incident.id
    tmux, session, type_keys = bash
    typed = f"opsctl incident show {ident[:6]}"
    type_keys(typed, "Tab")
    screen = _wait_for(tmux, session, f"opsctl incident show {ident}")
    assert any(line.rstrip().endswith(f"opsctl incident show {ident}") for line in screen.splitlines()), screen
