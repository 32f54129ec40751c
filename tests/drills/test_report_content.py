"""What a drill report says: tolerances as text, a timeline of the rows that matter (the rest in a
collapsed details section), and action items from what the drill measured against named targets."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.drills.conftest import CHAOS


@pytest.fixture(scope="module")
def vendor(tmp_path_factory):
    from tests.drills.conftest import DrillEnv

    env = DrillEnv(tmp_path_factory.mktemp("content"))
    result = env.run("drill", "run", str(CHAOS / "vendor-outage.yaml"))
    assert result.exit_code == 0, result.output
    run = env.run_dir()
    return env, run, env.report(run)


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def test_the_tolerance_column_is_text_not_json(vendor):
    _, run, _ = vendor
    md = (run / "report.md").read_text()
    html = (run / "report.html").read_text()
    assert "| traffic split as configured | databricks 80, internal 20 |" in md
    assert "<td>databricks 80, internal 20</td>" in html
    for text in (md, html):
        assert '{"databricks"' not in text and "{&quot;databricks" not in text


def test_the_prediction_table_says_which_page_keeps_firing_after_its_condition_ends(vendor):
    """The fast tier's rule carries `keep_firing_for` (its own failover empties its short window);
    the drill's prediction table shows it beside `for:`, and no other tier has one."""
    _, run, data = vendor
    tiers = data["prediction"]["tiers"]
    keeps = {t["tier"]: t["keep_firing_seconds"] for t in tiers}
    # The drill's 28-day table: the slower page pairs' longest `for:` (2m) plus one evaluation of
    # their group (the drill's config evaluates every 1m).
    assert keeps["fast"] == 180 and all(v == 0 for tier, v in keeps.items() if tier != "fast"), keeps
    md = _section((run / "report.md").read_text(), "The burn-rate maths' prediction, and what each hop cost")
    assert "| for | keeps firing | predicted |" in md
    (fast_row,) = [line for line in md.splitlines() if line.startswith("| SloFastBurnPage (fast)")]
    assert "| 180s after its condition ends |" in fast_row


def test_the_timeline_keeps_the_rows_that_matter_and_collapses_the_rest(vendor):
    _, run, data = vendor
    md = (run / "report.md").read_text()
    main = _section(md, "Timeline").split("<details>", 1)[0]
    rows = [line for line in main.splitlines() if line.startswith("| 20")]
    kinds = [line.split(" | ")[2] for line in rows]
    # the events a reader follows, each there
    for kind in ("fault", "alert", "page", "ack", "failover", "ticket", "vendor", "recovered", "rollback"):
        assert kind in kinds, kind
    # the noise is not in the main table
    for noise in ("check", "probe", "setup", "automation", "expect", "phase", "settled", "verify"):
        assert noise not in kinds, noise
    assert len(rows) < len(data["timeline"]) / 2 + 5
    # but every event is still in the collapsed section and in the JSON
    details = md.split("<details>", 1)[1].split("</details>", 1)[0]
    assert len([line for line in details.splitlines() if line.startswith("| 20")]) == len(data["timeline"])
    html = (run / "report.html").read_text()
    assert re.search(r'<details id="all-events"><summary>All %d events' % len(data["timeline"]), html)
    main_html = html.split('<h2 id="timeline">', 1)[1].split("<details", 1)[0]
    assert "automation" not in re.findall(r"<td>(\w+)</td>", main_html)


def test_timeline_timestamps_do_not_wrap(vendor):
    _, run, data = vendor
    html = (run / "report.html").read_text()
    first = data["timeline"][0]["at"]
    assert f'<td class="nowrap">{first}</td>' in html
    assert ".nowrap{white-space:nowrap}" in html


def test_a_pass_with_a_slow_acknowledgement_has_an_action_item_naming_the_target(vendor):
    _, run, data = vendor
    assert data["outcome"] == "passed"
    scenario = yaml.safe_load((CHAOS / "vendor-outage.yaml").read_text())
    took = scenario["responders"]["on-call"]["acknowledge-after"]  # on-call acknowledges this long after the page
    assert took == "3m"
    item = "Acknowledgement: acknowledged 3m00s after the page, against a target of 2m00s."
    assert any(i.startswith(item) for i in data["action_items"]), data["action_items"]
    md = (run / "report.md").read_text()
    assert f"- {item}" in _section(md, "Action items")
    assert "none: every expectation" not in md


def _data(**measurements):
    return {"measurements": measurements, "expectations": [], "rollbacks": [], "leftovers": []}


def _items(data: dict) -> list[str]:
    """report.action_items of the data read as a stored report (drills.report_model.DrillReport)."""
    from opsctl.drills.report import action_items
    from opsctl.drills.report_model import DrillReport

    return action_items(DrillReport.parse(data))


def test_measured_steps_within_their_targets_make_no_action_item():
    data = _data(time_to_detect=120, time_to_page=125, time_to_acknowledge=125 + 120, time_to_mitigate=120 + 300,
                 time_to_vendor_routing=121)
    data["prediction"] = {"slo": "x", "predicted_detection_seconds": 120}
    assert _items(data) == []


def test_detection_slower_than_the_burn_rate_prediction_and_a_late_ticket_are_action_items():
    data = _data(time_to_detect=300, time_to_page=305, time_to_acknowledge=330, time_to_mitigate=320,
                 time_to_vendor_routing=300 + 420)
    data["prediction"] = {"slo": "llm-inference-databricks-availability", "predicted_detection_seconds": 120}
    items = _items(data)
    assert any(i.startswith("Detection: detected 5m00s after the fault, slower than the burn-rate prediction of"
                            " 2m00s (llm-inference-databricks-availability)") for i in items), items
    assert any(i.startswith("Vendor ticket: filed 7m00s after detection, against a target of 5m00s") for i in items)
    assert not any(i.startswith(("Acknowledgement", "Mitigation")) for i in items)


def test_a_step_whose_expectation_failed_is_not_reported_twice():
    data = _data(time_to_page=100, time_to_acknowledge=700)
    data["expectations"] = [{"name": "page acknowledged", "expect": "acknowledged", "passed": False,
                             "result": "fail", "reason": "met after 11m40s, past its deadline of 10m00s"}]
    items = _items(data)
    assert len([i for i in items if "cknowledge" in i]) == 1


def test_a_chain_drill_report_draws_its_hop_waterfall_instead_of_no_samples(vendor):
    from opsctl.drills.render import render_html, render_markdown
    from opsctl.drills.report_model import DrillReport

    _, _, data = vendor
    hops = [{"hop": "fault", "component": "exporter", "title": "fault switched on", "required": True,
             "passed": True, "seconds": 0.0, "failed": None},
            {"hop": "rule-firing", "component": "prometheus", "title": "burn-rate rule firing", "required": True,
             "passed": True, "seconds": 63.8, "failed": None},
            {"hop": "pagerduty", "component": "pagerduty", "title": "PagerDuty incident opened", "required": True,
             "passed": False, "seconds": None, "failed": "no route to the pager"}]
    chain = DrillReport.parse(dict(data, mode="chain", chart={}, hops=hops))  # hops and no samples
    html = render_html(chain)
    assert '<h2 id="hop-waterfall">Hops from the fault</h2>' in html
    assert "no samples to chart" not in html
    section = html.split('<h2 id="hop-waterfall">', 1)[1].split("</svg>", 1)[0]
    assert section.count('class="hop"') == 2 and "never happened: no route to the pager" in section
    md = render_markdown(chain)
    assert "| burn-rate rule firing | prometheus | 1m04s | ok |" in md
    assert "| PagerDuty incident opened | pagerduty | - | never happened: no route to the pager |" in md
