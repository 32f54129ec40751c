"""The chain runs at the scenario's hour (issue 37 item 2): its exporter draws the load of the
scenario's `start`, so the capacity guard sees the load it sees embedded and the same scenario on
the same config moves the same points in both worlds."""

from __future__ import annotations

import json
import math

import pytest

from tests.conftest import REPO, require_binary
from tests.drills.conftest import DrillEnv, audit
from tests.drills.test_production_config import production_text

PEAK_START = "2026-11-18T16:00:00Z"  # a Wednesday, 11:00 US Eastern: the weekday peak


def at_peak(data: dict) -> None:
    """vendor-outage at the story's peak (200,000 requests/s, 80% on databricks), half the vendor's
    requests failing and no pause, so the chain spends its time in the chain, not waiting."""
    data["environment"]["embedded"].update({"start": PEAK_START, "peak-rps": 200000})
    step = data["method"][0]
    step["pauses"] = {"before": "0s"}
    step["fault"]["rate"] = 0.5
    data["responders"]["on-call"]["acknowledge-after"] = "5s"


def failovers(run) -> list[dict]:
    return [e for e in audit(run) if e.get("kind") == "traffic" and e.get("action") == "failover"
            and e.get("outcome") == "applied"]


def first_move(run) -> int:
    """Points the first applied failover moved onto internal."""
    first = failovers(run)[0]
    return first["after"]["weights"]["internal"] - first["before"]["weights"]["internal"]


def expected_internal_share() -> int:
    """What the capacity guard lets internal carry at the peak, by hand: 400 replicas x 200 requests/s
    with 25% headroom carry 64,000 requests/s, against 200,000 x the simulator's share of peak at
    16:00 UTC on a Wednesday."""
    from opsctl.drills.fault_model import traffic_load
    from opsctl.drills.scenario.model import rfc3339

    load = traffic_load(rfc3339(PEAK_START))
    return math.floor(100 * 400 * 200 / 1.25 / (200000 * load))


def test_the_exporter_draws_the_load_of_the_scenarios_hour_whatever_the_wall_clock():
    from opsctl.drills.chain.exporter import ProxyExporter
    from opsctl.drills.chain.startup import scenario_offset
    from opsctl.drills.fault_model import traffic_load
    from opsctl.drills.scenario.model import rfc3339

    start = rfc3339(PEAK_START)
    wall = [rfc3339("2026-12-08T02:00:00Z")]  # 02:00 UTC: the night's trough
    offset = scenario_offset(start, wall[0])
    assert offset == start - wall[0]
    exporter = ProxyExporter({"internal": "internal", "databricks": "vendor"}, peak_rps=1000, seed=3,
                             split=lambda: {"internal": 20.0, "databricks": 80.0}, clock=lambda: wall[0],
                             offset=offset)
    wall[0] += 600
    exporter.advance()
    counts = exporter.outcomes_between(wall[0] - 600)
    total = sum(sum(v for k, v in c.items() if not k.startswith("slower")) for c in counts.values())
    # 600 s at 1000 x the peak hour's load, within the simulator's 3% + 2% noise and Poisson's.
    peak = 1000 * traffic_load(start) * 600
    night = 1000 * traffic_load(wall[0]) * 600
    assert night < 0.6 * peak  # the hours differ: the test means something
    assert total == pytest.approx(peak, rel=0.08)
    assert exporter.scenario_time(wall[0]) == start + 600


@pytest.fixture(scope="module")
def peak_runs(tmp_path_factory):
    """The at-peak outage on the production config, once embedded and once through the chain:
    (embedded run dir, chain run dir, chain report)."""
    for name in ("prometheus", "promtool", "prometheus-alertmanager", "amtool"):
        require_binary(name)
    embedded = DrillEnv(tmp_path_factory.mktemp("embedded"), production_text())
    result = embedded.run("drill", "run", str(embedded.scenario("vendor-outage", at_peak)), "-o", "json")
    assert json.loads(result.stdout)["mode"] == "embedded"
    chain = DrillEnv(tmp_path_factory.mktemp("chain"), production_text())
    result = chain.run("drill", "run", str(chain.scenario("vendor-outage", at_peak)), "--chain",
                       "--routing", str(REPO / "deploy" / "alertmanager.yml"), "-o", "json")
    report = json.loads(result.stdout)
    assert report["mode"] == "chain", result.output
    return embedded.run_dir(), chain.run_dir(), report


@pytest.mark.slow
@pytest.mark.prometheus
@pytest.mark.alertmanager
def test_an_at_peak_outage_moves_the_same_points_embedded_and_through_the_chain(peak_runs):
    embedded_run, chain_run, report = peak_runs
    moved_embedded, moved_chain = first_move(embedded_run), first_move(chain_run)
    # At the peak internal carries 32% of the traffic: a failover moves 12 of databricks' 80 points,
    # in both worlds (to the rounding of a measured rate), not the whole 80 a night's load allows.
    expected = expected_internal_share() - 20
    print(f"points moved onto internal: embedded {moved_embedded}, chain {moved_chain}, by hand {expected}")
    assert abs(moved_embedded - expected) <= 1, (moved_embedded, expected)
    assert abs(moved_chain - moved_embedded) <= 1, (moved_chain, moved_embedded)
    # The chain says what it still changes: the scenario's start, then the wall clock's pace.
    [hour] = [s for s in report["shortened"] if s["where"] == "environment.embedded.start"]
    assert hour["was"].startswith("2026-11-18T16:00:00Z") and "wall clock" in hour["now"]


def visible_timeline(markdown: str) -> list[str]:
    """The kinds in the report's main timeline table (before its collapsed list of every event)."""
    section = markdown.split("## Timeline", 1)[1].split("<details>", 1)[0].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| 20")]
    return [row[2] for row in rows]


@pytest.mark.slow
@pytest.mark.prometheus
@pytest.mark.alertmanager
def test_the_chain_reports_visible_timeline_has_every_hop_and_no_python_repr(peak_runs):
    from tests.drills.test_report_no_repr import reprs_in

    _, chain_run, report = peak_runs
    kinds = visible_timeline((chain_run / "report.md").read_text())
    # page, failover, acknowledgement, ticket and the restore (the drill's restore-traffic rollback)
    assert {"fault", "rule-firing", "pagerduty", "actuator", "acknowledged", "ticket", "rollback"} <= set(kinds), kinds
    restores = [e for e in report["timeline"] if e["kind"] == "rollback" and e["message"].startswith("restore-traffic")]
    assert restores and "rollback" in kinds
    for file in ("report.md", "report.html", "report.json"):
        assert reprs_in((chain_run / file).read_text()) == [], file
    [fault] = [e for e in report["timeline"] if e["kind"] == "fault"]
    assert "(rate=0.5; breaks the hop:" in fault["message"]
