"""`opsctl drill history`: detect, mitigate and budget spent across a scenario's runs, the newest
against the median of the earlier ones, as a table, JSON and an SVG chart in an HTML file."""

from __future__ import annotations

import json
import re
import statistics
import xml.etree.ElementTree as ET

import pytest
import yaml

from tests.drills.conftest import CHAOS

NS = "{http://www.w3.org/2000/svg}"


def _variant(env, sub: str, rate: float, ack: str):
    """vendor-outage (same file name, so the same scenario) with another fault rate and acknowledgement."""
    data = yaml.safe_load((CHAOS / "vendor-outage.yaml").read_text())
    data["method"][0]["fault"]["rate"] = rate
    data["responders"]["on-call"]["acknowledge-after"] = ack
    data["responders"]["on-call"]["escalate-after"] = "10m"
    path = env.root / sub / "vendor-outage.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    from tests.drills.conftest import DrillEnv

    env = DrillEnv(tmp_path_factory.mktemp("history"))
    for sub, rate, ack in (("slow", 0.05, "1m"), ("fast", 0.2, "6m")):
        result = env.run("drill", "run", str(_variant(env, sub, rate, ack)))
        assert result.exit_code == 0, result.output
    runs = sorted(env.runs())  # oldest first
    return env, [env.report(r) for r in runs]


def _expected(report: dict) -> dict:
    spent = max(r["spent"] for r in report["budget"]["slos"] if r["spent"] is not None)
    return {"run_id": report["run_id"], "detect": report["measurements"]["time_to_detect"],
            "mitigate": report["measurements"]["time_to_mitigate"], "budget_spent": spent,
            "action_items": len(report["action_items"]), "outcome": report["outcome"], "mode": "embedded"}


def test_history_json_has_each_run_oldest_first_with_what_it_measured_and_the_trend(two_runs):
    env, reports = two_runs
    result = env.run("drill", "history", "vendor-outage", "-o", "json")
    assert result.exit_code == 0, result.output
    [group] = json.loads(result.stdout)
    assert group["scenario"] == "vendor-outage"
    got = [{k: r[k] for k in ("run_id", "detect", "mitigate", "budget_spent", "action_items", "outcome", "mode")}
           for r in group["runs"]]
    want = [_expected(r) for r in reports]
    assert got == want
    # the two variants measured differently: the newest against the one before it
    first, last = want
    assert last["detect"] < first["detect"]  # a faster burn is detected sooner
    assert group["trend"]["detect"] == {"last": last["detect"], "before": first["detect"],
                                        "direction": "better", "runs": 2}
    assert group["trend"]["mitigate"]["direction"] == "better"
    # the slow acknowledgement (6m after the page) is an action item; the 1m one is not
    assert (first["action_items"], last["action_items"]) == (0, 1)


def test_history_table_shows_a_row_a_run_and_the_trend_line(two_runs):
    env, reports = two_runs
    result = env.run("drill", "history", "vendor-outage")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("vendor-outage: Vendor outage")
    rows = [line.split() for line in lines if line.startswith("20")]
    assert [r[0] for r in rows] == [r["run_id"] for r in reports]
    d0 = reports[0]["measurements"]["time_to_detect"]
    assert rows[0][3] == f"{int(d0) // 60}m{int(d0) % 60:02d}s"
    [trend] = [line for line in lines if line.startswith("trend: ")]
    assert trend.startswith("trend: detect ") and "(better than the median" in trend
    result = env.run("drill", "history", "vendor-outage", "-o", "yaml")
    assert yaml.safe_load(result.stdout)[0]["scenario"] == "vendor-outage"


def test_history_html_is_a_self_contained_chart_with_a_mark_per_run(two_runs, tmp_path):
    env, reports = two_runs
    out = tmp_path / "history.html"
    result = env.run("drill", "history", "vendor-outage", "--html", str(out))
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<script" not in html
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html)
    svg = ET.fromstring(re.search(r"<svg .*?</svg>", html, re.S).group(0))
    dots = [c for c in svg.iter(f"{NS}circle") if c.get("class") == "run"]
    bars = [r for r in svg.iter(f"{NS}rect") if r.get("class") == "run"]
    assert len(dots) == 2 * len(reports)  # time to detect and time to mitigate, a dot per run
    assert len(bars) == len(reports)  # budget spent, a bar per run
    # the detect panel's dots: the faster run's dot is lower on the chart (larger y) in proportion
    detect = dots[:2]
    ys = [float(c.get("cy")) for c in detect]
    assert ys[1] > ys[0]
    heights = [float(b.get("height")) for b in bars]
    spent = [_expected(r)["budget_spent"] for r in reports]
    assert abs(heights[0] / heights[1] - spent[0] / spent[1]) < 0.02
    assert "chart: " in result.stdout


def test_drill_list_runs_points_to_history(two_runs):
    env, _ = two_runs
    result = env.run("drill", "list", "--runs")
    assert result.exit_code == 0
    assert "opsctl drill history SCENARIO" in result.stdout


def test_no_finished_run_is_exit_3_in_one_line(drill_env):
    result = drill_env.run("drill", "history", "vendor-outage")
    assert result.exit_code == 3
    assert "no finished drill runs of scenario 'vendor-outage'" in result.output
    assert "Traceback" not in result.output


def _report(root, run_id, mode, detect, spent, scenario="vendor-outage", started="2026-11-18T14:00:00Z"):
    d = root / run_id
    d.mkdir(parents=True)
    (d / "report.json").write_text(json.dumps({
        "run_id": run_id, "mode": mode, "outcome": "passed", "started_at": started,
        "scenario": {"name": scenario, "title": "t"},
        "measurements": {"time_to_detect": detect, "time_to_mitigate": None},
        "budget": {"slos": [{"slo": "a", "spent": spent}, {"slo": "b", "spent": spent / 2}]}, "action_items": []}))


def test_history_filters_by_mode_and_scenario_and_skips_runs_without_a_report(tmp_path):
    from opsctl.drills.history import load_history, trend

    _report(tmp_path, "20261118T140000Z-vendor-outage-aaaa", "embedded", 120, 0.08)
    _report(tmp_path, "20261118T150000Z-vendor-outage-bbbb", "chain", 64, 0.03, started="2026-11-18T15:00:00Z")
    _report(tmp_path, "20261118T160000Z-vendor-outage-cccc", "embedded", 180, 0.08, started="2026-11-18T16:00:00Z")
    _report(tmp_path, "20261118T170000Z-escalation-only-dddd", "embedded", 60, 0.01, scenario="escalation-only",
            started="2026-11-18T17:00:00Z")
    (tmp_path / "20261118T180000Z-vendor-outage-eeee").mkdir()  # still running: no report.json
    groups = load_history(tmp_path, "chaos/vendor-outage.yaml", "embedded")
    assert list(groups) == ["vendor-outage"]
    runs = groups["vendor-outage"]
    assert [r.run_id[-4:] for r in runs] == ["aaaa", "cccc"]
    assert [r.budget_spent for r in runs] == [0.08, 0.08]  # the largest share any SLO spent
    t = trend(runs)
    assert t["detect"]["direction"] == "worse" and t["detect"]["before"] == 120
    assert t["budget_spent"]["direction"] == "same"
    assert t["mitigate"]["direction"] == "unknown"
    assert set(load_history(tmp_path)) == {"vendor-outage", "escalation-only"}


def test_the_trend_compares_the_newest_run_with_the_median_of_the_earlier_ones():
    from opsctl.drills.history import HistoryRun, trend

    def run(i, detect):
        return HistoryRun(run_id=f"r{i}", scenario="s", title="", mode="embedded", started_at=float(i),
                          outcome="passed", detect=detect)

    values = [100.0, 400.0, 120.0, 130.0]
    runs = [run(i, v) for i, v in enumerate(values)]
    before = statistics.median(values[:-1])  # 120: the outlier 400 does not move it
    t = trend(runs)["detect"]
    assert t["before"] == before and t["last"] == 130.0
    assert t["direction"] == "worse"  # 130 > 120 by more than 5%
    assert trend(runs[:3] + [run(9, before * 1.04)])["detect"]["direction"] == "same"
    assert trend(runs[:1])["detect"]["direction"] == "first run"


def test_the_readme_history_example_runs_as_written(two_runs):
    from tests.drills.test_readme_examples import drill_lines

    env, reports = two_runs
    [args] = [a for a in drill_lines() if a[:2] == ["drill", "history"]]
    result = env.run(*args)
    assert result.exit_code == 0, result.output
    assert (env.root / "history.html").is_file()
    assert all(r["run_id"] in result.stdout for r in reports)


def test_an_html_file_that_cannot_be_written_is_one_line_exit_2(two_runs, tmp_path):
    env, _ = two_runs
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = env.run("drill", "history", "vendor-outage", "--html", str(blocker / "history.html"))
    assert result.exit_code == 2
    assert f"cannot write {blocker / 'history.html'}" in result.output and "Traceback" not in result.output


def _mixed_runs():
    from opsctl.drills.history import HistoryRun

    def run(i, mode, detect):
        return HistoryRun(run_id=f"r{i}", scenario="s", title="", mode=mode, started_at=float(i),
                          outcome="passed", detect=detect, mitigate=detect + 1)

    return [run(0, "embedded", 100.0), run(1, "chain", 30.0), run(2, "embedded", 120.0), run(3, "chain", 33.0),
            run(4, "embedded", 130.0)]


def test_the_trend_compares_like_with_like_a_chain_run_never_against_embedded_ones():
    from opsctl.drills.history import trend, trend_text

    runs = _mixed_runs()
    # The newest (embedded, 130) against the median of the earlier embedded ones (100, 120): 110,
    # worse; with the chain runs (30, 33) in, the median of 100, 30, 120, 33 would be 66.5.
    t = trend(runs)
    assert t["detect"] == {"last": 130.0, "before": 110.0, "direction": "worse", "runs": 3}
    assert t["compared"] == {"mode": "embedded", "runs": 3, "left_out": 2}
    assert "embedded runs only (2 of other modes left out" in trend_text(t)
    # The newest chain run (33) against the one chain run before it (30): 10% slower, worse; not
    # "better" than the embedded runs' 100-120 s.
    t = trend(runs[:4])
    assert t["detect"] == {"last": 33.0, "before": 30.0, "direction": "worse", "runs": 2}
    assert t["compared"] == {"mode": "chain", "runs": 2, "left_out": 2}
    assert trend(runs[:2])["detect"]["direction"] == "first run"  # the first chain run has nothing like it


def test_the_history_chart_marks_each_runs_mode_and_joins_only_runs_of_one_mode():
    from opsctl.drills.svg_trend import trend_chart

    runs = [r.to_dict() for r in _mixed_runs()]
    svg = ET.fromstring(trend_chart(runs))
    dots = [c for c in svg.iter(f"{NS}circle") if c.get("class") == "run"]
    assert [c.get("data-mode") for c in dots[:5]] == ["embedded", "chain", "embedded", "chain", "embedded"]
    assert all(c.get("fill") == "#ffffff" for c in dots if c.get("data-mode") == "chain")  # a ring
    assert all(c.get("fill") != "#ffffff" for c in dots if c.get("data-mode") == "embedded")
    lines = [p for p in svg.iter(f"{NS}polyline")]
    # two panels of lines (detect, mitigate), one line per mode in each, each through its mode's runs only
    assert sorted(p.get("data-mode") for p in lines) == ["chain", "chain", "embedded", "embedded"]
    assert [len(p.get("points").split()) for p in lines[:2]] == [3, 2]
    labels = [t.text for t in svg.iter(f"{NS}text") if (t.text or "").startswith("#")]
    assert [label.split()[0] for label in labels[:5]] == ["#1E", "#2C", "#3E", "#4C", "#5E"]
