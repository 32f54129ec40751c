"""Shell completion completes values, not only subcommands (issue #27 item 13): backends,
`BACKEND=`, scenarios, SLO names, incident ids, read from the config the line names."""

from __future__ import annotations

import pytest

from opsctl.config.loading import DEFAULTS_DIR
from tests.conftest import REPO, run_opsctl


def complete(line: str, cwd) -> list[str]:
    """What bash's completion gets for the last word of `line` (Click's bash protocol, as the
    script `_OPSCTL_COMPLETE=bash_source opsctl` prints would ask)."""
    words = line.split(" ")
    result = run_opsctl(env={"_OPSCTL_COMPLETE": "bash_complete", "COMP_WORDS": line,
                             "COMP_CWORD": str(len(words) - 1)}, cwd=cwd)
    assert result.exit_code == 0 and not result.stderr, result.output
    return [item.split(",", 1)[1] for item in result.stdout.splitlines() if item.startswith("plain,")]


def test_the_bash_script_is_printed_for_the_documented_eval(tmp_path):
    result = run_opsctl(env={"_OPSCTL_COMPLETE": "bash_source"}, cwd=tmp_path)
    assert result.exit_code == 0 and "_opsctl_completion()" in result.stdout
    readme = (REPO / "README.md").read_text()
    assert 'eval "$(_OPSCTL_COMPLETE=bash_source opsctl)"' in readme


def test_the_fish_script_and_answer_are_one_line_per_completion(tmp_path):
    # opsctl's fish protocol (opsctl/cli/fish_complete.py): Click 8.4's script does not parse in fish 3.6
    result = run_opsctl(env={"_OPSCTL_COMPLETE": "fish_source"}, cwd=tmp_path)
    assert result.exit_code == 0 and "string split -- \\t $completion" in result.stdout, result.stdout
    assert "_OPSCTL_COMPLETE=fish_source opsctl | source" in (REPO / "README.md").read_text()
    answer = run_opsctl(env={"_OPSCTL_COMPLETE": "fish_complete", "COMP_WORDS": "opsctl traffic failover --from d",
                             "COMP_CWORD": "d"}, cwd=tmp_path)
    assert answer.exit_code == 0 and answer.stdout.splitlines() == ["plain\tdatabricks\t_"], answer.stdout


@pytest.mark.parametrize("line, expected", [
    ("opsctl traffic set ", ["internal=", "databricks="]),
    ("opsctl traffic set internal=30 ", ["databricks="]),           # what is given is not offered again
    ("opsctl traffic ramp d", ["databricks="]),
    ("opsctl traffic set databricks=70 --shadow ", ["internal=", "databricks="]),
    ("opsctl traffic failover --from ", ["internal", "databricks"]),
    ("opsctl shadow report --backend i", ["internal"]),
])
def test_backends_complete_from_the_config(tmp_path, line, expected):
    assert complete(line, tmp_path) == expected


def test_scenarios_complete_by_name(tmp_path):
    shipped = sorted(p.stem for p in (DEFAULTS_DIR / "chaos").glob("*.yaml"))
    assert complete("opsctl drill run ", tmp_path) == shipped
    assert complete("opsctl drill run vendor-", tmp_path) == [n for n in shipped if n.startswith("vendor-")]


def test_slo_names_complete_and_a_name_stands_for_its_file(tmp_path):
    names = complete("opsctl slo report llm-inference-databricks-a", tmp_path)
    assert names == ["llm-inference-databricks-availability"]
    validated = run_opsctl("slo", "validate", names[0], cwd=tmp_path)
    assert validated.exit_code == 0, validated.output
    assert validated.stdout.count("\n") == 1 and "databricks-availability.yaml" in validated.stdout


def test_incident_ids_complete_from_the_change_record_and_the_pager(tmp_path):
    assert complete("opsctl traffic restore --incident ", tmp_path) == []
    moved = run_opsctl("traffic", "failover", "--from", "databricks", "--incident", "INC-77", "--reason", "x",
                       "--yes", cwd=tmp_path)
    assert moved.exit_code == 0, moved.output
    assert complete("opsctl traffic restore --incident ", tmp_path) == ["INC-77"]
    assert complete("opsctl traffic history --incident INC", tmp_path) == ["INC-77"]
    paged = run_opsctl("page", "trigger", "-s", "databricks 5xx", "--component", "databricks", cwd=tmp_path)
    assert paged.exit_code == 0, paged.output
    assert complete("opsctl page ack ", tmp_path) == ["LP00001"]


def test_a_broken_config_completes_nothing_and_prints_no_error(tmp_path):
    (tmp_path / "opsctl.yaml").write_text("service: [unclosed\n")
    assert complete("opsctl traffic failover --from ", tmp_path) == []
