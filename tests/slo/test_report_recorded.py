"""`slo report` on a Prometheus holding the generated rules' recorded series takes 1d, 3d and the
period from them (a few thousand samples per SLO instead of every raw sample of every series),
says so, and falls back to raw queries, saying why, where they are missing.

The recorded history is made the way an operator backfills it: `promtool tsdb create-blocks-from
rules` evaluates the generated base-window rules over the raw data of a running Prometheus."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import REPO, write_config
from tests.slo import data as d

END = 1_795_000_020  # on the minute grid
STEPS = 2 * 8640  # two days
START = END - STEPS * 10  # the explicit zero sample before the first step
AT = "2026-11-18T11:07:00Z"
SLOS = ("internal-availability", "service-latency-500ms")


def scenario():
    internal = d.make_traffic(END, STEPS, 2000, error_share=0.0005, incidents=[(STEPS - 300, STEPS - 200, 0.03)])
    internal.server_errors[::7] += 3  # uneven minute to minute, so the recorded edges show
    return {"internal": internal,
            "databricks": d.make_traffic(END, STEPS, 8000, slow=[(STEPS - 9000, STEPS - 8500)])}


def report(opsctl, tmp_path, url):
    cfg = write_config(tmp_path)
    files = [str(REPO / "slos" / f"{n}.yaml") for n in SLOS]
    result = opsctl("--config", str(cfg), "slo", "report", *files, "--prometheus-url", url, "--at", AT, "-o", "json")
    assert result.exit_code in (0, 1), result.output
    return {r["name"]: r for r in json.loads(result.stdout)}


def counts(name):
    t = scenario()
    if name == "llm-inference-internal-availability":
        tr = t["internal"]
        return tr.ts, tr.requests - tr.server_errors, tr.requests
    ts = t["internal"].ts
    return ts, t["internal"].le[4] + t["databricks"].le[4], t["internal"].requests + t["databricks"].requests


def eval_instants(url, name):
    """When the backfill evaluated the rules (Prometheus offsets each group's evaluations by a hash
    of its name, off the 10 s sample grid): the timestamps of the recorded samples, read from the
    server. Only the instants come from there; the increases below are computed from the raw data."""
    import urllib.parse
    import urllib.request

    query = f'slo:sli_valid:increase5m{{slo="{name}"}}[{29 * 86400}s]'
    body = urllib.parse.urlencode({"query": query, "time": END}).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query", data=body, timeout=30) as response:
        [series] = json.loads(response.read())["data"]["result"]
    return [float(t) for t, _ in series["values"]]


def series(name):
    """(good series, valid series) of an SLO, each (times, cumulative values) as exposed."""
    t = scenario()

    def cum(tr, per_step):
        return np.concatenate([[tr.ts[0] - 10], tr.ts]).astype(float), np.concatenate([[0], np.cumsum(per_step)]).astype(float)

    if name == "llm-inference-internal-availability":
        i = t["internal"]
        return [cum(i, i.requests - i.server_errors)], [cum(i, i.requests - i.server_errors), cum(i, i.server_errors)]
    return [cum(b, b.le[4]) for b in t.values()], [cum(b, b.requests) for b in t.values()]


def prom_increase(times, values, at, rng=300.0):
    """increase(x[5m]) at `at` as Prometheus 2.42 documents and computes it: the samples in
    [at - 5m, at], their difference extrapolated toward the range's edges (up to 1.1 sample
    intervals, a counter no further than to zero)."""
    sel = (times >= at - rng) & (times <= at)
    t, v = times[sel], values[sel]
    if len(t) < 2:
        return None
    result, sampled = v[-1] - v[0], t[-1] - t[0]
    average = sampled / (len(t) - 1)
    to_start, to_end = t[0] - (at - rng), at - t[-1]
    if result > 0 and v[0] >= 0:
        to_start = min(to_start, sampled * (v[0] / result))
    threshold = average * 1.1
    extrapolated = sampled + (to_start if to_start < threshold else average / 2) \
        + (to_end if to_end < threshold else average / 2)
    return result * (extrapolated / sampled)


def recorded_ratio(name, window, instants, at=END, newest_edge=False):
    """Independently: the recorded 5m increases (good: `or vector(0)`) at the evaluation instants
    in [at - window + 1 s, at], summed, good over valid. `newest_edge`: the report's correction of
    a window the data (2 days) are younger than, the raw increases over the newest 1, 2, 3 and 4
    minutes at `at` added to the sums (each event of the newest j-th minute is recorded 5 - j
    times, not 5)."""
    goods, valids = series(name)
    g = v = 0.0
    if newest_edge:
        for j in range(1, 5):
            g += sum(x for x in (prom_increase(*sg, at, 60.0 * j) for sg in goods) if x is not None)
            v += sum(x for x in (prom_increase(*sv, at, 60.0 * j) for sv in valids) if x is not None)
    for s in instants:
        if s < at - window + 1 or s > at:
            continue
        valid = [x for x in (prom_increase(*sv, s) for sv in valids) if x is not None]
        if not valid:
            continue
        g += sum(x for x in (prom_increase(*sg, s) for sg in goods) if x is not None)
        v += sum(valid)
    return 1 - g / v


def raw_ratio(name, window, at=END):
    ts, good, valid = counts(name)
    mask = (ts > at - window) & (ts <= at)
    return 1 - good[mask].sum() / valid[mask].sum()


@pytest.mark.prometheus
@pytest.mark.slow
def test_long_windows_come_from_the_recorded_series_and_say_so(opsctl, tmp_path, servers):
    _, recorded = servers
    rows = report(opsctl, tmp_path, recorded.url)
    for name, row in rows.items():
        instants = eval_instants(recorded.url, name)
        assert row["long_windows"] == "recorded", row
        assert any(n.startswith("recorded: 1d, 3d and the period from the recorded") for n in row["notes"])
        goal = row["goal"]
        # 2 days of data: 3d and the period are younger-data windows, corrected at their newest edge.
        for window, seconds in (("1d", 86400), ("3d", 259200)):
            want = recorded_ratio(name, seconds, instants, newest_edge=window == "3d")
            assert row["burn_rate"][window] == pytest.approx(want / (1 - goal), rel=1e-9)
        assert row["sli"] == pytest.approx(1 - recorded_ratio(name, 28 * 86400, instants, newest_edge=True), rel=1e-12)
        # Short windows stay raw.
        assert row["burn_rate"]["1h"] == pytest.approx(raw_ratio(name, 3600) / (1 - goal), rel=1e-9)


@pytest.mark.prometheus
@pytest.mark.slow
def test_without_recorded_series_the_report_falls_back_to_raw_and_says_why(opsctl, tmp_path, servers):
    raw, _ = servers
    rows = report(opsctl, tmp_path, raw.url)
    for name, row in rows.items():
        assert row["long_windows"] == "raw"
        assert any("no recorded slo:sli_valid:increase5m series" in n for n in row["notes"])
        assert row["sli"] == pytest.approx(1 - raw_ratio(name, 28 * 86400), rel=1e-9)


@pytest.mark.prometheus
@pytest.mark.slow
def test_recorded_and_raw_period_sli_differ_only_at_the_window_edges(opsctl, tmp_path, servers):
    raw, recorded = servers
    a, b = report(opsctl, tmp_path, raw.url), report(opsctl, tmp_path, recorded.url)
    for name in a:
        # Edges weigh up to 4 of 5 copies of the newest minutes' steps less: a small, bounded gap.
        gap = abs(a[name]["sli"] - b[name]["sli"])
        instants = eval_instants(recorded.url, name)
        # The recorded period (corrected at its newest edge: the data are younger) differs from the
        # raw one by the edge effect computed independently, to the float noise of two SLIs near 1
        # figured from ~1e9 events each (1e-13).
        edge = abs(recorded_ratio(name, 28 * 86400, instants, newest_edge=True) - raw_ratio(name, 28 * 86400))
        assert gap == pytest.approx(edge, abs=1e-13)
        assert gap < 1e-4, (name, gap)
    assert np.isfinite([r["sli"] for r in b.values()]).all()
