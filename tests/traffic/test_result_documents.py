"""What the traffic commands print and exit with, pinned before the controller's results became
return values (#26 item 1): for the same inputs every `-o json` document, every table and error line
and every exit code stay as they were (applied, unchanged, dry run, refused by a guard, refused by
bounds, a flag refused before any attempt, lost to concurrent writers, a partial failover, a ramp
aborted by a refused step, a completed ramp), and the history and status that render them.

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
