"""One instant (issue 38 item 4, shape C): the budget guard evaluates the SLOs at now, never at the
embedded store's newest sample. The case of the issue: `sim generate --ahead 1d` leaves tomorrow's
clean data in the store while databricks' page alerts fire now; the guard used to read tomorrow and
let traffic back onto databricks."""

from __future__ import annotations

import json
import time

from tests.traffic.conftest import PER_STEP, d

DAY = 8640  # steps
OUTAGE_SHARE = 0.3  # databricks: 30% 5xx over the hour ending now, ~3000x a 99.99% budget


def ahead_of_now() -> dict:
    now = int(time.time()) // 10 * 10
    end = now + DAY * 10  # a day of data ahead of now, as `sim generate --ahead 1d` writes
    at_now = 2 * DAY - 1 - DAY  # the step ending at `now`
    return {
        "internal": d.make_traffic(end, 2 * DAY, PER_STEP["internal"]),
        "databricks": d.make_traffic(end, 2 * DAY, PER_STEP["databricks"],
                                     incidents=[(at_now - 359, at_now + 30, OUTAGE_SHARE)]),
    }


def test_with_data_ahead_the_budget_guard_reads_now_and_sees_databricks_burning(make_env):
    env = make_env(metrics=ahead_of_now())
    # The premise: page alerts fire on databricks now.
    alerts = env.run("slo", "alerts", "-o", "json")
    assert alerts.exit_code in (0, 1), alerts.output
    firing = json.loads(alerts.stdout)["firing"]
    pages = {a["slo"] for a in firing if a["severity"] == "page" and a["labels"].get("backend") == "databricks"}
    assert "llm-inference-databricks-availability" in pages, firing
    # Fail over to internal (moving away from the burning backend passes the budget guard) ...
    moved = env.run("traffic", "set", "internal=100", "databricks=0", "--reason", "failover", "--yes", "-o", "json")
    assert moved.exit_code == 0, moved.output
    # ... then ask to put 80% back on databricks: refused, naming the SLOs that burn now.
    back = env.run("traffic", "set", "internal=20", "databricks=80", "--reason", "restore", "--dry-run", "-o", "json")
    assert back.exit_code == 4, back.output
    budget = next(g for g in json.loads(back.stdout)["guards"] if g["name"] == "budget")
    assert not budget["ok"] and budget["details"]["slos"]["llm-inference-databricks-availability"] == "page"
    assert "llm-inference-databricks-availability burns at page level" in budget["message"], budget
