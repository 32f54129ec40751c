"""`slo alerts` on a real Prometheus reads the 1d and 3d windows from the generated rules' recorded
base-window increases when they span those windows, as the rules themselves do, says so, and falls
back to raw queries (the identity the rules rest on), saying why, where they are missing.

The servers are test_report_recorded's (tests/slo/conftest.py): the same raw data, one with the recorded increases
backfilled by `promtool tsdb create-blocks-from rules`. Expected burn rates are computed here from
the generated traffic (recorded: Prometheus' increase() at the backfill's evaluation instants;
raw: the window's counts at the last five evaluation instants)."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import REPO, write_config
from tests.slo.test_report_recorded import AT, END, SLOS, counts, eval_instants, recorded_ratio

WINDOWS = {"1d": 86400, "3d": 259200}
GOAL = {(doc := yaml.safe_load((REPO / "slos" / f"{n}.yaml").read_text()))["metadata"]["name"]: doc["spec"]["goal"]
        for n in SLOS}


def alerts(opsctl, tmp_path, url, period="28d"):
    cfg = write_config(tmp_path)
    cfg.write_text(cfg.read_text().replace("period: 28d", f"period: {period}"))
    files = [str(REPO / "slos" / f"{n}.yaml") for n in SLOS]
    result = opsctl("--config", str(cfg), "slo", "alerts", *files, "--prometheus-url", url, "--at", AT, "-o", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def raw_identity_ratio(name, window, at=END, interval=60, per_base=5):
    """The window's good and valid counts at at, at - 1m, ... at - 4m, summed, good over valid."""
    ts, good, valid = counts(name)
    g = v = 0.0
    for j in range(per_base):
        t = at - j * interval
        mask = (ts > t - window) & (ts <= t)
        g, v = g + good[mask].sum(), v + valid[mask].sum()
    return 1 - g / v


def long_window_alerts(doc):
    return [a for a in doc["firing"] if a["long_window"] in WINDOWS]


@pytest.mark.prometheus
@pytest.mark.slow
def test_alerts_read_1d_and_3d_from_the_recorded_series_and_say_so(opsctl, tmp_path, servers):
    _, recorded = servers
    doc = alerts(opsctl, tmp_path, recorded.url)
    assert {e["slo"]: e["from"] for e in doc["long_windows"]} == {f"llm-inference-{n}": "recorded" for n in SLOS}, \
        doc["long_windows"]
    assert any(n.startswith("1d and 3d windows from the recorded increases for 2 SLO(s)") for n in doc["notes"])
    fired = long_window_alerts(doc)
    # The internal incident (3% errors for 1,000 s) burns the 99.99% budget past both tickets' factors.
    assert {(a["slo"], a["long_window"]) for a in fired} >= {
        ("llm-inference-internal-availability", "1d"), ("llm-inference-internal-availability", "3d")}
    for a in fired:
        instants = eval_instants(recorded.url, a["slo"])
        goal = GOAL[a["slo"]]
        expected = recorded_ratio(a["slo"], WINDOWS[a["long_window"]], instants) / (1 - goal)
        assert a["burn_rate"] == pytest.approx(expected, rel=1e-9), a


@pytest.mark.prometheus
@pytest.mark.slow
def test_without_recorded_series_alerts_use_raw_queries_and_say_why(opsctl, tmp_path, servers):
    raw, _ = servers
    doc = alerts(opsctl, tmp_path, raw.url)
    for entry in doc["long_windows"]:
        assert entry["from"] == "raw"
        assert "no recorded slo:sli_valid:increase5m series" in entry["why"]
    assert len(doc["long_windows"]) == len(SLOS)
    assert sorted(n for n in doc["notes"] if " from raw queries for " in n) == sorted(
        f"1d and 3d windows from raw queries for {e['slo']}: {e['why']}" for e in doc["long_windows"])
    fired = long_window_alerts(doc)
    assert {(a["slo"], a["long_window"]) for a in fired} >= {
        ("llm-inference-internal-availability", "1d"), ("llm-inference-internal-availability", "3d")}
    for a in fired:
        goal = GOAL[a["slo"]]
        expected = raw_identity_ratio(a["slo"], WINDOWS[a["long_window"]]) / (1 - goal)
        assert a["burn_rate"] == pytest.approx(expected, rel=1e-9), a


@pytest.mark.prometheus
@pytest.mark.slow
def test_a_seven_day_slos_notes_name_its_own_derived_windows(opsctl, tmp_path, servers):
    """A 7-day period scales the 28-day table's 1d and 3d long windows by 7/28: 6h and 18h, and the
    notes name those (they said "1d and 3d" whatever the period)."""
    raw, _ = servers
    doc = alerts(opsctl, tmp_path, raw.url, period="7d")
    scaled = [f"{int(WINDOWS[w] * 7 / 28 // 3600)}h" for w in ("1d", "3d")]
    assert scaled == ["6h", "18h"]
    assert len(doc["long_windows"]) == len(SLOS)
    raw_notes = [n for n in doc["notes"] if " from raw queries for " in n]
    assert sorted(raw_notes) == sorted(f"{scaled[0]} and {scaled[1]} windows from raw queries for {e['slo']}: {e['why']}"
                                       for e in doc["long_windows"])
    assert not any("1d" in n or "3d" in n for n in doc["notes"])
