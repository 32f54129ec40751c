"""A failover away from a paging backend when the receiving side has no data (issue 36 item 6).

The budget guard refuses a routine move toward a backend whose error budget it cannot judge (no
data is never healthy). `opsctl traffic failover --emergency --incident ID` lets on-call override it;
the automation, moving users off a backend that pages, now does the same instead of refusing: the
failover applies as an emergency, the override is in the audit entry (as the CLI's records it) and on
the incident's move. The metric store here is empty, so nothing can judge internal's budget.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.automation.helpers import (
    Serve, alert, audit, ledger, message, recorded_split, wait_for, write_live_config,
)

FIRING = message(alert(fingerprint="b1"))  # severity=page (helpers.alert's default labels)


def incident_moves(directory: Path) -> list[dict]:
    moves = []
    for path in sorted((directory / "state" / "incidents").glob("incident-*.json")):
        document = json.loads(path.read_text())
        body = document.get("data", {})
        moves.extend(body.get("moves", []) if isinstance(body, dict) else [])
    return moves


def test_a_failover_away_from_a_paging_backend_with_no_data_on_the_receiving_side_is_taken_as_an_emergency(
        tmp_path):
    config = write_live_config(tmp_path, automation_extra="hold_down: 1h\n")  # no metric store: no data
    server = Serve(config)
    try:
        assert server.post_alertmanager(FIRING).status == 202
        wait_for(lambda: recorded_split(tmp_path) == {"databricks": 0, "internal": 100}, timeout=30,
                 what="the failover as an emergency")
        # The routine try the budget guard refused is audited, then the emergency that overrode it.
        refused, failover = [e for e in audit(tmp_path) if e["action"] == "failover"]
        assert refused["outcome"] == "refused" and refused["emergency"] is False
        assert "no data to judge internal's error budget" in refused["message"]
        assert failover["outcome"] == "applied"
        assert failover["emergency"] is True
        assert "budget" in failover["overrides"]
        assert failover["incident"]  # an override names the incident it serves
        wait_for(lambda: [m for m in incident_moves(tmp_path) if m["kind"] == "failover"], timeout=20,
                 what="the move on the incident")
        (move,) = [m for m in incident_moves(tmp_path) if m["kind"] == "failover"]
        assert move["status"] == "applied" and "budget" in move["overrides"]
        assert "emergency" in move["detail"]
        # The page follows the move's write (failover first, then the page that asks to confirm it).
        (incident,) = wait_for(lambda: ledger(tmp_path, "paging/ledger.json").get("incidents"), timeout=20,
                               what="the page")
        assert "REFUSED" not in incident["title"]
    finally:
        server.stop()
