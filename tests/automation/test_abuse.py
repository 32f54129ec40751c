"""`opsctl serve` under abuse (issue 14 item 6): slow clients, floods of large unauthenticated bodies,
CR/LF in payloads, control characters in ids. Each reproduces what was found and fails without the fix."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests.automation.helpers import (
    FAILOVER_POLICY, PD_SECRET_NEW, Serve, alert, page_key, message, pd_event, request, signed, table_counts, wait_for,
    write_serve_config,
)
from tests.conftest import REPO

READ_TIMEOUT = 2


@pytest.fixture
def server(tmp_path):
    config = write_serve_config(tmp_path, policies=FAILOVER_POLICY, automation_extra=f"""\
        hold_down: 1h
        dry_run: true
        read_timeout: {READ_TIMEOUT}s
        pagerduty_secrets: [{{env: PD_SECRET}}]
        """)
    serve = Serve(config, env={"PD_SECRET": PD_SECRET_NEW})
    yield serve, tmp_path
    serve.stop()


def manifest_memory_limit() -> int:
    """The serve container's memory limit in deploy/serve, in bytes."""
    docs = yaml.safe_load_all((REPO / "deploy" / "serve" / "deployment.yaml").read_text())
    deployment = next(d for d in docs if d and d.get("kind") == "Deployment")
    (container,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "serve"]
    limit = container["resources"]["limits"]["memory"]
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", limit).groups()
    return int(number) * {"Mi": 2 ** 20, "Gi": 2 ** 30}[unit]


def peak_rss(pid: int) -> int:
    """The process's high-water resident set (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.mark.slow
def test_600_slow_header_connections_do_not_starve_healthz_and_are_cut_off(server):
    serve, _ = server
    sockets = []
    try:
        for _ in range(600):
            s = socket.create_connection(("127.0.0.1", serve.port), timeout=10)
            s.sendall(b"POST /v1/alertmanager HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # headers never finished
            sockets.append(s)
        reply = request(f"{serve.url}/healthz", timeout=5)
        assert reply.status == 200, reply.body
        # Each slow connection is closed by the server once read_timeout has passed.
        deadline = time.monotonic() + READ_TIMEOUT + 20
        closed = 0
        for s in sockets:
            s.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                closed += s.recv(1) == b""
            except (ConnectionResetError, socket.timeout):
                closed += 0
        assert closed == 600
        assert request(f"{serve.url}/healthz", timeout=5).status == 200
    finally:
        for s in sockets:
            s.close()


def test_a_body_that_trickles_in_is_cut_off_at_the_read_timeout(server):
    serve, directory = server
    s = socket.create_connection(("127.0.0.1", serve.port), timeout=READ_TIMEOUT + 10)
    try:
        s.sendall(b"POST /v1/alertmanager HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-webhook-token-0123456789\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
        started = time.monotonic()
        answer = s.recv(4096)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert time.monotonic() - started < READ_TIMEOUT + 5
    finally:
        s.close()
    assert table_counts(directory).get("events", 0) == 0


def _flood(port: int, path: str, headers: bytes, body: bytes, count: int) -> list[bytes]:
    answers: list[bytes] = []
    lock = threading.Lock()

    def one():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
                s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          + headers + b"Content-Length: %d\r\n\r\n" % len(body))
                try:
                    s.sendall(body)
                except OSError:
                    pass  # refused before the body was read: the server closed the connection
                answer = s.recv(64)
        except OSError as exc:
            answer = repr(exc).encode()
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=one) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return answers


@pytest.mark.slow
def test_350_unauthenticated_1mb_bodies_stay_under_the_manifests_memory_limit(server):
    serve, directory = server
    body = b"{" + b" " * (1024 * 1024 - 2) + b"}"
    answers = _flood(serve.port, "/v1/pagerduty", b"", body, 350)
    assert sum(a.startswith(b"HTTP/1.1 401") for a in answers) == 350
    forged = _flood(serve.port, "/v1/pagerduty", b"X-PagerDuty-Signature: v1=" + b"0" * 64 + b"\r\nX-Webhook-Id: x\r\n",
                    body, 350)  # a signature must be checked against the body: those are read, a few at a time
    assert all(a.startswith((b"HTTP/1.1 403", b"HTTP/1.1 503")) for a in forged), {a[:20] for a in forged}
    assert sum(a.startswith(b"HTTP/1.1 403") for a in forged) >= 32
    limit = manifest_memory_limit()
    assert peak_rss(serve.proc.pid) < limit / 2, (peak_rss(serve.proc.pid), limit)
    assert request(f"{serve.url}/healthz").status == 200
    assert table_counts(directory).get("events", 0) == 0


def test_cr_lf_in_a_payload_field_cannot_forge_a_serve_log_line(server):
    serve, directory = server
    assert serve.post_alertmanager(message(alert(fingerprint="c0ffee"))).status == 202
    wait_for(lambda: "would add a note" in serve.log_text(), what="the episode's dry-run actions")
    # The acknowledging agent's name, as PagerDuty sends it, is logged with the acknowledgement.
    forged = "2026-12-01 00:00:00,000 WARNING opsctl.automation: FORGED traffic restored by admin"
    event = pd_event("01CRLF", incident_key=page_key())  # the incident's page (issue 36)
    event["event"]["agent"]["summary"] = f"Alice\r\n{forged}"
    body = json.dumps(event).encode()
    assert serve.post_pagerduty(body, signed(body, PD_SECRET_NEW, webhook_id="wh-crlf")).status == 202
    wait_for(lambda: "incident.acknowledged by Alice" in serve.log_text(), what="the acknowledgement in the log")
    lines = serve.log_text().splitlines()
    assert not [line for line in lines if line.startswith(forged[:40])]
    assert any("by Alice\\r\\n2026-12-01" in line for line in lines)  # still there, escaped, on its own line


def test_an_incident_id_with_a_newline_is_refused_with_400(server):
    serve, directory = server
    body = json.dumps(pd_event("01NL", incident_key="opsctl-x\nFORGED | row")).encode()
    reply = serve.post_pagerduty(body, signed(body, PD_SECRET_NEW, webhook_id="wh-nl"))
    assert reply.status == 400 and "control characters" in reply.json()["error"]
    for bad in ("01A\rB", "01\x00"):
        body = json.dumps(pd_event(bad)).encode()
        assert serve.post_pagerduty(body, signed(body, PD_SECRET_NEW, webhook_id="wh-id")).status == 400
    reply = serve.post_alertmanager(message(alert(fingerprint="c1", backend="databricks\nx")))
    assert reply.status == 400 and "control characters" in reply.json()["error"]
    assert table_counts(directory).get("events", 0) == 0
