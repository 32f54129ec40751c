"""An unknown `$NAME` placeholder in a runbook command, from a template or from a config value the
runbooks quote, is a one-line error (exit 2) naming where it is and the placeholders that exist."""

from __future__ import annotations

import shutil

from opsctl.runbooks.facts import PLACEHOLDERS
from tests.cli.inprocess import invoke
from tests.conftest import REPO

KNOWN = ", ".join(f"${p}" for p in PLACEHOLDERS)


def generate(config, *args):
    return invoke("--config", config, "runbook", "generate", "--dry-run", *args)


def test_an_unknown_placeholder_in_a_template_names_the_template_line_and_placeholder(shipped):
    overrides = shipped.parent / "runbooks" / "templates"
    overrides.mkdir(parents=True)
    template = overrides / "alert.md.j2"
    shutil.copy(REPO / "opsctl" / "runbooks" / "templates" / "alert.md.j2", template)
    lines = template.read_text().splitlines()
    template.write_text("\n".join(lines + ['{{ "curl https://status.example.com/$X" | sh }}']) + "\n")

    result = generate(shipped)

    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"error: runbook template {template}:{len(lines) + 1}: unknown placeholder $X")
    assert f"(known: {KNOWN})" in first


def test_an_unknown_placeholder_in_a_config_value_names_the_file_and_key(shipped):
    text = shipped.read_text()
    assert "  golden: golden.jsonl" in text
    shipped.write_text(text.replace("  golden: golden.jsonl", '  golden: "golden-$X.jsonl"'))

    result = generate(shipped)

    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.stderr.startswith(
        f"error: {shipped}: runbooks.golden: unknown placeholder $X in 'golden-$X.jsonl' (known: {KNOWN})")


def test_the_known_placeholders_still_expand(shipped):
    result = generate(shipped)
    assert result.exit_code == 0, result.output
