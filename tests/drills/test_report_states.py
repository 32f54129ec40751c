"""A drill's report says what it did not do: a preflight check that could not run is "skipped",
never "ok"; expectations an aborted drill never reached are "not evaluated", never FAIL."""

from __future__ import annotations

import json

import pytest

from tests.drills.conftest import DrillEnv


@pytest.fixture(scope="module")
def aborted(tmp_path_factory):
    """vendor-outage with a stop condition at 5% of the month's budget: it aborts minutes into the fault.
    The user's state dir holds no metric store, so the burn-rate preflight check cannot run."""
    env = DrillEnv(tmp_path_factory.mktemp("aborted"))

    def tight_budget(data):
        data["stop-conditions"][0]["above"] = 0.05

    result = env.run("drill", "run", str(env.scenario("vendor-outage", tight_budget)), "-o", "json")
    return env, result, json.loads(result.stdout)


def test_a_preflight_check_that_did_not_run_is_shown_as_skipped(aborted):
    env, result, report = aborted
    checks = {c["name"]: c for c in report["preflight"]}
    alerts = checks["no burn-rate alert firing"]
    assert alerts["status"] == "skipped" and alerts["message"].startswith("not checked: no embedded metrics")
    assert checks["no real incident open"]["status"] == "ok"
    md = (env.run_dir() / "report.md").read_text()
    assert "| no burn-rate alert firing | skipped: not checked" in md
    assert "| no burn-rate alert firing | ok" not in md
    assert '<td class="skip">skipped</td>' in (env.run_dir() / "report.html").read_text()
    assert "skipped: no burn-rate alert firing" in result.stderr  # the progress line


def test_expectations_an_aborted_drill_never_reached_are_not_evaluated(aborted):
    env, result, report = aborted
    assert result.exit_code == 1 and report["outcome"] == "aborted"
    by_name = {v["name"]: v for v in report["expectations"]}
    # 40 minutes after the fault: far past the abort, so it cannot have been decided.
    late = by_name["vendor responded, ticket still in inference"]
    assert late["result"] == "not evaluated" and late["passed"] is False
    assert late["reason"].startswith("not evaluated: the drill stopped before this was decided (stop condition")
    for v in report["expectations"]:
        assert "the drill ended first" not in v["reason"] and "not observed" not in v["reason"], v
        assert v["result"] in ("pass", "fail", "not evaluated")
    undecided = [v["name"] for v in report["expectations"] if v["result"] == "not evaluated"]
    md = (env.run_dir() / "report.md").read_text()
    for name in undecided:
        assert f"| not evaluated | {name} |" in md
    # Neither the failure summary nor the action items call them failures.
    [summary] = [line for line in result.stderr.splitlines() if line.startswith("error: drill aborted")]
    assert undecided and not any(name in summary for name in undecided)
    assert not any(name in item for item in report["action_items"] for name in undecided)
