"""What the traffic commands print and exit with, pinned before the controller's results became
return values (#26 item 1): for the same inputs every `-o json` document, every table and error line
and every exit code stay as they were (applied, unchanged, dry run, refused by a guard, refused by
bounds, a flag refused before any attempt, lost to concurrent writers, a partial failover, a ramp
aborted by a refused step, a completed ramp), and the history and status that render them; and
(pinned before `traffic status` was typed, in status_documents.json) every `traffic status -o json`
variant with its table: capacity read, unknown, failing and unconfigured, the vendor's throughput (ok,
no data, failing), a freeze in force and the next one, an open failover, a file and an unreachable
shadow object, a ramp running and interrupted, an unknown and a corrupt split.

The expected texts in result_documents.json were captured from the code before the refactor
(commit a7649f5, before 7e0e353), with what differs between runs replaced by placeholders (`normalised`): operation
and change ids, wall-clock times and timestamps, the temp dir, the ramp owner's pid and host, the data's age (the store's data is fixed, the clock runs). To capture them again (only for a
deliberate change of output): OPSCTL_PIN_WRITE=1 pytest tests/traffic/test_result_documents.py."""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path

import pytest

from tests.traffic.conftest import kube_capacity
from tests.traffic.test_kubernetes import NS, kube_env, seed_configmap

PINNED = Path(__file__).with_name("result_documents.json")
CAP5 = ("capacity: {backend: internal, source: static, replicas: 5, rps_per_replica: 100, headroom: 0.25,"
        " max_replicas: 5}\n")
SET = ("traffic", "set")


def normalised(text: str, root: Path) -> str:
    text = text.replace(str(root), "<ROOT>")
    text = re.sub(r"\b(set|ramp|failover|restore|rollback)-\d{8}T\d{6}Z-[0-9a-f]{6}\b", r"\1-<OP>", text)
    text = re.sub(r"\bchg-[0-9a-f]{12}\b", "chg-<ID>", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?", "<TIME>", text)
    text = re.sub(r'"ts": [0-9.]+', '"ts": "<TS>"', text)
    text = re.sub(r'"pid": \d+', '"pid": "<PID>"', text).replace('"host": "' + socket.gethostname() + '"', '"host": "<HOST>"')
    text = re.sub(r'"data_age_seconds": [0-9.e+]+', '"data_age_seconds": "<AGE>"', text)
    return re.sub(r"newest sample [^)\"]*? old", "newest sample <AGE> old", text)


def scenarios(make_env, kube_api):
    """(name, env, args): run in this order (later runs see what earlier ones changed)."""
    limited = make_env(rate="{max_changes: 1, window: 1h}")
    yield "applied", limited, (*SET, "databricks=70", "internal=30", "--reason", "one", "--yes", "-o", "json")
    yield "refused-json", limited, (*SET, "databricks=60", "internal=40", "--reason", "two", "--yes", "-o", "json")
    yield "refused-table", limited, (*SET, "databricks=60", "internal=40", "--reason", "two", "--yes")
    yield "bounds", limited, (*SET, "databricks=60", "internal=30", "--reason", "x", "--yes", "-o", "json")
    yield "no-reason", limited, (*SET, "databricks=60", "internal=40", "--yes", "-o", "json")
    yield "unchanged", limited, (*SET, "databricks=70", "internal=30", "--reason", "same", "--yes", "-o", "json")
    yield "dry-run-refused", limited, (*SET, "databricks=50", "internal=50", "--dry-run", "-o", "json")
    yield "history-table", limited, ("traffic", "history")
    yield "attempts-table", limited, ("traffic", "history", "--attempts")
    yield "attempts-json", limited, ("traffic", "history", "--attempts", "--limit", "3", "-o", "json")
    small = make_env(capacity=CAP5)
    failover = ("traffic", "failover", "--from", "databricks", "--incident", "INC-3", "--yes")
    yield "partial-json", small, (*failover, "-o", "json")
    yield "nothing-fits-json", small, (*failover, "-o", "json")
    yield "nothing-fits-table", small, failover
    yield "failover-history-table", small, ("traffic", "history", "--incident", "INC-3")
    yield "failover-history-json", small, ("traffic", "history", "-o", "json")
    yield "failover-attempts-applied", small, ("traffic", "history", "--attempts", "--applied")
    yield "status-after-failover", small, ("traffic", "status")
    ramping = make_env(capacity=CAP5)
    ramp = ("traffic", "ramp", "--step", "10", "--interval", "0s", "--reason", "r", "--yes")
    yield "ramp-aborted-json", ramping, (*ramp, "internal=60", "-o", "json")
    yield "ramp-aborted-table", ramping, (*ramp, "internal=60")
    yield "ramp-completed-json", ramping, (*ramp, "internal=40", "-o", "json")
    yield "ramp-dry-run", ramping, ("traffic", "ramp", "internal=30", "--step", "10", "--dry-run", "-o", "json")
    yield "restore-unknown", ramping, ("traffic", "restore", "--incident", "INC-9", "--yes", "-o", "json")
    seed_configmap(kube_api)
    kube_api.inject_conflicts("", "configmaps", NS, "grammar-split", 10)
    racing = kube_env(make_env, kube_api, actuator="configmap", attempts=3)
    yield "conflict-json", racing, (*SET, "databricks=70", "internal=30", "--reason", "tuning", "--yes", "-o", "json")


@pytest.mark.slow  # 16 CLI runs in process, ~15 s on this shared machine
def test_every_document_exit_code_and_message_is_as_before(make_env, kube_api):
    seen = {}
    for name, env, args in scenarios(make_env, kube_api):
        result = env.run(*args)
        seen[name] = {"exit": result.exit_code, "stdout": normalised(result.stdout, env.root),
                      "stderr": normalised(result.stderr, env.root)}
    if os.environ.get("OPSCTL_PIN_WRITE"):
        PINNED.write_text(json.dumps(seen, indent=1) + "\n")
        pytest.fail("wrote result_documents.json: check its diff, then run again without OPSCTL_PIN_WRITE")
    pinned = json.loads(PINNED.read_text())
    assert list(seen) == list(pinned)
    for name, was in pinned.items():
        assert seen[name] == was, name


def test_the_pinned_exit_codes_are_the_documented_ones():
    """Read independently of the run: what each case must exit with (0 ok, 2 usage, 3 unknown, 4 refused, 5 conflict)."""
    pinned = json.loads(PINNED.read_text())
    assert {n: c["exit"] for n, c in pinned.items()} == {
        "applied": 0, "refused-json": 4, "refused-table": 4, "bounds": 2, "no-reason": 2, "unchanged": 0,
        "dry-run-refused": 4, "history-table": 0, "attempts-table": 0, "attempts-json": 0, "partial-json": 4, "nothing-fits-json": 4, "nothing-fits-table": 4,
        "failover-history-table": 0, "failover-history-json": 0, "failover-attempts-applied": 0,
        "status-after-failover": 0,
        "ramp-aborted-json": 4, "ramp-aborted-table": 4, "ramp-completed-json": 0, "ramp-dry-run": 0,
        "restore-unknown": 3, "conflict-json": 5}
    assert json.loads(pinned["refused-json"]["stdout"])["outcome"] == "refused"
    assert json.loads(pinned["conflict-json"]["stdout"])["outcome"] == "conflict"
    assert json.loads(pinned["ramp-aborted-json"]["stdout"])["status"] == "aborted"
    assert json.loads(pinned["partial-json"]["stdout"])["partial"]["not_moved"] == 60


# -- `traffic status`, pinned before it was typed (#26 item 1): every JSON variant and its table ------

STATUS_PINNED = Path(__file__).with_name("status_documents.json")
VENDOR = ("capacity:\n  backend: internal\n  source: static\n  replicas: 20\n  rps_per_replica: 100\n"
          "  headroom: 0.25\n  max_replicas: 20\n  vendors:\n    databricks: {}\n")
FREEZES = ('freezes:\n  - {name: launch, timezone: Europe/Berlin, start: "2020-01-01T08:00", end: "2099-01-01T20:00",'
           ' reason: launch}\n  - {name: later, timezone: America/New_York, start: "2099-06-01T00:00",'
           ' end: "2099-06-03T00:00"}\n')
NEXT_FREEZE = 'freezes:\n  - {name: later, timezone: America/New_York, start: "2099-06-01T00:00", end: "2099-06-03T00:00"}\n'


def status_normalised(text: str, root: Path) -> str:
    text = normalised(text, root)
    # urllib3's own retry warnings (the kubernetes client's logger): how many depends on the process's
    # earlier runs, not on opsctl
    text = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("Retrying (Retry("))
    text = re.sub(r'"(heartbeat|until)": [0-9.]+', r'"\1": "<TS>"', text)
    text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<PORT>", text)
    text = re.sub(r"port=\d+", "port=<PORT>", text)
    return re.sub(r"pid \d+", "pid <PID>", text)


def status_scenarios(make_env, kube_api, closed_port):
    """(name, env, setup): `traffic status` is run in json and as a table after each setup."""
    yield "plain", make_env(freezes=NEXT_FREEZE), None
    yield "no-metrics", make_env(metrics=False), None  # the capacity reading fails: said in `error`
    yield "no-capacity", make_env(capacity=""), None
    yield "capacity-error", make_env(  # the Deployment is not there: the reading fails, said in `error`
        capacity=kube_capacity(max_replicas=4), extra_traffic=f'kubernetes: {{host: "{kube_api.url}", namespace: {NS}}}\n'), None
    yield "vendor", make_env(capacity=VENDOR.format("{requests_per_second: 1000, headroom: 0.2}")), None
    yield "vendor-tokens", make_env(capacity=VENDOR.format("{tokens_per_second: 300000, headroom: 0.2}")), None
    yield "vendor-no-data", make_env(capacity=VENDOR.format(
        '{query: "sum(rate(nothing_total[300s]))", unit: requests, headroom: 0}')), None
    yield "vendor-error", make_env(capacity=VENDOR.format('{query: "sum(rate(", unit: requests, headroom: 0}')), None
    frozen = make_env(freezes=FREEZES)
    yield "freeze", frozen, ("traffic", "set", "databricks=70", "internal=30", "--emergency", "--incident", "INC-1",
                             "--reason", "hot fix", "--yes")
    failed = make_env()
    yield "failover", failed, ("traffic", "failover", "--from", "databricks", "--incident", "INC-2", "--reason",
                               "vendor 5xx", "--yes")
    yield "shadow-file", make_env(actuator="flagd", extra_traffic="shadow_actuator: file\n"), None
    yield "shadow-unreachable", make_env(actuator="flagd", extra_traffic=(
        f'shadow_actuator: istio\nkubernetes: {{host: "http://127.0.0.1:{closed_port}", namespace: {NS}, timeout: 2}}\n'
        "istio: {name: llm, route: primary}\ndestinations:\n  internal: {host: vllm.llm.svc.cluster.local, port: 8000}\n"
        "  databricks: {host: databricks-egress.llm.svc.cluster.local, port: 443}\n")), None
    unknown = make_env()  # nothing stored and no default split: exit 3
    unknown.config.write_text(unknown.config.read_text().replace("  default_split: {databricks: 80, internal: 20}\n", ""))
    yield "unknown", unknown, None
    corrupt = make_env()
    corrupt.split_file.parent.mkdir(parents=True)
    corrupt.split_file.write_text("{not json")
    yield "corrupt", corrupt, None


def _status(env, seen: dict, name: str) -> None:
    for suffix, args in (("json", ("-o", "json")), ("table", ())):
        result = env.run("traffic", "status", *args)
        seen[f"{name}-{suffix}"] = {"exit": result.exit_code, "stdout": status_normalised(result.stdout, env.root),
                                    "stderr": status_normalised(result.stderr, env.root)}


@pytest.mark.slow  # about 30 CLI runs in process and one ramp in a child process
def test_every_status_document_and_table_is_as_before(make_env, kube_api):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]  # closed again: nothing listens there
    seen: dict = {}
    for name, env, setup in status_scenarios(make_env, kube_api, closed_port):
        if setup is not None:
            assert env.run(*setup).exit_code in (0, 4)
        _status(env, seen, name)
    ramping = make_env()
    proc = ramping.popen("traffic", "ramp", "internal=60", "--step", "10", "--interval", "60s", "--reason", "rollout",
                         "--yes")
    try:
        ramping.wait_for(lambda: (ramping.ramp_state() or {}).get("done") == 1 and (ramping.ramp_state() or {}).get("soak"),
                         what="the ramp's first step and its soak")
        _status(ramping, seen, "ramp-running")
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    _status(ramping, seen, "ramp-interrupted")
    if os.environ.get("OPSCTL_PIN_WRITE"):
        STATUS_PINNED.write_text(json.dumps(seen, indent=1) + "\n")
        pytest.fail("wrote status_documents.json: check its diff, then run again without OPSCTL_PIN_WRITE")
    pinned = json.loads(STATUS_PINNED.read_text())
    assert list(seen) == list(pinned)
    for name, was in pinned.items():
        assert seen[name] == was, name
