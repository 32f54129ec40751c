"""`--emergency` without `--incident` is refused with exit 2 naming the fix, and the refusal says
nothing was read or changed (it printed `unset -> unset ... (version None)`)."""

from __future__ import annotations

from tests.conftest import write_config


def test_emergency_without_incident_is_refused_with_the_fix_and_no_unset_split(opsctl, tmp_path):
    cfg = write_config(tmp_path)
    result = opsctl("--config", str(cfg), "traffic", "set", "internal=100", "--emergency", "--reason", "vendor down",
                    "--yes")
    assert result.exit_code == 2, result.output
    assert "--emergency needs --incident ID" in result.stderr
    assert "unset" not in result.output and "version None" not in result.output
    assert "refused   set: nothing changed" in result.output
    assert "(not read)" in result.output
