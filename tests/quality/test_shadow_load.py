"""Shadow readiness' load check compares like with like: the mirror's mean rate over the window
against `--share` of the real traffic's mean rate over the same window, so a mirror carrying exactly
its share passes on a rising morning (where the last 5 minutes run above the window's average), and
one carrying half its share still fails. Expected rates are summed here from the steps written."""

from __future__ import annotations

import json

import pytest

from tests.quality.test_shadow import END, HEALTHY_LE, HOUR_STEPS, PER_STEP, PRIMARY_LE, STEPS, load, report

LAST_HOUR = range(STEPS - HOUR_STEPS, STEPS)  # the steps the default 1 h window covers


def rising(per_step, le):
    """Steps whose request count per 10 s step is per_step(i), rising through the morning."""
    ts = [END - (STEPS - 1 - i) * 10 for i in range(STEPS)]
    counts = [per_step(i) for i in range(STEPS)]
    cols = {"req_ok": counts, "req_server_error": [0] * STEPS, "req_timeout": [0] * STEPS,
            "req_client_error": [0] * STEPS, "lat_count": counts, "lat_sum": [n * 0.2 for n in counts]}
    for j, c in enumerate(le):
        cols[f"le_{j}"] = [c * n / PER_STEP for n in counts]
    return ts, cols


def real(i):
    return 10 * (50 + i)  # databricks: 500 requests a step at the start, 7 690 at the end


def test_mirror_carrying_its_share_on_a_rising_morning_is_ready(opsctl, tmp_path):
    cfg = load(tmp_path, databricks=rising(real, PRIMARY_LE), internal=rising(lambda i: real(i) // 10, HEALTHY_LE))
    result = report(opsctl, cfg, "--share", "0.1")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    source_rate = sum(real(i) for i in LAST_HOUR) / 3600  # 589.5 req/s
    shadow_rate = sum(real(i) // 10 for i in LAST_HOUR) / 3600  # 58.95 req/s
    assert data["source_rate"] == pytest.approx(source_rate)
    assert data["required_rate"] == pytest.approx(0.1 * source_rate)
    load_check = next(c for c in data["checks"] if c["name"] == "load")
    assert load_check["ok"] and load_check["shadow"] == pytest.approx(shadow_rate)
    assert load_check["limit"] == pytest.approx(0.9 * 0.1 * source_rate)
    # the morning is rising: against the last 5 minutes' rate the same mirror would have failed
    assert data["current_rate"] * 0.1 * 0.9 > shadow_rate


def test_mirror_carrying_half_its_share_on_a_rising_morning_is_not_ready(opsctl, tmp_path):
    cfg = load(tmp_path, databricks=rising(real, PRIMARY_LE), internal=rising(lambda i: real(i) // 20, HEALTHY_LE))
    result = report(opsctl, cfg, "--share", "0.1")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert [c["name"] for c in data["checks"] if not c["ok"]] == ["load"]
    load_check = next(c for c in data["checks"] if c["name"] == "load")
    assert load_check["shadow"] == pytest.approx(sum(real(i) // 20 for i in LAST_HOUR) / 3600)
    assert load_check["limit"] == pytest.approx(0.9 * 0.1 * sum(real(i) for i in LAST_HOUR) / 3600)
