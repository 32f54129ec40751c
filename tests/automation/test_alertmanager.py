"""A real Alertmanager (Debian's prometheus-alertmanager) notifying a running `opsctl serve`."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from tests.automation.helpers import (
    FAILOVER_POLICY, Alertmanager, Serve, actions, responses, wait_for, write_serve_config,
)

pytestmark = [pytest.mark.alertmanager, pytest.mark.slow]


def _rfc3339(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _am_alert(*, ends_in: float, starts: datetime, backend: str = "databricks") -> dict:
    now = datetime.now(timezone.utc)
    return {
        "labels": {"alertname": "SloBurnRatePage", "severity": "page", "slo": f"{backend}-availability",
                   "backend": backend, "service": "llm-inference", "long_window": "1h", "short_window": "5m"},
        "annotations": {"summary": f"{backend} availability burning its error budget"},
        "startsAt": _rfc3339(starts), "endsAt": _rfc3339(now + timedelta(seconds=ends_in)),
        "generatorURL": "http://127.0.0.1:9090/graph",
    }


def test_alertmanager_notifies_serve_which_acts_once_then_restores_after_the_hold_down(tmp_path):
    config = write_serve_config(tmp_path, policies=FAILOVER_POLICY, automation_extra="dry_run: true\nhold_down: 2s\n")
    server = Serve(config)
    am = Alertmanager(tmp_path / "am", f"{server.url}/v1/alertmanager")
    try:
        starts = datetime.now(timezone.utc) - timedelta(minutes=2)
        am.push([_am_alert(ends_in=300, starts=starts)])
        wait_for(lambda: len(actions(tmp_path, "note")) >= 1, timeout=30, what="actions on the firing alert")
        # Alertmanager re-sends the same alert (the push again, a group_interval later): no new actions.
        am.push([_am_alert(ends_in=300, starts=starts)])
        time.sleep(3)
        assert [a["action"] for a in actions(tmp_path)] == ["failover", "page", "ticket", "note"]
        resolved_at = time.monotonic()
        am.push([_am_alert(ends_in=-1, starts=starts)])  # endsAt in the past: resolved
        wait_for(lambda: actions(tmp_path, "restore"), timeout=30, what="restore after the hold-down")
        waited = time.monotonic() - resolved_at
        wait_for(lambda: len(actions(tmp_path, "note")) == 3, what="the note about the restore")
        assert waited >= 2.0  # the hold-down
        done = [(a["action"], a["status"]) for a in actions(tmp_path)]
        assert done == [("failover", "dry_run"), ("page", "dry_run"), ("ticket", "dry_run"), ("note", "dry_run"),
                        ("note", "dry_run"), ("restore", "dry_run"), ("note", "dry_run")]
        assert len(responses(tmp_path)) == 1
        m = server.metrics()
        assert m.get('opsctl_webhook_deliveries_total{result="unauthorized",source="alertmanager"}', 0) == 0
        assert m['opsctl_webhook_deliveries_total{result="accepted",source="alertmanager"}'] >= 2
    finally:
        am.stop()
        server.stop()
