"""Reports (Markdown, JSON, self-contained HTML with the timeline and the burn chart), the drill
commands around them, and scenario validation errors that name the file and the key path."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.cli.inprocess import invoke
from tests.conftest import REPO
from tests.drills.conftest import CHAOS


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    from tests.drills.conftest import DrillEnv

    env = DrillEnv(tmp_path_factory.mktemp("report"))
    result = env.run("drill", "run", str(CHAOS / "vendor-outage.yaml"))
    assert result.exit_code == 0, result.output
    return env, result


def test_run_prints_progress_with_simulated_time_and_where_the_report_is(finished):
    env, result = finished
    run = env.run_dir()
    assert re.search(r"^\[sim 14:01:00 \+0m00s\] method +fault +Databricks answers 503", result.stderr, re.M)
    assert re.search(r"^\[sim 14:0\d:\d\d \+\dm\d\ds\] method +page +paged on-call via local", result.stderr, re.M)
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"drill {run.name}: PASSED")
    assert f"report: .opsctl/drills/{run.name}/report.md" in lines
    assert f"        .opsctl/drills/{run.name}/report.html" in lines


def test_the_html_report_is_self_contained_and_holds_the_timeline_and_the_burn_chart(finished):
    env, _ = finished
    html = (env.run_dir() / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html), "no external assets"
    assert "<script" not in html and "<link" not in html and "@import" not in html
    assert '<h2 id="timeline">Timeline</h2>' in html
    assert "Databricks answers 503 to 10% of requests" in html and "paged on-call via local" in html
    chart = re.search(r'<h2 id="burn-chart">.*?(<svg .*?</svg>)', html, re.S).group(1)
    assert chart.count("<polyline") >= 3, "burn rate over 5m and 1h and budget spent lines"
    assert "page 1h 13.44x" in chart and "page 5m 300x" in chart
    assert "stop 50%" in chart  # the scenario's budget-spent stop condition (service-availability above 0.5)
    for marker in ("fault", "detected", "paged", "ack", "failover", "ticket", "recovered"):
        assert f">{marker}</text>" in chart
    assert '<span class="badge passed">PASSED</span>' in html


def test_the_markdown_and_json_reports_carry_hypothesis_times_expectations_rollbacks_and_budget(finished):
    env, _ = finished
    md = (env.run_dir() / "report.md").read_text()
    for heading in ("## Scenario", "### Steady-state hypothesis", "## Response times (from the fault)",
                    "## Expectations", "## Error budget", "## Timeline", "## Rollbacks", "## Action items"):
        assert heading in md
    data = json.loads((env.run_dir() / "report.json").read_text())
    detect = data["measurements"]["time_to_detect"]
    assert f"| detect | {int(detect) // 60}m{int(detect) % 60:02d}s |" in md
    assert "| PASS | vendor ticket in the inference category |" in md
    assert "## The burn-rate maths' prediction, and what each hop cost" in md
    assert re.search(r"^- runbook it rehearses: `\S*runbooks/scenario-vendor-outage\.md`$", md, re.M)
    data = json.loads((env.run_dir() / "report.json").read_text())
    assert set(data["measurements"]) >= {"time_to_detect", "time_to_page", "time_to_acknowledge", "time_to_mitigate",
                                         "time_to_vendor_routing", "time_to_recover"}
    assert data["budget"]["basis"].startswith("period budget estimated from 3d of baseline traffic")
    spent = {row["slo"]: row["spent"] for row in data["budget"]["slos"]}
    assert 0 < spent["llm-inference-service-availability"] < 0.5
    # every expectation met; the one action item is the 3m acknowledgement against its 2m target
    assert [i.split(":")[0] for i in data["action_items"]] == ["Acknowledgement"]


def test_drill_report_and_list_runs_find_the_newest_run(finished):
    env, _ = finished
    run = env.run_dir()
    path = env.run("drill", "report", "latest", "-o", "html", "--path")
    assert path.exit_code == 0 and path.stdout.strip().endswith(f"{run.name}/report.html")
    shown = env.run("drill", "report", run.name[:20], "-o", "json")
    assert json.loads(shown.stdout)["run_id"] == run.name
    md = env.run("drill", "report", "-o", "md")
    assert md.stdout.startswith("# Drill report: Vendor outage")
    runs = json.loads(env.run("drill", "list", "--runs", "-o", "json").stdout)
    assert [(r["run_id"], r["outcome"], r["running"]) for r in runs] == [(run.name, "passed", False)]
    assert env.run("drill", "report", "nosuchrun").exit_code == 3


def test_drill_list_shows_the_shipped_scenarios_from_the_configured_directory(drill_env):
    result = drill_env.run("drill", "list", "-o", "json")
    assert result.exit_code == 0, result.output
    rows = {r["file"].rsplit("/", 1)[-1]: r for r in json.loads(result.stdout)}
    assert rows["vendor-outage.yaml"]["faults"] == ["vendor-5xx"]
    assert rows["escalation-only.yaml"]["faults"] == []
    assert all(r["valid"] for r in rows.values())


def test_the_built_in_default_finds_the_shipped_scenarios_without_a_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("drill", "validate", "-o", "json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)) >= 6


BAD = [
    ("title: [x]\nmethod: []\nexpectations: []\n", "title: expected a non-empty string"),
    ("title: t\nmethod: [{action: inject-fault, fault: {kind: vendor-5xx, duration: 5m, rate: 2}}]\n"
     "expectations: [{expect: paged, within: 5m}]\nrollbacks: [{action: remove-faults}, {action: resolve-pages}]\n",
     "method[0].fault.rate: must be above 0 and at most 1; got 2"),
    ("title: t\nmethod: [{action: wait, duration: soon}]\nexpectations: [{expect: paged, within: 5m}]\n"
     "rollbacks: [{action: resolve-pages}]\n", "method[0].duration: invalid duration 'soon'"),
    ("title: t\nmethod: [{action: explode}]\nexpectations: [{expect: paged, within: 5m}]\n",
     "method[0].action: must be one of inject-fault, wait, file-ticket, page, traffic-set, failover; got 'explode'"),
    ("title: t\nmethod: [{action: wait, duration: 1m}]\nexpectations: [{expect: paged, within: 5m, slo: x}]\n"
     "rollbacks: [{action: resolve-pages}]\n", "expectations[0].slo: unknown key"),
    ("title: t\nmethod: [{action: inject-fault, fault: {kind: vendor-5xx, duration: 5m}}]\n"
     "expectations: [{expect: paged, within: 5m}]\nrollbacks: [{action: resolve-pages}]\n",
     "rollbacks: must include {action: remove-faults}"),
    ("title: t\nmethod: [{action: wait, duration: 1m}]\nexpectations: [{expect: paged, within: 5m}]\n"
     "rollbacks: [{action: resolve-pages}]\nsteady-state: {}\n", "steady-state: unknown key"),
    ("title: t\nmethod: [{action: failover, from: mainframe}]\nexpectations: [{expect: paged, within: 5m}]\n"
     "rollbacks: [{action: restore-traffic}, {action: resolve-pages}]\n",
     "method[0].from: unknown backend 'mainframe' (known: databricks, internal)"),
    ("title: t\nmethod: [{action: wait, duration: 1m}]\n"
     "expectations: [{expect: slo-recovered, slo: nope-availability, within: 5m}]\nrollbacks: [{action: resolve-pages}]\n",
     "expectations[0].slo: unknown SLO 'nope-availability'"),
    ("title: t\nmethod: [{action: wait, duration: 1m}]\nexpectations: [{expect: paged, within: 3h}]\n"
     "rollbacks: [{action: resolve-pages}]\n", "expectations[0].within: 3h is beyond max-duration 2h"),
]


@pytest.mark.parametrize("text,problem", BAD, ids=[p for _, p in BAD])
def test_an_invalid_scenario_is_exit_2_naming_the_file_and_the_key_path(drill_env, text, problem):
    path = drill_env.root / "bad.yaml"
    path.write_text(text)
    result = drill_env.run("drill", "validate", str(path))
    assert result.exit_code == 2
    assert f"{path}: {problem}" in result.output
    run = drill_env.run("drill", "run", str(path))
    assert run.exit_code == 2 and problem in run.stderr
    assert not (drill_env.state / "drills").exists()


def test_a_yaml_syntax_error_names_the_line(drill_env):
    path = drill_env.root / "broken.yaml"
    path.write_text("title: t\nmethod: [\n")
    result = drill_env.run("drill", "validate", str(path))
    assert result.exit_code == 2 and f"{path}: YAML syntax error at line 3" in result.output


def test_drill_commands_start_without_the_heavy_clients():
    # A separate process is the point: a fresh interpreter shows what importing the commands pulls in.
    code = ("import sys; import opsctl.cli.drill_cmd, opsctl.drills.engine, opsctl.drills.cleanup; "
            "print([m for m in ('numpy', 'kubernetes', 'pagerduty', 'slo_generator') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={"PYTHONPATH": str(REPO)})
    assert out.stdout.strip() == "[]", out.stderr
