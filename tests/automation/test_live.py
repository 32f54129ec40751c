"""`opsctl serve` acting for real: the file actuator's split, the audit log, the local pager and ticket ledgers."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

import pytest

from tests.automation.helpers import (
    FAILOVER_POLICY, Serve, actions, alert, audit, page_key, ledger, message, recorded_split, split,
    response_alerts, table_counts, wait_for, write_live_config,
)

FIRING = message(alert(fingerprint="a1"))  # startsAt 2026-11-29T12:00:00.5Z
INCIDENT = page_key()  # the incident's page: Alertmanager's dedup key (issue 36)
RESOLVED = message(alert(fingerprint="a1", status="resolved"))


def test_a_page_level_availability_alert_fails_over_pages_files_the_ticket_and_restores_after_the_hold_down(
        tmp_path, healthy_store):
    config = write_live_config(tmp_path, automation_extra="hold_down: 2s\n", healthy_store=healthy_store)
    server = Serve(config)
    try:
        assert server.post_alertmanager(FIRING).status == 202
        wait_for(lambda: recorded_split(tmp_path) == {"databricks": 0, "internal": 100}, what="failover on the split file")
        wait_for(lambda: actions(tmp_path, "note"), what="the note")
        failover = [e for e in audit(tmp_path) if e["action"] == "failover"]
        assert [e["outcome"] for e in failover] == ["applied"]
        assert failover[0]["before"]["weights"] == {"internal": 20, "databricks": 80}
        assert failover[0]["emergency"] is False  # no freeze: a routine change through every guard
        assert failover[0]["incident"] == INCIDENT
        (incident,) = ledger(tmp_path, "paging/ledger.json")["incidents"]
        assert incident["dedup_key"] == INCIDENT
        (ticket,) = ledger(tmp_path, "tickets/ledger.json")["tickets"]
        assert ticket["vendor"] == "databricks" and ticket["category"] == "Model Serving"
        assert ticket["severity"] == "Severity 2"

        resolved_at = time.monotonic()
        assert server.post_alertmanager(RESOLVED).status == 202
        wait_for(lambda: recorded_split(tmp_path) == {"databricks": 80, "internal": 20}, what="restore on the split file")
        assert time.monotonic() - resolved_at >= 2.0
        restore = [e for e in audit(tmp_path) if e["action"] == "restore"]
        assert [e["outcome"] for e in restore] == ["applied"]
        restored = 'opsctl_automation_actions_total{action="restore",policy="availability",status="applied"}'
        m = wait_for(lambda: (lambda m: m if m.get(restored) == 1 else None)(server.metrics()), what="the counters")
        assert m['opsctl_automation_actions_total{action="failover",policy="availability",status="applied"}'] == 1
        assert m['opsctl_automation_action_latency_seconds_count{action="failover"}'] == 1
    finally:
        server.stop()


def test_in_a_freeze_the_failover_is_refused_unless_the_policy_makes_it_an_emergency(tmp_path, healthy_store):
    routine = tmp_path / "routine"
    config = write_live_config(routine, frozen=True, automation_extra="hold_down: 1h\n", healthy_store=healthy_store)
    server = Serve(config)
    try:
        assert server.post_alertmanager(FIRING).status == 202
        wait_for(lambda: actions(routine, "failover"), what="the failover decision")
        (failover,) = actions(routine, "failover")
        assert failover["status"] == "refused" and "freeze" in failover["detail"]
        assert split(routine) is None  # never written: still the configured default
        refused = 'opsctl_automation_actions_total{action="failover",policy="availability",status="refused"}'
        wait_for(lambda: server.metrics().get(refused) == 1, what="the refusal counted")
    finally:
        server.stop()

    emergency = tmp_path / "emergency"
    policy = FAILOVER_POLICY.replace("failover: {}", "failover: {emergency_in_freeze: true}")
    config = write_live_config(emergency, policies=policy, frozen=True, automation_extra="hold_down: 1h\n",
                               healthy_store=healthy_store)
    server = Serve(config)
    try:
        assert server.post_alertmanager(FIRING).status == 202
        wait_for(lambda: recorded_split(emergency) == {"databricks": 0, "internal": 100}, what="emergency failover")
        (entry,) = [e for e in audit(emergency) if e["action"] == "failover"]
        assert entry["emergency"] is True and "freeze" in entry["overrides"]
        assert entry["incident"] == INCIDENT  # the incident it paged
    finally:
        server.stop()


def test_a_dry_run_policy_decides_but_changes_nothing(tmp_path, healthy_store):
    policy = FAILOVER_POLICY + "  dry_run: true\n"
    config = write_live_config(tmp_path, policies=policy, automation_extra="hold_down: 1s\n", healthy_store=healthy_store)
    server = Serve(config)
    try:
        server.post_alertmanager(FIRING)
        wait_for(lambda: actions(tmp_path, "note"), what="dry-run decisions")
        server.post_alertmanager(RESOLVED)
        wait_for(lambda: actions(tmp_path, "restore") and len(actions(tmp_path, "note")) == 3, what="dry-run restore")
        assert {a["status"] for a in actions(tmp_path)} == {"dry_run"}
        assert split(tmp_path) is None and audit(tmp_path) == []
        assert ledger(tmp_path, "paging/ledger.json") == {} and ledger(tmp_path, "tickets/ledger.json") == {}
    finally:
        server.stop()


def test_two_replicas_sharing_the_state_act_once(tmp_path, healthy_store):
    config = write_live_config(tmp_path, automation_extra="hold_down: 1h\n", healthy_store=healthy_store)
    replicas = [Serve(config), Serve(config)]
    try:
        replies = []

        def deliver(server, payload):
            replies.append(server.post_alertmanager(payload).status)

        # The same notification to both replicas at once (an Alertmanager retry landing on the other
        # pod), plus the episode's second alert (the 6h/30m pair) to each.
        payloads = [FIRING, FIRING, message(alert(fingerprint="a2", long_window="6h")),
                    message(alert(fingerprint="a2", long_window="6h"))]
        threads = [threading.Thread(target=deliver, args=(replicas[i % 2], p)) for i, p in enumerate(payloads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert replies == [202] * 4
        wait_for(lambda: response_alerts(tmp_path) == 2 and actions(tmp_path, "note"), what="both alerts")
        wait_for(lambda: sum(s.metrics().get('opsctl_automation_events_total{result="done"}', 0) for s in replicas) == 2,
                 what="both events done")
        assert [e["outcome"] for e in audit(tmp_path) if e["action"] == "failover"] == ["applied"]
        assert len(ledger(tmp_path, "paging/ledger.json")["incidents"]) == 1
        assert len(ledger(tmp_path, "tickets/ledger.json")["tickets"]) == 1
        assert [a["action"] for a in actions(tmp_path)] == ["failover", "page", "ticket", "note"]
    finally:
        for s in replicas:
            s.stop()


def holds_open(pid: int, path) -> bool:
    """Whether process `pid` has `path` open (it tries its flock without blocking, in a loop)."""
    fds = Path(f"/proc/{pid}/fd")
    target = str(Path(path).resolve())
    for fd in fds.iterdir():
        try:
            if os.readlink(fd) == target:
                return True
        except OSError:  # closed meanwhile
            continue
    return False


def test_a_full_queue_answers_503_and_records_nothing_until_there_is_room(tmp_path, healthy_store):
    config = write_live_config(tmp_path, automation_extra="hold_down: 1h\nqueue_size: 1\nworkers: 1\n",
                               healthy_store=healthy_store)
    server = Serve(config)
    lock_path = tmp_path / "state" / "traffic" / "split.json.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the actuator is slow: its write waits for this lock
        assert server.post_alertmanager(FIRING).status == 202
        # The worker takes the alert and reaches the actuator's lock (the failover is its first
        # action): it has the lock file open
        wait_for(lambda: holds_open(server.proc.pid, lock_path), what="the worker to reach the actuator's lock")
        assert split(tmp_path) is None and actions(tmp_path) == []
        other = message(alert(fingerprint="b9", slo="internal-availability", backend="internal"))
        reply = server.post_alertmanager(other)
        assert reply.status == 503
        assert table_counts(tmp_path)["events"] == 1  # the refused delivery left no trace
        assert server.metrics()['opsctl_webhook_deliveries_total{result="queue_full",source="alertmanager"}'] == 1
        fcntl.flock(fd, fcntl.LOCK_UN)
        wait_for(lambda: recorded_split(tmp_path) == {"databricks": 0, "internal": 100}, what="the failover after the lock")
        wait_for(lambda: server.post_alertmanager(other).status == 202, what="room again")  # the sender's retry
    finally:
        os.close(fd)
        server.stop()


def test_an_alert_firing_again_inside_the_hold_down_cancels_the_restore(tmp_path, healthy_store):
    config = write_live_config(tmp_path, automation_extra="hold_down: 3s\n", healthy_store=healthy_store)
    server = Serve(config)
    try:
        server.post_alertmanager(FIRING)
        wait_for(lambda: recorded_split(tmp_path) == {"databricks": 0, "internal": 100}, what="the failover")
        server.post_alertmanager(RESOLVED)
        wait_for(lambda: response_alerts(tmp_path) == 1 and actions(tmp_path, "note")[1:], what="resolution")
        refired = message(alert(fingerprint="a1", starts_at="2026-11-29T12:20:00Z"))  # a new firing: new startsAt
        server.post_alertmanager(refired)
        wait_for(lambda: len(actions(tmp_path, "note")) == 3, what="the note about the cancelled restore")
        assert "restore cancelled" in _note_texts(tmp_path)[-1]
        time.sleep(4)  # past the hold-down counted from the first resolution
        assert split(tmp_path) == {"databricks": 0, "internal": 100}
        assert actions(tmp_path, "restore") == []
        assert [e["action"] for e in audit(tmp_path)] == ["failover"]  # no second failover either: still moved
    finally:
        server.stop()


def test_a_restore_a_guard_refuses_is_retried_and_noted_once(tmp_path, healthy_store):
    """In a freeze the failover may be an emergency, the restore never is: it waits for the freeze to end."""
    policy = FAILOVER_POLICY.replace("failover: {}", "failover: {emergency_in_freeze: true}")
    config = write_live_config(tmp_path, policies=policy, frozen=True,
                               automation_extra="hold_down: 0s\nrestore_retry: 1s\n", healthy_store=healthy_store)
    server = Serve(config)
    try:
        server.post_alertmanager(FIRING)
        wait_for(lambda: recorded_split(tmp_path) == {"databricks": 0, "internal": 100}, what="the emergency failover")
        server.post_alertmanager(RESOLVED)
        wait_for(lambda: len(actions(tmp_path, "restore")) >= 3, timeout=30, what="three refused restores")
        assert {a["status"] for a in actions(tmp_path, "restore")} == {"refused"}
        assert all("freeze" in a["detail"] for a in actions(tmp_path, "restore"))
        assert split(tmp_path) == {"databricks": 0, "internal": 100}
        restore_notes = [n for n in _note_texts(tmp_path) if "restore traffic" in n]
        assert len(restore_notes) == 1 and "retrying every 1s" in restore_notes[0]
    finally:
        server.stop()


@pytest.mark.slow
def test_a_restore_that_keeps_failing_is_noted_once_and_once_more_when_it_applies(tmp_path, healthy_store):
    """Every failed try is retried (and recorded), but the incident gets one note for the failing
    step, not one per retry, and one for the restore that finally applied."""
    config = write_live_config(tmp_path, automation_extra="hold_down: 0s\nrestore_retry: 1s\n",
                               healthy_store=healthy_store)
    server = Serve(config)
    try:
        server.post_alertmanager(FIRING)
        wait_for(lambda: recorded_split(tmp_path) == {"databricks": 0, "internal": 100}, what="the failover")
        wait_for(lambda: actions(tmp_path, "note"), what="the failover's note")
        split_file = tmp_path / "state" / "traffic" / "split.json"
        saved = split_file.read_bytes()
        split_file.unlink()
        split_file.mkdir()  # a directory where the actuator reads and writes the split: every restore fails
        server.post_alertmanager(RESOLVED)
        wait_for(lambda: len(actions(tmp_path, "restore")) >= 3, timeout=30, what="three failed restores")
        assert {a["status"] for a in actions(tmp_path, "restore")} == {"failed"}
        restore_notes = [n for n in _note_texts(tmp_path) if "restore traffic" in n]
        assert len(restore_notes) == 1 and ": failed (" in restore_notes[0]
        split_file.rmdir()
        split_file.write_bytes(saved)
        wait_for(lambda: recorded_split(tmp_path) == {"internal": 20, "databricks": 80}, timeout=30,
                 what="the restore once the split can be written")
        wait_for(lambda: len([n for n in _note_texts(tmp_path) if "restore traffic" in n]) == 2, what="its note")
        failed = [a for a in actions(tmp_path, "restore") if a["status"] == "failed"]
        restore_notes = [n for n in _note_texts(tmp_path) if "restore traffic" in n]
        assert len(failed) >= 3 and len(restore_notes) == 2 and ": applied (" in restore_notes[1]
    finally:
        server.stop()


def _note_texts(directory) -> list[str]:
    """What the notes said: the local pager records notes as change events next to the incident."""
    changes = ledger(directory, "paging/ledger.json").get("changes", [])
    return [c.get("summary", "") for c in changes]


def test_a_pagerduty_acknowledgement_is_recorded_against_the_episode_it_confirms(tmp_path, healthy_store):
    import json

    from tests.automation.helpers import PD_SECRET_NEW, pd_event, signed

    config = write_live_config(tmp_path, healthy_store=healthy_store,
                               automation_extra="hold_down: 1h\npagerduty_secrets: [{env: PD_SECRET}]\n")
    server = Serve(config, env={"PD_SECRET": PD_SECRET_NEW})
    try:
        server.post_alertmanager(FIRING)
        wait_for(lambda: actions(tmp_path, "note"), what="the episode's actions")
        body = json.dumps(pd_event("01ACK", incident_key=INCIDENT)).encode()
        assert server.post_pagerduty(body, signed(body, PD_SECRET_NEW, webhook_id="wh-ack")).status == 202
        (ack,) = wait_for(lambda: actions(tmp_path, "pagerduty"), what="the acknowledgement on record")
        assert "incident.acknowledged by Alice On-call" in ack["detail"]
        assert split(tmp_path) == {"databricks": 0, "internal": 100}  # a PagerDuty event never moves traffic
    finally:
        server.stop()


def test_a_replica_killed_mid_failover_is_taken_over_at_restart(tmp_path, healthy_store):
    import signal

    config = write_live_config(tmp_path, automation_extra="hold_down: 1h\n", healthy_store=healthy_store)
    lock_path = tmp_path / "state" / "traffic" / "split.json.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    first = Serve(config)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the failover hangs in the actuator's write...
        assert first.post_alertmanager(FIRING).status == 202
        wait_for(lambda: holds_open(first.proc.pid, lock_path), what="the worker to reach the actuator's lock")
        os.kill(first.proc.pid, signal.SIGKILL)  # ... when the process dies
        first.proc.wait(10)
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
        first.stop()
    second = Serve(config)  # same host, same state: it releases what the dead process held
    try:
        started = time.monotonic()
        wait_for(lambda: recorded_split(tmp_path) == {"databricks": 0, "internal": 100}, timeout=20, what="the takeover")
        assert time.monotonic() - started < 10  # not the 300 s lease
        # The incident's remaining actions, from the record (decision 0216: no delivery log).
        wait_for(lambda: actions(tmp_path, "ticket") and actions(tmp_path, "note"), what="the remaining actions")
        assert len(ledger(tmp_path, "paging/ledger.json")["incidents"]) == 1
        assert [e["outcome"] for e in audit(tmp_path) if e["action"] == "failover"] == ["applied"]
    finally:
        second.stop()
