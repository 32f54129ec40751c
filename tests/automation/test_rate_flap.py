"""The rate limit damps a flap by holding the moves back, never the failover away from a failing
backend.

A long vendor outage: the automation fails over, the alert resolves once the vendor has no traffic
left, the hold-down passes and traffic is restored into the outage, which fires again. With
`traffic.rate_limit` at 2 changes an hour, the third change is the second failover: before, the
rate guard refused it (the vendor kept its 80% while it failed); now it applies, still counts, and
the restore after it is the change the limit holds, so traffic stays on the internal pods."""

from __future__ import annotations

import json

from tests.automation.helpers import Serve, actions, alert, audit, message, recorded_split, wait_for, write_live_config

FAILED_OVER = {"databricks": 0, "internal": 100}
CONFIGURED = {"databricks": 80, "internal": 20}


def test_a_second_failover_in_a_full_rate_window_applies_and_the_restore_after_it_is_held(tmp_path, healthy_store):
    config = write_live_config(tmp_path, automation_extra="hold_down: 1s\nrestore_retry: 1s\n",
                               healthy_store=healthy_store)
    config.write_text(config.read_text().replace("rate_limit: {max_changes: 50, window: 1h}",
                                                 "rate_limit: {max_changes: 2, window: 1h}"))
    server = Serve(config)
    try:
        # Episode 1: fail over, resolve, restored after the hold-down (changes 1 and 2).
        assert server.post_alertmanager(message(alert(fingerprint="a1"))).status == 202
        wait_for(lambda: recorded_split(tmp_path) == FAILED_OVER, what="the first failover")
        assert server.post_alertmanager(message(alert(fingerprint="a1", status="resolved"))).status == 202
        wait_for(lambda: recorded_split(tmp_path) == CONFIGURED, what="the first restore")

        # Episode 2: the vendor still fails. The window holds 2 changes, the maximum.
        assert server.post_alertmanager(message(alert(fingerprint="a2", starts_at="2026-11-29T12:20:00.5Z"))).status == 202
        wait_for(lambda: recorded_split(tmp_path) == FAILED_OVER, what="the second failover, in a full rate window")
        failovers = [e for e in audit(tmp_path) if e["action"] == "failover"]
        assert [e["outcome"] for e in failovers] == ["applied", "applied"]
        rate = next(g for g in failovers[1]["guards"] if g["name"] == "rate")
        assert rate["ok"] and not rate.get("overridden")
        assert rate["details"]["changes_in_window"] == 2 and "never held by the rate limit" in rate["message"]

        # Its resolve: the restore is the move the limit holds (3 changes in the window), once the
        # re-failover backoff (2 x the hold-down after this failover) has passed.
        assert server.post_alertmanager(message(alert(fingerprint="a2", status="resolved",
                                                      starts_at="2026-11-29T12:20:00.5Z"))).status == 202

        def by_rate():
            return [a for a in actions(tmp_path, "restore") if a["status"] == "refused" and "rate limit" in a["detail"]]
        wait_for(by_rate, what="the second restore refused by the rate limit")
        assert "rate limit reached: 3 traffic changes in the last 1h (max 2)" in by_rate()[0]["detail"]
        assert recorded_split(tmp_path) == FAILED_OVER
        assert [e["action"] for e in audit(tmp_path) if e["outcome"] == "applied"] == ["failover", "restore", "failover"]
    finally:
        server.stop()


def test_each_failover_soon_after_a_restore_doubles_the_wait_before_the_next_restore(tmp_path, healthy_store):
    """Hold-down 2 s. Episode 1 restores after its hold-down (no earlier failover). Episode 3 comes
    after two failovers of databricks within the backoff window, so its restore waits 2 s x 2 ** 2 =
    8 s from its failover, refused (held) at its first try 2 s after the resolve; the times are the
    change record's own. restore_retry is the default 1m: the held restore is tried again when the
    hold ends (the refusal says when), not a minute later, or the 60 s wait below runs out."""
    from opsctl.automation.executors import REFLAP_WINDOW

    config = write_live_config(tmp_path, automation_extra="hold_down: 2s\n",
                               healthy_store=healthy_store)
    server = Serve(config)
    try:
        for n, fingerprint in enumerate(("a1", "a2", "a3"), start=1):
            starts = f"2026-11-29T12:{10 * n:02d}:00.5Z"
            assert server.post_alertmanager(message(alert(fingerprint=fingerprint, starts_at=starts))).status == 202
            wait_for(lambda: recorded_split(tmp_path) == FAILED_OVER, what=f"failover {n}")
            assert server.post_alertmanager(message(alert(fingerprint=fingerprint, status="resolved",
                                                          starts_at=starts))).status == 202
            wait_for(lambda: recorded_split(tmp_path) == CONFIGURED, timeout=60, what=f"restore {n}")
        applied = [e for e in audit(tmp_path) if e["outcome"] == "applied"]
        assert [e["action"] for e in applied] == ["failover", "restore"] * 3
        # The backoff counts from the change record's times (taken before the guards); the audit
        # log's are taken after the write, later by however long the write took on a loaded machine.
        changes = [c for c in change_record(tmp_path)["changes"] if c["outcome"] == "applied"]
        assert [c["action"] for c in changes] == ["failover", "restore"] * 3
        times = [c["ts"] if "ts" in c else None for c in changes]
        assert None not in times, changes[0].keys()
        third_failover, third_restore = times[4], times[5]
        assert third_restore - third_failover >= 2 * 2 ** 2
        assert third_restore - times[0] < REFLAP_WINDOW
        held = [a for a in actions(tmp_path, "restore") if a["status"] == "refused"]
        assert any("re-failover backoff: databricks was failed over 3 times" in a["detail"] for a in held), held
        first_restore_refusals = [a for a in held if "failed over 1 times" in a["detail"]]
        assert not first_restore_refusals
    finally:
        server.stop()


def change_record(directory) -> dict:
    """The change record the file actuator keeps in the split file (key `opsctl`), read directly."""
    return json.loads((directory / "state" / "traffic" / "split.json").read_text())["opsctl"]
