"""What a drill's report files hold, pinned before the report became a typed model (#26 item 1):
for the same drills report.json, report.md and report.html stay byte for byte what the code wrote
before (a passed vendor outage with an action item, the freeze incident, a run aborted by a stop
condition, a run refused by its steady state, an interrupted run's report from its state, a chain
drill's report), and so do `drill run -o json`, the summary table and `drill report -o json`.

The expected files in report_pins/ were written by the code before the model (commit 7e02828, with
alerts resolving at one instant said in sorted order, as observe.py now does whatever the hash seed), with
what differs between runs replaced (`normalised`): the run id's time and random tail, the wall-clock
start and end, the wall seconds and each phase's seconds, the temp dir and the repository's path.
Simulated times, the seeded store's data and everything derived from them are left as written.
To write them again (only for a deliberate change of the report): OPSCTL_PIN_WRITE=1 pytest this file.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.drills.conftest import DrillEnv

PINS = Path(__file__).with_name("report_pins")
WRITE = os.environ.get("OPSCTL_PIN_WRITE") == "1"
RUN_ID = re.compile(r"\b\d{8}T\d{6}Z-([a-z0-9-]+?)-[0-9a-f]{4}\b")
WALL = {"md": (re.compile(r"· \d+\.\d s of wall time"), "· 1.0 s of wall time"),
        "html": (re.compile(r"· \d+\.\d s wall time"), "· 1.0 s wall time"),
        "txt": (re.compile(r" in \d+\.\d s wall"), " in 1.0 s wall")}


def _json_normalised(text: str) -> str:
    """report.json with its wall-clock numbers fixed (parsed and dumped as the writer dumps it, so
    every other byte, key order included, is the file's own)."""
    data = json.loads(text)
    # by key: a drill that starts and ends in one wall-clock second has one string for both, which the
    # text replacement below would map to the start's fixed value in one run and not in another
    for key, fixed in (("started_at", "2000-01-01T00:00:00Z"), ("finished_at", "2000-01-01T00:00:09Z")):
        if isinstance(data.get(key), str):
            data[key] = fixed
    if isinstance(data.get("wall_seconds"), float):
        data["wall_seconds"] = 1.0
    for phase in data.get("phases") or []:
        phase["seconds"] = 0.0
    return json.dumps(data, indent=2, default=str) + "\n"


def normalised(text: str, kind: str, root: Path, started: str | None, finished: str | None) -> str:
    if kind == "json":
        text = _json_normalised(text)
    elif kind in WALL:
        pattern, fixed = WALL[kind]
        text = pattern.sub(fixed, text)
    for wall, fixed in ((started, "2000-01-01T00:00:00Z"), (finished, "2000-01-01T00:00:09Z")):
        if wall:
            text = text.replace(wall, fixed)
    text = text.replace(os.path.relpath(REPO, root), "_RELREPO_").replace(str(REPO), "/_REPO_")
    text = text.replace(str(root), "/_ROOT_")
    return RUN_ID.sub(r"20000101T000000Z-\1-0000", text)


def check_pinned(name: str, kind: str, text: str) -> None:
    path = PINS / f"{name}.{kind}"
    if WRITE:
        PINS.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{path.name} differs from what the code wrote before"


def check_run_files(name: str, run_dir: Path, root: Path) -> dict:
    """report.json, .md and .html of `run_dir`, normalised, against the pins; the report's data."""
    data = json.loads((run_dir / "report.json").read_text())
    for kind in ("json", "md", "html"):
        text = (run_dir / f"report.{kind}").read_text()
        check_pinned(name, kind, normalised(text, kind, root, data.get("started_at"), data.get("finished_at")))
    return data


@pytest.fixture(scope="module")
def drills(tmp_path_factory):
    """Each drill in its own state dir: name -> (env, the run's `drill run -o json` result)."""
    out = {}

    def tight_budget(data):
        data["stop-conditions"][0]["above"] = 0.05  # aborts minutes into the fault

    def wrong_split(data):
        for probe in data["steady-state-hypothesis"]["probes"]:
            if probe["probe"] == "traffic-split":
                probe["tolerance"] = {"databricks": 50, "internal": 50}

    for name, scenario, edit in (("vendor-outage", "vendor-outage", None), ("freeze-incident", "freeze-incident", None),
                                 ("aborted", "vendor-outage", tight_budget), ("refused", "vendor-outage", wrong_split)):
        env = DrillEnv(tmp_path_factory.mktemp(name))
        path = str(env.scenario(scenario, edit)) if edit else scenario
        out[name] = env, env.run("drill", "run", path, "--quiet", "-o", "json")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name, exit_code", [("vendor-outage", 0), ("freeze-incident", 0), ("aborted", 1),
                                             ("refused", 4)])
def test_a_drills_report_files_are_what_the_code_before_the_model_wrote(drills, name, exit_code):
    env, result = drills[name]
    assert result.exit_code == exit_code, result.stderr
    data = check_run_files(name, env.run_dir(), env.root)
    # `drill run -o json` prints the report's data as the files hold it, less where the files are
    assert json.loads(result.stdout) == {k: v for k, v in data.items() if k != "reports"}


@pytest.mark.slow
def test_drill_report_shows_a_stored_report_as_before(drills):
    env, _ = drills["vendor-outage"]
    data = json.loads((env.run_dir() / "report.json").read_text())
    shown = env.run("drill", "report", "-o", "json")
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout) == data  # the stored file's data, pinned above
    shown = env.run("drill", "report")
    assert shown.exit_code == 0, shown.stderr
    check_pinned("vendor-outage.report-table", "txt",
                 normalised(shown.stdout, "txt", env.root, data["started_at"], data["finished_at"]))


@pytest.mark.slow
def test_an_interrupted_drills_report_from_its_state_is_what_the_code_before_wrote(drills):
    from opsctl.drills.render import write_reports
    from opsctl.drills.report import report_from_state
    from opsctl.drills.state import RunState

    env, _ = drills["vendor-outage"]
    state = RunState.load(env.run_dir())
    rollbacks = [{"action": "remove-faults", "status": "done", "message": "simulator incident ended"},
                 {"action": "restore-traffic", "status": "failed", "message": "the split file is gone"}]
    data = report_from_state(state, reason="interrupted: the drill process stopped during method",
                             rollbacks=rollbacks, leftovers=["traffic split internal 100 / databricks 0"])
    out = env.root / "interrupted"
    write_reports(out, data)
    check_run_files("interrupted", out, env.root)


def chain_report() -> dict:
    """A chain drill's report as chain/report.py writes it (hops, attribution, what was shortened,
    the prediction made from the fault): report.json of a real chain run of vendor-latency on this
    machine (2026-12-01), read as data, since the chain's binaries are not run here."""
    return json.loads((PINS / "chain.input.json").read_text())


def test_a_chain_drills_report_files_are_what_the_code_before_the_model_wrote(tmp_path):
    from opsctl.drills.render import write_reports
    from opsctl.drills.report_model import DrillReport

    write_reports(tmp_path, DrillReport.parse(chain_report()))
    for kind in ("md", "html"):
        check_pinned("chain", kind, (tmp_path / f"report.{kind}").read_text())
    check_pinned("chain", "json", (tmp_path / "report.json").read_text().replace(str(tmp_path), "/_RUN_"))


PINNED = ("vendor-outage", "freeze-incident", "aborted", "refused", "interrupted", "chain")


@pytest.mark.parametrize("name", PINNED)
def test_a_report_the_code_before_wrote_reads_back_to_the_same_values_and_re_renders_the_same(name):
    from opsctl.drills.render import render_html, render_markdown
    from opsctl.drills.report_model import DrillReport

    text = (PINS / f"{name}.json").read_text()
    report = DrillReport.parse(json.loads(text))
    assert report.version == 1 and "version" not in report.to_dict()  # version 1 is the format without the key
    assert report.to_dict() == json.loads(text)
    assert report.json_text() == text
    assert render_markdown(report) == (PINS / f"{name}.md").read_text()
    assert render_html(report) == (PINS / f"{name}.html").read_text()


def test_the_typed_report_holds_what_the_stored_file_says():
    from opsctl.drills.report_model import DrillReport

    raw = json.loads((PINS / "vendor-outage.json").read_text())
    report = DrillReport.parse(raw)
    assert (report.outcome, report.exit_code, report.mode) == ("passed", 0, "embedded")
    assert report.scenario.name == "vendor-outage" and report.scenario.tags == tuple(raw["scenario"]["tags"])
    assert report.measurements is not None
    assert report.measurements.time_to_detect == raw["measurements"]["time_to_detect"]
    assert [v.name for v in report.expectations] == [v["name"] for v in raw["expectations"]]
    assert [(v.mark, v.within_seconds) for v in report.expectations] == [
        ("PASS" if v["result"] == "pass" else "FAIL", v["within_seconds"]) for v in raw["expectations"]]
    assert [(e.kind, e.offset) for e in report.timeline] == [(e["kind"], e["offset"]) for e in raw["timeline"]]
    assert report.budget is not None and [(r.slo, r.spent) for r in report.budget.slos] == [
        (r["slo"], r["spent"]) for r in raw["budget"]["slos"]]
    assert report.chart is not None and len(report.chart.points) == len(raw["chart"]["points"])
    assert report.prediction is not None and report.prediction.response is not None
    assert report.prediction.response.ticket_category == raw["prediction"]["response"]["ticket_category"]
    assert report.sim is not None and report.sim.simulated_seconds == raw["sim"]["simulated_seconds"]
    assert report.action_items == tuple(raw["action_items"])
    interrupted = DrillReport.parse(json.loads((PINS / "interrupted.json").read_text()))
    assert interrupted.measurements is None and interrupted.prediction is None and interrupted.budget is None
    chain = DrillReport.parse(chain_report())
    assert chain.chain and [h.hop for h in chain.hops] == [h["hop"] for h in chain_report()["hops"]]


@pytest.mark.slow
@pytest.mark.parametrize("text, problem", [
    ("{\"run_id\": ", "not a drill report: not valid JSON (line 1)"),
    ("[1, 2]", "not a drill report: report: expected a JSON object, got list"),
    ("{\"run_id\": \"x\", \"expectations\": [{\"name\": 3}]}", "not a drill report: expectations[0].name: expected a string"),
    ("{\"run_id\": \"x\", \"measurements\": {\"time_to_detect\": \"soon\"}}",
     "not a drill report: measurements.time_to_detect: expected int or float"),
    ("{\"version\": 2, \"run_id\": \"x\"}", "not a drill report: report version 2 is not one this opsctl reads"),
])
def test_a_malformed_stored_report_is_one_line_and_exit_3_never_a_traceback(drills, tmp_path, text, problem):
    import shutil

    source, _ = drills["vendor-outage"]
    env = DrillEnv(tmp_path)
    run = env.state / "drills" / source.run_dir().name
    shutil.copytree(source.run_dir(), run)
    (run / "report.json").write_text(text)
    for output in ("table", "json"):
        result = env.run("drill", "report", "-o", output)
        assert result.exit_code == 3, (result.stdout, result.stderr)
        assert result.stdout == ""
        [line] = result.stderr.strip().splitlines()
        assert line.startswith("error: ") and f"{run / 'report.json'}: {problem}" in line, line
        assert "Traceback" not in result.stderr
