"""The recorded-series servers shared by test_report_recorded and test_alerts_recorded: built once
per session, since each needs a minute for Prometheus to merge the backfilled blocks."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from tests.conftest import REPO, PrometheusServer, backfill_openmetrics, require_binary, run_opsctl, write_config
from tests.slo import data as d
from tests.slo.test_report_recorded import END, SLOS, START, eval_instants, scenario


@pytest.fixture(scope="session")
def servers(tmp_path_factory):
    """(raw-only Prometheus, Prometheus with the recorded base increases backfilled), same raw data.

    Both data dirs are filled from staged blocks before their server starts (never copied from a
    running server, which may be compacting), and the recorded one is used only once its
    overlapping raw and rule blocks are merged."""
    promtool = require_binary("promtool")
    work = tmp_path_factory.mktemp("recorded")
    om = work / "traffic.om"
    om.write_text(d.openmetrics(scenario()))
    staged = work / "raw-blocks"
    staged.mkdir()
    backfill_openmetrics(om, staged, promtool=promtool)
    raw_dir, rec_dir = work / "raw", work / "rec"
    shutil.copytree(staged, raw_dir / "prom-data")
    raw = PrometheusServer(raw_dir)
    # The generated rules' base-window records, as `opsctl slo rules` writes them.
    cfg = write_config(work)
    rules = work / "rules.yaml"
    files = [str(REPO / "slos" / f"{n}.yaml") for n in SLOS]
    out = run_opsctl("--config", str(cfg), "slo", "rules", *files, "--out", str(rules), cwd=REPO)
    assert out.exit_code == 0, out.stderr
    groups = yaml.safe_load(rules.read_text())["groups"]
    base = [{"name": g["name"], "rules": [r for r in g["rules"] if r.get("record", "").endswith(":increase5m")]}
            for g in groups if not g["name"].endswith("-period")]
    base_file = work / "base-rules.yaml"
    base_file.write_text(yaml.safe_dump({"groups": base}, sort_keys=False))
    blocks = work / "rule-blocks"
    # The rule file is named relative to `work`: Prometheus offsets a group's evaluations by a hash
    # of its name and its file as given, and promtool 2.42 skips the evaluation that falls in the
    # last second before each 2 h block it writes. Under the session's tmp path (pytest-N/popen-gwK,
    # new each run) the offset landed there about one run in 30, and the latency SLO's recorded
    # series lost 24 samples, read as too short for 3d (raw). A fixed name is one fixed offset.
    backfill = subprocess.run([promtool, "tsdb", "create-blocks-from", "rules", f"--start={START}", f"--end={END}",
                               f"--url={raw.url}", f"--output-dir={blocks}", "--eval-interval=60s", base_file.name],
                              capture_output=True, text=True, timeout=900, cwd=work)
    assert backfill.returncode == 0, backfill.stdout + backfill.stderr
    shutil.copytree(staged, rec_dir / "prom-data")
    for block in blocks.iterdir():
        shutil.copytree(block, rec_dir / "prom-data" / block.name)
    recorded = PrometheusServer(rec_dir)
    recorded.wait_compacted()
    for name in SLOS:
        gaps = evaluation_gaps(recorded.url, f"llm-inference-{name}")
        assert not gaps, f"the backfill skipped evaluations of {name}'s rules (promtool's block edges): {gaps[:5]}"
    yield raw, recorded
    raw.stop()
    recorded.stop()


def evaluation_gaps(url: str, slo: str, interval: float = 60.0) -> list[tuple[float, float]]:
    """Consecutive recorded instants of an SLO's valid increases further apart than the rules'
    evaluation interval (the backfill evaluates every minute from start to end: none)."""
    instants = eval_instants(url, slo)
    return [(a, b) for a, b in zip(instants, instants[1:]) if b - a > interval + 0.5]
