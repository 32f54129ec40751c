"""No Python repr in a drill report (issue 37 item 7): the Markdown, HTML and JSON of every shipped
scenario's embedded run, and the chain's fault line, say dicts and lists as words, never `{'` / `['`."""

from __future__ import annotations

import pytest

from tests.drills.conftest import CHAOS, SHIPPED, DrillEnv

REPRS = ("{'", "['", "{&#x27;", "[&#x27;", '{\\"', "{&#39;", "[&#39;")


def reprs_in(text: str) -> list[str]:
    found = []
    for marker in REPRS:
        at = text.find(marker)
        if at >= 0:
            found.append(text[max(0, at - 80):at + 80])
    return found


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_scenarios_report_files_hold_no_python_repr(tmp_path, name):
    env = DrillEnv(tmp_path)
    env.run("drill", "run", str(CHAOS / f"{name}.yaml"))
    run = env.run_dir()
    for file in ("report.md", "report.html", "report.json"):
        assert reprs_in((run / file).read_text()) == [], file


def test_a_faults_parameters_are_said_as_the_simulators_spelling():
    from opsctl.drills.text import params_text

    assert params_text({"rate": 0.1}) == "rate=0.1"
    assert params_text({"rate": 0.1, "auth_rate": 0.2}) == "rate=0.1, auth_rate=0.2"
    assert params_text({"share": 0.1, "factor": 10.0}) == "share=0.1, factor=10"
    assert params_text({}) == "no parameters"
