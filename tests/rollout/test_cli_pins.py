"""What `opsctl rollout ab`, `rollout run` and `rollout plan` print and exit with, pinned before
their analysis loop, journey check and plan checks moved out of the CLI bodies (#26 item 4): for
the same inputs every `-o json` document, every table, every error line and every exit code stay as
they were (and `rollout plan --html`'s timeline).

`rollout ab` against a real Prometheus holding an hour of the grammar service's arm counters: a
metric equivalent at its horizon, one short of its horizon (with and without the plan's
daily_trials), one different beyond its margin, two metrics at once, a window of its own, a metric
without a `baseline` (today's ratio read from the baseline arm), a metric with no data, a baseline
arm with no trials, and a plan without an A/B stage. `rollout run` of a small plan in simulated
time: without a journey, a journey run ending as expected (completed; aborted by an incident at
the step and check the journey names) and ones ending otherwise (all three problems; aborted where
expected but by another check), the journey's
own start, and the refusals before any run (--run without --journey, an unknown run, no start).
`rollout plan` of the shipped plans: from their start and another, with the timeline, without
freezes, a cost share under the config's minimum, no start, a start without a zone.

The expected texts in cli_documents.json were captured from the code before the move (commit
696bbb1; `rollout plan`'s at b33b8b7, whose `plan` body is 696bbb1's), with what differs between
runs replaced by placeholders (`normalised`): the temp dir, the checkout's dir and the run's
wall-clock seconds. To capture them again (only for a deliberate change of output):
OPSCTL_PIN_WRITE=1 pytest tests/rollout/test_cli_pins.py."""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, run_opsctl, write_config

PINNED = Path(__file__).with_name("cli_documents.json")
T0 = 1_790_000_000
AT = "2026-09-21T15:13:20Z"  # T0 + 1h


def normalised(text: str, root: Path) -> str:
    text = text.replace(str(root), "<ROOT>").replace(str(REPO), "<REPO>")
    text = re.sub(r'"wall_seconds": [0-9.e+-]+', '"wall_seconds": "<WALL>"', text)
    return re.sub(r"windows simulated in [0-9.]+ s", "windows simulated in <WALL> s", text)


def arm_counters(path: Path) -> Path:
    """An hour of the grammar service's counters, a sample a minute. Per minute the internal arm
    shows 900 suggestions, 288 accepted (0.32) and 288 kept (0.32); the databricks arm 100, 31
    accepted (0.31) and 20 kept (0.20). `grammar_suggestions_empty_total` counts nothing on either
    arm (a baseline arm without trials)."""
    rows: dict[str, list[str]] = {"shown": [], "accepted": [], "kept": [], "empty": []}
    for k in range(61):
        for arm, shown, accepted, kept in (("internal", 900, 288, 288), ("databricks", 100, 31, 20)):
            for name, per_minute in (("shown", shown), ("accepted", accepted), ("kept", kept), ("empty", 0)):
                rows[name].append(f'grammar_suggestions_{name}_total{{arm="{arm}"}} {per_minute * k} {T0 + 60 * k}')
    lines = []
    for name, samples in rows.items():
        lines.append(f"# TYPE grammar_suggestions_{name} counter")
        lines += sorted(samples, key=lambda r: (r.split(" ")[0], int(r.split(" ")[-1])))
    path.write_text("\n".join(lines + ["# EOF"]) + "\n")
    return path


def metric(name: str, counter: str, margin: float, baseline: float | None = 0.32, trials: str = "shown") -> str:
    return textwrap.dedent(f"""\
        - name: {name}
          successes: sum(increase(grammar_suggestions_{counter}_total{{arm="$arm"}}[$window]))
          trials: sum(increase(grammar_suggestions_{trials}_total{{arm="$arm"}}[$window]))
          margin: {margin}
        """) + (f"  baseline: {baseline}\n" if baseline is not None else "")


def ab_plan(tmp_path: Path, name: str, metrics: list[str], daily: int | None = None) -> Path:
    path = tmp_path / f"ab-{name}.yaml"
    body = textwrap.indent("".join(metrics), " " * 8)
    path.write_text(textwrap.dedent("""\
        name: ab-only
        backend: databricks
        baseline: internal
        stages:
          - ab:
              share: 10
              min_duration: 1h
        """) + (f"      daily_trials: {daily}\n" if daily else "") + "      metrics:\n" + body)
    return path


def ab_scenarios(tmp_path: Path):
    """(name, args) of `rollout ab`."""
    acc = metric("acceptance", "accepted", 0.05)
    yield "equivalent", (ab_plan(tmp_path, "eq", [acc]),)
    yield "horizon", (ab_plan(tmp_path, "horizon", [metric("acceptance", "accepted", 0.005)]),)
    yield "horizon-days", (ab_plan(tmp_path, "days", [metric("acceptance", "accepted", 0.005)], daily=120000),)
    yield "different", (ab_plan(tmp_path, "diff", [metric("kept", "kept", 0.05)]),)
    both = ab_plan(tmp_path, "both", [acc, metric("kept", "kept", 0.05)], daily=400000)
    yield "two-metrics", (both,)
    yield "window", (both, "--window", "30m")
    yield "ratio-from-arm", (ab_plan(tmp_path, "ratio", [metric("acceptance", "accepted", 0.05, None)]),)
    yield "no-data", (ab_plan(tmp_path, "nodata", [metric("missing", "missing", 0.05)]),)
    yield "no-trials", (ab_plan(tmp_path, "notrials", [metric("empty", "empty", 0.05, None, trials="empty")]),)
    noab = tmp_path / "no-ab.yaml"
    noab.write_text(yaml.safe_dump({"name": "ramp-only", "backend": "databricks", "baseline": "internal",
                                    "stages": [{"ramp": {"steps": [{"weight": 30, "soak": "1h"}]}}]}))
    yield "no-ab-stage", (noab,)


SMALL = {"name": "small", "backend": "databricks", "baseline": "internal", "start": "2026-11-03T15:00:00Z",
         "stages": [{"shadow": {"steps": [{"mirror": 10, "hold": "1h"}]}},
                    {"ramp": {"steps": [{"weight": 30, "soak": "2h"}, {"weight": 60, "soak": "1h"}],
                              "analysis": [{"check": "burn-rate", "interval": "30m", "args": {"backends": ["databricks"]},
                                            "success": "result.max_burn < 14.4", "failure": "result.max_burn >= 14.4",
                                            "failure_limit": 1}]}}]}

JOURNEY = {"version": 1, "title": "pins", "plan": "plan.yaml", "peak_rps": 60, "seed": 1,
           "runs": [{"name": "completes", "expect": "completed"},
                    {"name": "outage", "expect": "aborted", "abort_step": 2, "abort_check": "burn-rate",
                     "incidents": [{"at_step": 2, "kind": "vendor-5xx", "after": "10m", "duration": "1d",
                                    "options": {"rate": 0.5}}]},
                    {"name": "wrong", "expect": "aborted", "abort_step": 2, "abort_check": "latency-judge"},
                    {"name": "wrong-check", "expect": "aborted", "abort_step": 2, "abort_check": "latency-judge",
                     "incidents": [{"at_step": 2, "kind": "vendor-5xx", "after": "10m", "duration": "1d",
                                    "options": {"rate": 0.5}}]}]}


def run_scenarios(tmp_path: Path):
    """(name, args, formats) of `rollout run`, each with an --out-dir of its own: both outputs of a
    run ending as expected, of one ending otherwise and of each refusal; one of the others."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(SMALL))
    journey = tmp_path / "journey.yaml"
    journey.write_text(yaml.safe_dump(JOURNEY))
    started = tmp_path / "journey-start.yaml"
    started.write_text(yaml.safe_dump({**JOURNEY, "start": "2026-11-04T10:00:00-05:00"}))
    unstarted = tmp_path / "unstarted.yaml"
    unstarted.write_text(yaml.safe_dump({k: v for k, v in SMALL.items() if k != "start"}))
    both, json_only, table_only = ("json", "table"), ("json",), ("table",)  # a simulation costs ~0.5 s
    yield "plain", (plan,), both
    yield "completes", (plan, "--journey", journey, "--run", "completes"), json_only
    yield "outage", (plan, "--journey", journey, "--run", "outage"), both
    yield "wrong", (plan, "--journey", journey, "--run", "wrong"), both
    yield "wrong-check", (plan, "--journey", journey, "--run", "wrong-check"), table_only
    yield "journey-start", (plan, "--journey", started), json_only
    yield "start-flag", (plan, "--journey", started, "--start", "2026-11-05T08:00:00Z", "--run", "completes"), json_only
    yield "run-without-journey", (plan, "--run", "completes"), both
    yield "unknown-run", (plan, "--journey", journey, "--run", "nope"), both
    yield "no-start", (unstarted,), both


def capture(name: str, args: tuple, root: Path, out: dict, *base: str) -> None:
    for fmt in ("json", "table"):
        result = run_opsctl(*base, *args, "-o", fmt)
        out[f"{name}-{fmt}"] = {"exit": result.exit_code, "stdout": normalised(result.stdout, root),
                                "stderr": normalised(result.stderr, root)}


def compare(found: dict, group: str) -> None:
    """`found` against the pinned texts of `group` (ab, run, plan)."""
    if os.environ.get("OPSCTL_PIN_WRITE"):
        pinned = json.loads(PINNED.read_text()) if PINNED.exists() else {}
        pinned[group] = found
        PINNED.write_text(json.dumps(pinned, indent=1, sort_keys=True) + "\n")
    expected = json.loads(PINNED.read_text())[group]
    assert sorted(found) == sorted(expected)
    for key in expected:
        assert found[key] == expected[key], key


def plan_scenarios(tmp_path: Path):
    """(name, config, args) of `rollout plan`."""
    shipped = REPO / "opsctl.yaml"
    example, drill = REPO / "rollouts" / "vendor-migration.yaml", REPO / "rollouts" / "migration-drill.yaml"
    unstarted = tmp_path / "unstarted.yaml"
    copied = {k: v for k, v in yaml.safe_load(example.read_text()).items() if k != "start"}
    for stage in copied["stages"]:  # files an analysis names resolve beside the plan: the copy names the shipped ones
        for a in next(iter(stage.values())).get("analysis", []):
            for key in ("gold", "answers"):
                if key in a.get("args", {}):
                    a["args"][key] = str((example.parent / a["args"][key]).resolve())
    unstarted.write_text(yaml.safe_dump(copied))
    yield "example", shipped, (example,)
    yield "start", shipped, (example, "--start", "2026-11-20T09:00:00-05:00")
    yield "html", shipped, (drill, "--html", tmp_path / "timeline.html")
    yield "no-freezes", write_config(tmp_path / "bare", "freezes: []\n"), (example,)
    yield "cost-share", write_config(tmp_path / "share", "cost: {min_traffic_share: 0.4}\n"), (example,)
    yield "no-start", shipped, (unstarted,)
    yield "zone", shipped, (example, "--start", "2026-11-02T09:00")


def test_rollout_plan_prints_exits_and_writes_as_before(tmp_path):
    (tmp_path / "bare").mkdir()
    (tmp_path / "share").mkdir()
    found: dict = {}
    for name, cfg, args in plan_scenarios(tmp_path):
        capture(name, args, tmp_path, found, "--config", cfg, "rollout", "plan")
    found["html-file"] = normalised((tmp_path / "timeline.html").read_text(encoding="utf-8"), tmp_path)
    assert found["example-json"]["exit"] == 0 and found["cost-share-json"]["exit"] == 2  # the cases are real
    compare(found, "plan")


@pytest.mark.slow
def test_rollout_ab_prints_and_exits_as_before(tmp_path, prometheus_factory):
    server = prometheus_factory(openmetrics=arm_counters(tmp_path / "arms.om"))
    cfg = write_config(tmp_path, source="prometheus", prometheus_url=server.url)
    found: dict = {}
    for name, args in ab_scenarios(tmp_path):
        capture(name, (*args, "--at", AT), tmp_path, found, "--config", cfg, "rollout", "ab")
    assert found["equivalent-json"]["exit"] == 0 and found["different-json"]["exit"] == 1  # the cases are real
    assert found["horizon-json"]["exit"] == 3 and found["no-ab-stage-json"]["exit"] == 2
    compare(found, "ab")


@pytest.mark.slow
def test_rollout_run_prints_and_exits_as_before(tmp_path):
    cfg = write_config(tmp_path, "capacity: {backend: internal, source: static, replicas: 10, rps_per_replica: 150,"
                                 " headroom: 0.25, max_replicas: 10}\nfreezes: []\n")
    found: dict = {}
    for name, args, formats in run_scenarios(tmp_path):
        where = ("--out-dir", tmp_path / f"run-{name}") if name not in ("run-without-journey", "unknown-run") else ()
        for fmt in formats:
            extra = (*where[:1], f"{where[1]}-{fmt}") if where else ()
            result = run_opsctl("--config", cfg, "rollout", "run", *args, *extra, "-o", fmt)
            found[f"{name}-{fmt}"] = {"exit": result.exit_code, "stdout": normalised(result.stdout, tmp_path),
                                      "stderr": normalised(result.stderr, tmp_path)}
    assert found["completes-json"]["exit"] == 0 and found["wrong-json"]["exit"] == 1  # the cases are real
    assert json.loads(found["outage-json"]["stdout"])["as_expected"] is True
    compare(found, "run")
