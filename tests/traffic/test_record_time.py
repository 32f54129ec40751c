"""One time base for the change record (issue 22, item 5): with a Kubernetes actuator the record's
times and the rate window are the API server's (the `Date` of its answers), so a laptop whose clock
runs 2 h ahead (the documented OPSCTL_CLOCK_OFFSET hook) can neither see the team's recent changes
as old nor push the rate limit past its bound."""

from __future__ import annotations

import json
import textwrap
import time

from tests.traffic.test_kubernetes import NS, seed_configmap

AHEAD = {"OPSCTL_CLOCK_OFFSET": "7200"}  # this laptop's clock: 2 h ahead of everyone else's


def configmap_env(make_env, api, *, rate: str):
    extra = textwrap.dedent(f"""\
        kubernetes: {{host: "{api.url}", namespace: {NS}, timeout: 5}}
        configmap: {{name: grammar-split, key: split.json}}
        """)
    return make_env(actuator="configmap", extra_traffic=extra, rate=rate)


def stored_record(api) -> dict:
    cm = api.get("", "configmaps", NS, "grammar-split")
    return json.loads(cm["metadata"]["annotations"]["opsctl.io/traffic-record"])


def test_a_laptop_clock_two_hours_ahead_cannot_raise_the_rate_limit(make_env, kube_api):
    seed_configmap(kube_api)
    env = configmap_env(make_env, kube_api, rate="{max_changes: 6, window: 1h}")
    for i in range(3):  # the team, on correct clocks
        result = env.run("traffic", "set", f"internal={21 + i}", f"databricks={79 - i}", "--reason", f"t{i}", "--yes")
        assert result.exit_code == 0, result.output
    for i in range(3):  # the laptop 2 h ahead: still inside the same hour for the rate window
        result = env.run("traffic", "set", f"internal={31 + i}", f"databricks={69 - i}", "--reason", f"l{i}", "--yes",
                         env=AHEAD)
        assert result.exit_code == 0, result.output
    refused = env.run("traffic", "set", "internal=40", "databricks=60", "--reason", "one more", "--yes", env=AHEAD)
    assert refused.exit_code == 4, refused.output
    assert "rate limit reached: 6 traffic changes in the last 1h (max 6)" in refused.stderr
    again = env.run("traffic", "set", "internal=40", "databricks=60", "--reason", "one more", "--yes")
    assert again.exit_code == 4, again.output

    record = stored_record(kube_api)
    assert len(record["changes"]) == 6 and len(record["operations"]) == 6
    # Every entry carries the API server's time (the fake runs on this host's real clock), the
    # laptop's included: none is two hours in the future.
    now = time.time()
    assert all(abs(c["ts"] - now) < 120 for c in record["changes"]), [c["ts"] - now for c in record["changes"]]
