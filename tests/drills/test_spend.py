"""Drill spend: `opsctl slo report --exclude-drills` forgives what drills on the user's systems spent."""

from __future__ import annotations

import json
import sqlite3

import pytest

from opsctl.clock import parse_rfc3339

END = "2026-11-27T00:00:00Z"
FAULT = ("2026-11-26T20:00:00Z", "2026-11-26T20:30:00Z")
GOAL = 0.9999  # slos/: availability objectives


def _record_run(drill_env, run_id: str, mode: str, start: str, end: str) -> None:
    run = drill_env.state / "drills" / run_id
    run.mkdir(parents=True)
    t0, t1 = parse_rfc3339(start), parse_rfc3339(end)
    (run / "state.json").write_text(json.dumps({
        "version": 1, "run_id": run_id, "mode": mode, "started_at": t0 - 60, "finished_at": t1 + 60, "t0": t0,
        "window": {"start": t0, "end": t1}, "phase": "done", "outcome": "passed",
        "scenario": {"path": "x.yaml", "name": "x", "title": "x", "digest": None}}))


def _sums(db, backend: str, lo: float, hi: float) -> tuple[int, int]:
    """(bad, valid) requests of a backend over steps in (lo, hi], read with sqlite3."""
    conn = sqlite3.connect(db)
    try:
        row = conn.execute(
            "SELECT SUM(req_throttled + req_server_error + req_timeout), SUM(req_ok + req_throttled + req_server_error"
            " + req_timeout) FROM steps WHERE ts > ? AND ts <= ?" + (" AND backend = ?" if backend != "all" else ""),
            (lo, hi, backend) if backend != "all" else (lo, hi)).fetchone()
    finally:
        conn.close()
    return int(row[0]), int(row[1])


@pytest.mark.slow
def test_slo_report_shows_the_budget_with_and_without_what_live_drills_spent(drill_env):
    sim = drill_env.run("sim", "generate", "--days", "3", "--end", END, "--seed", "7", "--peak-rps", "200",
                        "--incident", f"vendor-5xx@{FAULT[0]}+30m:rate=0.2")
    assert sim.exit_code == 0, sim.output
    _record_run(drill_env, "20261126T195900Z-vendor-outage-aaaa", "live", *FAULT)
    _record_run(drill_env, "20261126T195800Z-vendor-outage-bbbb", "embedded", *FAULT)  # its own store: spends nothing
    result = drill_env.run("slo", "report", "--exclude-drills", "--at", END, "-o", "json")
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    db = drill_env.state / "metrics.sqlite"
    end = parse_rfc3339(END)
    lo, hi = parse_rfc3339(FAULT[0]), parse_rfc3339(FAULT[1])
    for name, backend in (("llm-inference-databricks-availability", "databricks"),
                          ("llm-inference-service-availability", "all"),
                          ("llm-inference-internal-availability", "internal")):
        row = rows[name]
        bad_in_drill, _ = _sums(db, backend, lo, hi)
        _, valid = _sums(db, backend, end - 28 * 86400, end)
        share = bad_in_drill / ((1 - GOAL) * valid)
        assert row["drills"] == ["20261126T195900Z-vendor-outage-aaaa"]
        assert row["drill_bad_events"] == pytest.approx(bad_in_drill)
        assert row["drill_budget_spent"] == pytest.approx(share, rel=1e-9)
        assert row["error_budget_remaining_excluding_drills"] == pytest.approx(
            row["error_budget_remaining"] + share, rel=1e-9)
    assert rows["llm-inference-databricks-availability"]["drill_budget_spent"] > 0.5  # the drill's burst was most of it
    table = drill_env.run("slo", "report", "--exclude-drills", "--at", END)
    assert "LEFT WITHOUT DRILLS" in table.stdout
