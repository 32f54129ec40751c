"""The incident as the unit of response (issue 36 items 1 and 4), in-process on the real engine,
incident file store, live executor, file actuator and the local pager and ticket
ledgers: an outage whose auth alert is followed 14 minutes later by a latency alert on the same
vendor is one PagerDuty incident (Alertmanager's own dedup key), one platform ticket and a note
for the second cause; a partial failover's page says what moved, what is stuck, why and what to
do next."""

from __future__ import annotations

import hashlib
import time


from tests.automation.helpers import LIVE_EXTRA, ledger, split, write_serve_config

POLICIES = """\
- name: availability
  match: {severity: page, category: availability}
  match_re: {backend: "internal|databricks"}
  actions: {page: {}, failover: {}, ticket: {}, note: true, restore: true}
- name: latency
  match: {severity: page, category: latency, backend: databricks}
  actions: {page: {severity: error}, ticket: {}, note: true}
"""
RUNBOOKS = "freezes: []\nrunbooks:\n  tickets: {auth_category: platform}\n"
# Alertmanager's PagerDuty dedup key for the service's group on the paging route (grouped by
# service): sha256 of the group key `{}/{severity="page"}:{service="llm-inference"}`.
GROUP_KEY = '{}/{severity="page"}:{service="llm-inference"}'
DEDUP = hashlib.sha256(GROUP_KEY.encode()).hexdigest()


def event(fp: str, *, category: str, cause: str, alertname: str, status: str = "firing",
          starts: str = "2026-11-29T12:00:00.500000000Z", key: str = ""):
    from opsctl.automation.policy import AlertEvent

    labels = {"alertname": alertname, "severity": "page", "slo": f"databricks-{category}", "backend": "databricks",
              "service": "llm-inference", "category": category}
    return AlertEvent(key=key or f"{fp}-{status}", status=status, labels=labels,
                      annotations={"summary": f"databricks {category} burning", "cause": cause}, starts_at=starts,
                      fingerprint=fp, group_key='{}/{severity=~"page|ticket"}:{alertname="x"}', received_at=time.time())


def build(tmp_path, healthy_store, *, extra: str = LIVE_EXTRA):
    import shutil

    from opsctl.automation.engine_factory import build_engine, incident_store
    from opsctl.automation.executors import LiveExecutor
    from opsctl.automation.fenced import FencedExecutor
    from opsctl.clock import SimClock
    from opsctl.config.loading import load_config_file

    (tmp_path / "state").mkdir(parents=True, exist_ok=True)
    shutil.copy(healthy_store, tmp_path / "state" / "metrics.sqlite")
    cfg = load_config_file(write_serve_config(tmp_path, policies=POLICIES, extra=extra + RUNBOOKS,
                                              automation_extra="hold_down: 60s\n"))
    clock = SimClock(time.time())
    incidents = incident_store(cfg, clock=clock.now)
    engine = build_engine(cfg, incidents, FencedExecutor(LiveExecutor(cfg)), clock=clock.now)
    return engine, incidents, clock


def test_auth_then_latency_on_one_vendor_is_one_pagerduty_incident_one_platform_ticket_and_a_note(
        tmp_path, healthy_store):
    engine, incidents, clock = build(tmp_path, healthy_store)
    engine.handle_alert(event("a1", category="availability", cause="auth", alertname="SloBurnRatePage"))
    assert split(tmp_path) == {"databricks": 0, "internal": 100}
    clock.advance(14 * 60)
    engine.handle_alert(event("l1", category="latency", cause="latency", alertname="SloLatencyBurnPage",
                              starts="2026-11-29T12:14:00.500000000Z"))

    pages = ledger(tmp_path, "paging/ledger.json")["incidents"]
    assert len({p["dedup_key"] for p in pages}) == 1 and len(pages) == 1  # one PagerDuty incident
    assert pages[0]["dedup_key"] == DEDUP  # Alertmanager's own: its page and ours are the same incident
    (ticket,) = ledger(tmp_path, "tickets/ledger.json")["tickets"]
    assert ticket["category"] == "Workspace"  # platform (auth), not Model Serving
    (note,) = ticket["notes"]
    assert "latency" in note["text"]
    # the page heard of the second cause as a note (a change event beside it), not a second page
    changes = ledger(tmp_path, "paging/ledger.json")["changes"]
    assert any("new cause" in c["summary"] and "latency" in c["summary"] for c in changes)

    (incident,) = incidents.incidents()
    assert incident.causes == ("auth", "latency") and incident.backends == ("databricks",)
    assert incident.state == "mitigated"
    assert [(m.kind, m.status) for m in incident.moves] == [("failover", "applied")]
    assert incident.page.dedup_key == DEDUP and incident.page.sent_at is not None
    assert [(t.vendor, t.category) for t in incident.tickets] == [("databricks", "platform")]
    assert incident.tickets[0].causes == ("auth", "latency")


def test_a_repeat_of_both_alerts_adds_nothing(tmp_path, healthy_store):
    engine, incidents, clock = build(tmp_path, healthy_store)
    auth = event("a1", category="availability", cause="auth", alertname="SloBurnRatePage")
    latency = event("l1", category="latency", cause="latency", alertname="SloLatencyBurnPage")
    for _ in range(2):
        engine.handle_alert(auth)
        engine.handle_alert(latency)
    pages = ledger(tmp_path, "paging/ledger.json")
    assert len(pages["incidents"]) == 1
    (ticket,) = ledger(tmp_path, "tickets/ledger.json")["tickets"]
    assert len(ticket["notes"]) == 1
    assert sum("new cause" in c["summary"] for c in pages["changes"]) == 1


def test_the_incident_restores_and_closes_after_the_quiet_window(tmp_path, healthy_store):
    engine, incidents, clock = build(tmp_path, healthy_store)
    engine.handle_alert(event("a1", category="availability", cause="server_error", alertname="SloBurnRatePage"))
    clock.advance(60)
    engine.handle_alert(event("a1", category="availability", cause="server_error", alertname="SloBurnRatePage",
                              status="resolved"))
    assert incidents.open_incident().state == "restoring"
    clock.advance(61)  # the hold-down
    engine.run_due_restores()
    assert split(tmp_path) == {"databricks": 80, "internal": 20}
    incident = incidents.open_incident()
    assert [(m.kind, m.status) for m in incident.moves] == [("failover", "applied"), ("restore", "applied")]
    assert incident.state == "resolved"
    clock.advance(15 * 60)  # the correlation window after the last alert
    engine.run_due_restores()
    assert incidents.open_incident() is None and incidents.incidents()[0].state == "closed"
    (ticket,) = ledger(tmp_path, "tickets/ledger.json")["tickets"]
    assert ticket["category"] == "Model Serving"  # a 5xx outage: inference


def test_on_call_taking_the_incident_over_stops_the_automation(tmp_path, healthy_store):
    engine, incidents, clock = build(tmp_path, healthy_store)
    engine.handle_alert(event("a1", category="availability", cause="server_error", alertname="SloBurnRatePage"))
    (incident,) = incidents.incidents()
    incidents.take_over(incident.id, by="alice", reason="hands on")
    taken = engine.handle_alert(event("i1", category="availability", cause="server_error",
                                      alertname="SloBurnRatePage", starts="2026-11-29T12:05:00.500000000Z"))
    assert [t.action for t in taken] == ["takeover", "note"]
    assert len(ledger(tmp_path, "paging/ledger.json")["incidents"]) == 1


PARTIAL_EXTRA = LIVE_EXTRA.replace(
    "capacity: {backend: internal, source: static, replicas: 10, rps_per_replica: 150, headroom: 0.25, max_replicas: 10}",
    "capacity: {backend: internal, source: static, replicas: 2, rps_per_replica: 150, headroom: 0.25, max_replicas: 2}")


def test_a_partial_failover_pages_the_moved_and_stuck_points_why_and_what_to_do_next(tmp_path, healthy_store):
    # internal's capacity is cut to 2 replicas of 150 rps (headroom 25%) against 1000 rps in all: it
    # can take only a few of databricks' 80 points; the split file says how many moved.
    engine, incidents, clock = build(tmp_path, healthy_store, extra=PARTIAL_EXTRA)
    engine.handle_alert(event("a1", category="availability", cause="server_error", alertname="SloBurnRatePage"))
    weights = split(tmp_path)
    (page,) = ledger(tmp_path, "paging/ledger.json")["incidents"]
    title = page["title"]
    moved = weights["internal"] - 20
    stuck = weights["databricks"]
    assert 0 < moved and stuck > 0 and moved + stuck == 80
    assert f"moved {moved} of its 80 points ({moved} to internal)" in title
    assert f"{stuck} points STUCK on databricks (capacity" in title
    assert "degrade" in title and "traffic.degradation" in title  # none configured: how to get one
    assert "capacity.max_replicas" in title
    (incident,) = incidents.incidents()
    assert f"opsctl traffic failover --from databricks --incident {incident.id} --yes" in title
    assert page["severity"] == "critical"  # act now: a partial failover needs on-call
    assert incident.page.failed_sent
