"""`opsctl serve` as a running process: credentials, bad input, duplicates, PagerDuty signatures, health."""

from __future__ import annotations

import http.client
import json
import time
import threading

import pytest

from tests.automation.helpers import (
    FAILOVER_POLICY, PD_SECRET_NEW, PD_SECRET_OLD, TOKEN, Serve, actions, alert, basic, bearer, message, pd_event,
    incident_records, page_key, request, response_alerts, signed, table_counts, wait_for, write_serve_config,
)
from tests.conftest import run_opsctl

BODY_LIMIT = 4096


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One dry-run server for the tests that only look at answers and the record."""
    directory = tmp_path_factory.mktemp("serve")
    config = write_serve_config(
        directory, policies=FAILOVER_POLICY,
        automation_extra=f"""\
            body_limit: {BODY_LIMIT}
            hold_down: 1h
            dry_run: true
            pagerduty_secrets: [{{env: PD_SECRET_OLD}}, {{env: PD_SECRET_NEW}}]
            """,
    )
    server = Serve(config, env={"PD_SECRET_OLD": PD_SECRET_OLD, "PD_SECRET_NEW": PD_SECRET_NEW})
    yield server, directory
    server.stop()


def _no_change(directory, before):
    assert table_counts(directory) == before


def test_health_and_readiness_answer(served):
    server, _ = served
    assert request(f"{server.url}/healthz").status == 200
    ready = request(f"{server.url}/readyz")
    assert ready.status == 200 and ready.json()["status"] == "ready"


@pytest.mark.parametrize("headers, status", [
    ({"Content-Type": "application/json"}, 401),
    ({**bearer("wrong-token-0123456789"), "Content-Type": "application/json"}, 403),
    (basic("alertmanager", "wrong-token-0123456789"), 403),
    (basic("intruder", TOKEN), 403),
], ids=["no credentials", "wrong bearer", "wrong basic password", "wrong basic user"])
def test_without_valid_credentials_nothing_is_recorded(served, headers, status):
    server, directory = served
    before = table_counts(directory)
    reply = server.post_alertmanager(message(alert(fingerprint="e1")), headers=headers)
    assert reply.status == status
    if status == 401:
        assert "Bearer" in reply.headers.get("www-authenticate", "")
    _no_change(directory, before)


def test_wrong_content_type_is_415(served):
    server, directory = served
    before = table_counts(directory)
    reply = server.post_alertmanager(message(alert(fingerprint="e2")), headers={**bearer(), "Content-Type": "text/plain"})
    assert reply.status == 415
    _no_change(directory, before)


@pytest.mark.parametrize("body, expected", [
    (b'{"version": "4", "alerts": [', "malformed JSON"),
    (b"\xff\xfe{}", "not UTF-8"),
    (json.dumps({"text": "hello"}).encode(), "not an Alertmanager webhook message"),
    (b"[" * 200 + b"]" * 200, "nested too deeply"),
], ids=["truncated JSON", "not UTF-8", "another sender's JSON", "deep nesting"])
def test_malformed_or_foreign_payload_is_400(served, body, expected):
    server, directory = served
    before = table_counts(directory)
    reply = server.post_alertmanager(body)
    assert reply.status == 400
    assert expected in reply.json()["error"]
    _no_change(directory, before)


def test_body_past_the_limit_is_413_by_content_length(served):
    server, directory = served
    before = table_counts(directory)
    payload = message(alert(fingerprint="e3", padding="x" * BODY_LIMIT))
    reply = server.post_alertmanager(payload)
    assert reply.status == 413
    _no_change(directory, before)


def test_body_past_the_limit_is_413_when_chunked_without_content_length(served):
    """The cap is counted while reading: no Content-Length to trust, the body is streamed in chunks."""
    server, directory = served
    before = table_counts(directory)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.putrequest("POST", "/v1/alertmanager")
    for k, v in {**bearer(), "Transfer-Encoding": "chunked"}.items():
        conn.putheader(k, v)
    conn.endheaders()
    chunk = b"x" * 1024
    for _ in range(BODY_LIMIT // 1024 + 2):
        try:
            conn.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            break
    try:
        conn.send(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    response = conn.getresponse()
    assert response.status == 413
    conn.close()
    _no_change(directory, before)


def test_a_thousand_bad_requests_change_nothing_and_the_service_keeps_answering(served):
    server, directory = served
    before = table_counts(directory)
    metrics_before = server.metrics()
    good = json.dumps(message(alert(fingerprint="ee"))).encode()
    kinds = [
        (good, {"Content-Type": "application/json"}, 401),
        (good, bearer("not-the-token-0123456789"), 403),
        (good, {**bearer(), "Content-Type": "application/x-www-form-urlencoded"}, 415),
        (b"{not json", bearer(), 400),
        (json.dumps({"version": "4"}).encode(), bearer(), 400),
        (b"x" * (BODY_LIMIT + 1), bearer(), 413),
        (good, {"Content-Type": "application/json", "X-PagerDuty-Signature": "v1=00", "X-Webhook-Id": "w"}, None),
    ]
    statuses: dict[int, int] = {}
    lock = threading.Lock()

    def hammer(offset: int):
        for i in range(250):  # 4 threads x 250 = 1000 requests
            body, headers, expected = kinds[(offset + i) % len(kinds)]
            url = f"{server.url}/v1/pagerduty" if expected is None else f"{server.url}/v1/alertmanager"
            reply = request(url, body, headers=headers)
            assert reply.status == (403 if expected is None else expected), reply.body
            with lock:
                statuses[reply.status] = statuses.get(reply.status, 0) + 1

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sum(statuses.values()) == 1000
    _no_change(directory, before)
    assert request(f"{server.url}/healthz").status == 200
    after = server.metrics()
    refused = sum(v - metrics_before.get(k, 0) for k, v in after.items()
                  if k.startswith("opsctl_webhook_deliveries_total") and "accepted" not in k and "duplicate" not in k)
    assert refused == 1000
    # ... and a good delivery is still taken.
    assert server.post_alertmanager(message(alert(fingerprint="e4", backend="internal", slo="internal-availability"))).status == 202


def test_duplicate_deliveries_act_once(tmp_path):
    config = write_serve_config(tmp_path, policies=FAILOVER_POLICY, automation_extra="dry_run: true\nhold_down: 1h\n")
    server = Serve(config)
    try:
        payload = message(alert(fingerprint="d1"))
        replies = []

        def send():
            replies.append(server.post_alertmanager(payload).status)

        threads = [threading.Thread(target=send) for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        for _ in range(5):  # and retried one after another, as Alertmanager does on its repeat interval
            replies.append(server.post_alertmanager(payload).status)
        assert replies == [202] * 15
        wait_for(lambda: len(actions(tmp_path, "note")) >= 1, what="the note after the firing alert")
        done = [(a["action"], a["status"]) for a in actions(tmp_path)]
        assert done == [("failover", "dry_run"), ("page", "dry_run"), ("ticket", "dry_run"), ("note", "dry_run")]
        assert table_counts(tmp_path)["events"] == 1
        m = server.metrics()
        assert m['opsctl_webhook_deliveries_total{result="accepted",source="alertmanager"}'] == 1
        assert m['opsctl_webhook_deliveries_total{result="duplicate",source="alertmanager"}'] == 14
    finally:
        server.stop()


def test_a_second_alert_of_the_same_episode_does_not_repeat_page_failover_or_ticket(tmp_path):
    """The 1h/5m and the 6h/30m page pairs of one SLO are two alerts (two fingerprints), one incident."""
    config = write_serve_config(tmp_path, policies=FAILOVER_POLICY, automation_extra="dry_run: true\nhold_down: 1h\n")
    server = Serve(config)
    try:
        assert server.post_alertmanager(message(alert(fingerprint="f1", long_window="1h"))).status == 202
        wait_for(lambda: len(actions(tmp_path, "note")) == 1, what="first alert handled")
        assert server.post_alertmanager(message(alert(fingerprint="f2", long_window="6h"))).status == 202
        wait_for(lambda: response_alerts(tmp_path) == 2, what="second alert recorded")
        wait_for(lambda: server.metrics().get('opsctl_automation_events_total{result="done"}') == 2, what="2 events done")
        assert [a["action"] for a in actions(tmp_path)] == ["failover", "page", "ticket", "note"]
    finally:
        server.stop()


def test_a_late_firing_copy_after_the_resolution_changes_nothing(tmp_path):
    config = write_serve_config(tmp_path, policies=FAILOVER_POLICY, automation_extra="dry_run: true\nhold_down: 1h\n")
    server = Serve(config)
    try:
        firing = message(alert(fingerprint="c1"))
        resolved = message(alert(fingerprint="c1", status="resolved"))
        # Answered once written (decision 0216): the resolve is remembered by the incidents' index,
        # and the late copy finds it there, so nothing is queued for a worker.
        first = server.post_alertmanager(resolved)
        assert first.status == 202 and first.json()["queued"] == 0
        late = server.post_alertmanager(firing)  # delivered late (retried by a peer)
        assert late.status == 202 and late.json()["queued"] == 0
        assert actions(tmp_path) == []
        assert incident_records(tmp_path) == []  # the late copy opened no incident
    finally:
        server.stop()


def test_pagerduty_webhooks_are_verified_and_deduplicated(served):
    server, directory = served
    # An event about no incident of this service is answered and written nowhere (decision 0216).
    stray = json.dumps(pd_event("01STRAY", incident_key="opsctl-automation-availability-databricks")).encode()
    before = table_counts(directory)["events"]
    reply = server.post_pagerduty(stray, signed(stray, PD_SECRET_NEW, webhook_id="wh-s"))
    assert reply.status == 202 and reply.json()["incident"] is False
    assert table_counts(directory)["events"] == before
    # The events of the incident's page: it is taken in by the page, once.
    assert server.post_alertmanager(message(alert(fingerprint="dd01"))).status == 202
    wait_for(lambda: incident_records(directory), what="the incident")
    body = json.dumps(pd_event("01ROT", incident_key=page_key())).encode()
    before = table_counts(directory)["events"]
    unsigned = {"Content-Type": "application/json", "X-Webhook-Id": "wh-a"}
    assert server.post_pagerduty(body, unsigned).status == 401
    assert server.post_pagerduty(body, signed(body, "retired-secret-000000", webhook_id="wh-a")).status == 403
    assert server.post_pagerduty(body + b" ", signed(body, PD_SECRET_OLD, webhook_id="wh-a")).status == 403
    assert table_counts(directory)["events"] == before
    # Rotation: PagerDuty signs with the old and the new secret; either entry verifies.
    first = server.post_pagerduty(body, signed(body, "retired-secret-000000", PD_SECRET_NEW, webhook_id="wh-a"))
    assert first.status == 202 and first.json()["status"] == "accepted"
    again = server.post_pagerduty(body, signed(body, PD_SECRET_OLD, webhook_id="wh-a"))
    assert again.status == 202 and again.json()["status"] == "duplicate"
    # The same signed event under new X-Webhook-Id values (a replay) is still the one event.
    for webhook_id in ("wh-b", "wh-c", "wh-d", "wh-e", "wh-f"):
        other = server.post_pagerduty(body, signed(body, PD_SECRET_OLD, webhook_id=webhook_id))
        assert other.status == 202 and other.json()["status"] == "duplicate"
    assert table_counts(directory)["events"] == before + 1
    # A signed event from long ago (a captured body replayed) is refused, and so is one from the future.
    for occurred in ("2026-01-01T00:00:00.000Z", time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() + 3600))):
        old = json.dumps(pd_event("01OLD", occurred_at=occurred)).encode()
        reply = server.post_pagerduty(old, signed(old, PD_SECRET_OLD, webhook_id="wh-old"))
        assert reply.status == 400 and "outside" in reply.json()["error"]
    assert table_counts(directory)["events"] == before + 1
    no_id = {k: v for k, v in signed(body, PD_SECRET_OLD).items() if k != "X-Webhook-Id"}
    assert server.post_pagerduty(body, no_id).status == 400
    bad = json.dumps({"event": {"id": "x"}}).encode()
    assert server.post_pagerduty(bad, signed(bad, PD_SECRET_OLD, webhook_id="wh-c")).status == 400


def test_metrics_are_prometheus_text(served):
    server, _ = served
    reply = request(f"{server.url}/metrics")
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("text/plain")
    text = reply.body.decode()
    for name in ("opsctl_webhook_deliveries_total", "opsctl_automation_action_latency_seconds_bucket",
                 "opsctl_automation_queue_capacity 1000.0"):
        assert name in text


def test_serve_refuses_to_start_without_a_token(tmp_path):
    config = write_serve_config(tmp_path, policies=FAILOVER_POLICY, automation_extra="dry_run: true\n")
    result = run_opsctl("--config", str(config), "serve", "--bind", "127.0.0.1:1", env={"OPSCTL_WEBHOOK_TOKEN": ""})
    assert result.exit_code == 2
    assert "no webhook token" in result.stderr and "--token-file" in result.stderr


def test_token_file_and_basic_auth(tmp_path):
    config = write_serve_config(tmp_path, policies=FAILOVER_POLICY, automation_extra="dry_run: true\n")
    token_file = tmp_path / "token"
    token_file.write_text("from-a-file-0123456789\n")
    server = Serve(config, args=("--token-file", str(token_file)), token="env-token-is-not-used-000")
    try:
        assert server.post_alertmanager(message(alert(fingerprint="b1")), headers=bearer("env-token-is-not-used-000")).status == 403
        assert server.post_alertmanager(message(alert(fingerprint="b1")), headers=basic("alertmanager", "from-a-file-0123456789")).status == 202
        assert "from-a-file" not in server.log_text()
    finally:
        server.stop()
