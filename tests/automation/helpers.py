"""Running `opsctl serve` and a real Alertmanager on loopback, and talking to them."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO, free_port, require_binary, stop_process, wait_http, wait_until

TOKEN = "test-webhook-token-0123456789"
PD_SECRET_OLD = "pd-secret-old-aaaaaaaaaaaaaaaa"
PD_SECRET_NEW = "pd-secret-new-bbbbbbbbbbbbbbbb"


@dataclass
class Reply:
    status: int
    body: bytes
    headers: dict

    def json(self):
        return json.loads(self.body)


def request(url: str, body: bytes | None = None, *, method: str | None = None, headers: dict | None = None,
            timeout: float = 10.0) -> Reply:
    req = urllib.request.Request(url, data=body, method=method or ("POST" if body is not None else "GET"),
                                 headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return Reply(resp.status, resp.read(), dict(resp.headers))
    except urllib.error.HTTPError as exc:
        return Reply(exc.code, exc.read(), dict(exc.headers))


def bearer(token: str = TOKEN) -> dict:
    return {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}


def basic(user: str, password: str) -> dict:
    raw = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {raw}", "Content-Type": "application/json"}


def signed(body: bytes, *secrets: str, webhook_id: str = "wh-1") -> dict:
    """PagerDuty's headers, the signature computed here with hmac/hashlib directly."""
    entries = ",".join("v1=" + hmac.new(s.encode(), body, hashlib.sha256).hexdigest() for s in secrets)
    return {"Content-Type": "application/json", "X-PagerDuty-Signature": entries, "X-Webhook-Id": webhook_id}


def alert(*, status: str = "firing", fingerprint: str = "1a2b3c4d5e6f7a8b", starts_at: str = "2026-11-29T12:00:00.5Z",
          slo: str = "databricks-availability", backend: str = "databricks", severity: str = "page",
          alertname: str = "SloBurnRatePage", **extra_labels) -> dict:
    labels = {"alertname": alertname, "severity": severity, "slo": slo, "backend": backend,
              "service": "llm-inference", **extra_labels}
    return {
        "status": status, "labels": labels, "annotations": {"summary": f"{slo} burning"},
        "startsAt": starts_at, "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else "2026-11-29T12:30:00Z",
        "generatorURL": "http://prometheus.example/graph", "fingerprint": fingerprint,
    }


def message(*alerts: dict, group_key: str = '{}:{alertname="SloBurnRatePage"}', status: str | None = None) -> dict:
    alerts = alerts or (alert(),)
    return {
        "version": "4", "groupKey": group_key, "truncatedAlerts": 0,
        "status": status or ("firing" if any(a["status"] == "firing" for a in alerts) else "resolved"),
        "receiver": "opsctl", "groupLabels": {"alertname": "SloBurnRatePage"}, "commonLabels": {},
        "commonAnnotations": {}, "externalURL": "http://alertmanager.example", "alerts": list(alerts),
    }


def pd_event(event_id: str = "01EVENT", event_type: str = "incident.acknowledged", incident_key: str = "k",
             occurred_at: str | None = None) -> dict:
    """A PagerDuty webhooks v3 body; `occurred_at` defaults to now (serve refuses stale events)."""
    if occurred_at is None:
        occurred_at = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    return {"event": {
        "id": event_id, "event_type": event_type, "resource_type": "incident", "occurred_at": occurred_at,
        "agent": {"id": "PUSER1", "summary": "Alice On-call", "type": "user_reference"}, "client": None,
        "data": {"id": "PINC123", "type": "incident", "status": "acknowledged", "incident_key": incident_key,
                 "title": "databricks-availability burning", "html_url": "https://example.pagerduty.com/incidents/PINC123"},
    }}


def page_key(service: str = "llm-inference", route: str = '{}/{severity="page"}') -> str:
    """The PagerDuty dedup key of a service's incident: Alertmanager's own for the service's group
    on the paging route (sha256 of the group key `<route key>:{service="NAME"}`), computed here
    from Alertmanager's formula (notify/util.go Key.Hash), not opsctl's code."""
    return hashlib.sha256(f'{route}:{{service="{service}"}}'.encode()).hexdigest()


def write_serve_config(directory: Path, *, policies: str, automation_extra: str = "", extra: str = "",
                       slo_dir: Path | None = None, period: str = "28d") -> Path:
    path = directory / "opsctl.yaml"
    path.write_text(textwrap.dedent(f"""\
        service: llm-inference
        backends:
          internal: {{kind: internal, description: vLLM pods}}
          databricks: {{kind: vendor, vendor: databricks, description: Databricks Model Serving}}
        slos: {{dir: "{slo_dir or REPO / 'slos'}", period: {period}}}
        state_dir: "{directory / 'state'}"
        """) + textwrap.dedent(extra) + "automation:\n" + textwrap.indent(textwrap.dedent(automation_extra), "  ")
        + "  policies:\n" + textwrap.indent(textwrap.dedent(policies), "    "))
    return path


FAILOVER_POLICY = """\
- name: availability
  match: {alertname: SloBurnRatePage, severity: page}
  match_re: {slo: ".+-availability", backend: "internal|databricks"}
  actions: {page: {}, failover: {}, ticket: {}, note: true, restore: true}
"""


class Serve:
    """`opsctl serve` as a subprocess on a free loopback port."""

    def __init__(self, config: Path, *, args: tuple[str, ...] = (), env: dict | None = None, token: str | None = TOKEN,
                 ready_path: str = "/readyz"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = config
        self.log_path = config.parent / f"serve-{self.port}.log"
        self.log = open(self.log_path, "w")
        full_env = {k: v for k, v in os.environ.items() if k not in ("OPSCTL_CONFIG", "OPSCTL_WEBHOOK_TOKEN")}
        full_env["PYTHONPATH"] = str(REPO)
        if token is not None:
            full_env["OPSCTL_WEBHOOK_TOKEN"] = token
        full_env.update(env or {})
        # `serve` runs until stopped: a process of its own, ended by SIGTERM like a pod's.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "opsctl", "--config", str(config), "serve", "--bind", f"127.0.0.1:{self.port}",
             *args], stdout=self.log, stderr=subprocess.STDOUT, env=full_env,
        )
        try:
            wait_http(f"{self.url}{ready_path}", timeout=30)
        except Exception:
            self.stop()
            raise RuntimeError(f"opsctl serve did not start:\n{self.log_text()}")

    def post_alertmanager(self, payload, headers=None) -> Reply:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return request(f"{self.url}/v1/alertmanager", body, headers=headers if headers is not None else bearer())

    def post_pagerduty(self, body: bytes, headers: dict) -> Reply:
        return request(f"{self.url}/v1/pagerduty", body, headers=headers)

    def metrics(self) -> dict[str, float]:
        """Samples of /metrics as {'name{labels}': value}, parsed here without opsctl's code."""
        text = request(f"{self.url}/metrics").body.decode()
        samples = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                samples[name] = float(value)
        return samples

    def log_text(self) -> str:
        self.log.flush()
        return self.log_path.read_text()

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.close()


def state_db(config_dir: Path) -> Path:
    return config_dir / "state" / "automation" / "automation.sqlite"


def actions(config_dir: Path, action: str | None = None) -> list[dict]:
    """The service's record of actions, read straight from its SQLite file."""
    path = state_db(config_dir)
    if not path.exists():
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    conn.row_factory = sqlite3.Row
    try:
        sql = "SELECT policy, action, status, detail, dry_run FROM actions"
        rows = conn.execute(sql + (" WHERE action = ?" if action else "") + " ORDER BY id",
                            (action,) if action else ()).fetchall()
        return [dict(r) for r in rows]
    finally:
        conn.close()


def table_counts(config_dir: Path) -> dict[str, int]:
    """What `serve` keeps of its deliveries and actions (decision 0216: deliveries are not
    persisted): `events`, the alert states its incidents hold plus the PagerDuty events their pages
    took in (a merged incident, which no one else ever saw, not counted); `actions`, the rows of its
    record of actions."""
    held = [i for i in incident_records(config_dir) if not i.get("merged")]
    events = sum(len(i.get("alerts", [])) + len((i.get("page") or {}).get("events", [])) for i in held)
    path = state_db(config_dir)
    if not path.exists():
        return {"events": events, "actions": 0}
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        return {"events": events, "actions": conn.execute("SELECT COUNT(*) FROM actions").fetchone()[0]}
    finally:
        conn.close()


def incident_records(config_dir: Path) -> list[dict]:
    """The incidents `opsctl serve` keeps in local mode: a file each under the state dir."""
    return [json.loads(p.read_text())["data"] for p in sorted((config_dir / "state" / "incidents").glob("incident-*.json"))]


def responses(config_dir: Path) -> list[dict]:
    """Every incident's responses (what each policy does about its target), as stored; an incident
    merged into the one another process opened at the same moment never existed for anyone else."""
    return [r for i in incident_records(config_dir) if not i.get("merged") for r in i.get("responses", [])]


def response_alerts(config_dir: Path) -> int:
    """The alert states the responses hold (one per policy and fingerprint)."""
    return sum(len(r.get("alerts", [])) for r in responses(config_dir))


def kube_incidents(api, namespace: str, service: str = "llm-inference") -> list[dict]:
    """The incidents `opsctl serve` keeps in team mode: one ConfigMap each
    (`opsctl-<service>-incident-...`, JSON in `state.json`), read from the loopback API server."""
    prefix = f"opsctl-{service}-incident-"
    with api.lock:
        names = sorted(name for (group, plural, ns, name) in api.objects
                       if (group, plural, ns) == ("", "configmaps", namespace) and name.startswith(prefix))
    found = [api.get("", "configmaps", namespace, name) for name in names]
    return [json.loads(cm["data"]["state.json"]) for cm in found if cm and "state.json" in (cm.get("data") or {})]


def kube_responses(api, namespace: str, service: str = "llm-inference") -> list[dict]:
    """Every team-mode incident's responses (what each policy does about its target), as stored."""
    return [r for i in kube_incidents(api, namespace, service) for r in i.get("responses", [])]


def wait_for(predicate, timeout: float = 20.0, interval: float = 0.05, what: str = "condition"):
    return wait_until(predicate, timeout, interval, what)


class Alertmanager:
    """A real prometheus-alertmanager on 127.0.0.1, no clustering, temp storage, one webhook receiver."""

    def __init__(self, workdir: Path, webhook_url: str, *, token: str = TOKEN, group_wait: str = "1s",
                 group_interval: str = "2s", repeat_interval: str = "1h", resolve_timeout: str = "5m",
                 port: int | None = None):
        self.binary = require_binary("prometheus-alertmanager")
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        (workdir / "token").write_text(token)
        config = workdir / "alertmanager.yml"
        config.write_text(textwrap.dedent(f"""\
            global:
              resolve_timeout: {resolve_timeout}
            route:
              receiver: opsctl
              group_by: [alertname, slo, backend]
              group_wait: {group_wait}
              group_interval: {group_interval}
              repeat_interval: {repeat_interval}
            receivers:
              - name: opsctl
                webhook_configs:
                  - url: {webhook_url}
                    send_resolved: true
                    http_config:
                      authorization:
                        type: Bearer
                        credentials_file: {workdir / 'token'}
            """))
        self.config = config
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(workdir / "alertmanager.log", "w")
        self.proc = subprocess.Popen(
            [self.binary, f"--config.file={config}", f"--storage.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address=", "--log.level=debug"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        try:
            wait_http(f"{self.url}/-/ready", timeout=30)
        except Exception:
            self.stop()
            raise

    def push(self, alerts: list[dict]) -> None:
        """POST /api/v2/alerts: [{labels, annotations, startsAt, endsAt, generatorURL}]."""
        reply = request(f"{self.url}/api/v2/alerts", json.dumps(alerts).encode(),
                        headers={"Content-Type": "application/json"})
        assert reply.status == 200, reply.body

    def log_text(self) -> str:
        self.log.flush()
        return (self.workdir / "alertmanager.log").read_text()

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.close()


# ---------------------------------------------------------------------------------------------
# The live path: file actuator, local pager and ticket ledgers, healthy metrics in the embedded store

LIVE_EXTRA = """\
metrics: {max_data_age: 3650d}  # the healthy store holds a day ending at a fixed past instant
traffic:
  actuator: file
  default_split: {databricks: 80, internal: 20}
  rate_limit: {max_changes: 50, window: 1h}
capacity: {backend: internal, source: static, replicas: 10, rps_per_replica: 150, headroom: 0.25, max_replicas: 10}
paging: {provider: local}
tickets:
  provider: local
  vendors:
    databricks:
      categories: {inference: Model Serving, platform: Workspace}
      severities: {Sev1: "Severity 1", Sev2: "Severity 2", Sev3: "Severity 3", Sev4: "Severity 4"}
"""

ALWAYS_FROZEN = """\
freezes:
  - {name: launch, timezone: UTC, start: "2020-01-01T00:00", end: "2099-01-01T00:00", reason: launch week}
"""


def write_live_config(directory: Path, *, policies: str = FAILOVER_POLICY, automation_extra: str = "",
                      frozen: bool = False, healthy_store: Path | None = None) -> Path:
    """A config whose failover really moves the split in state/traffic/split.json."""
    import shutil

    (directory / "state").mkdir(parents=True, exist_ok=True)
    if healthy_store is not None:
        shutil.copy(healthy_store, directory / "state" / "metrics.sqlite")
    extra = LIVE_EXTRA + (ALWAYS_FROZEN if frozen else "freezes: []\n")
    return write_serve_config(directory, policies=policies, automation_extra=automation_extra, extra=extra)


def split(directory: Path) -> dict | None:
    """The split as the grammar service reads it: the file actuator's JSON, read directly."""
    path = directory / "state" / "traffic" / "split.json"
    return json.loads(path.read_text())["weights"] if path.exists() else None


def recorded_split(directory: Path) -> dict | None:
    """The split once the change that wrote it is also in the audit log. The controller writes the
    split first and appends the audit entry right after, so a test that saw only the file and then
    read the log could look between the two."""
    weights = split(directory)
    applied = [e for e in audit(directory) if e.get("outcome") == "applied"]
    if weights is None or not applied or applied[-1]["after"]["weights"] != weights:
        return None
    return weights


def audit(directory: Path, kind: str = "traffic") -> list[dict]:
    path = directory / "state" / "audit.jsonl"
    if not path.exists():
        return []
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in entries if e.get("kind") == kind]


def ledger(directory: Path, name: str) -> dict:
    """The local pager's (paging/ledger.json) or ticket provider's (tickets/ledger.json) ledger."""
    path = directory / "state" / name
    return json.loads(path.read_text()) if path.exists() else {}
