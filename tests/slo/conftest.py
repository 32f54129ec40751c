"""The recorded-series servers shared by test_report_recorded and test_alerts_recorded: built once
per session, since each needs a minute for Prometheus to merge the backfilled blocks."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from tests.conftest import REPO, PrometheusServer, backfill_openmetrics, require_binary, run_opsctl, write_config
from tests.slo import data as d
from tests.slo.test_report_recorded import END, SLOS, START, scenario


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
    backfill = subprocess.run([promtool, "tsdb", "create-blocks-from", "rules", f"--start={START}", f"--end={END}",
                               f"--url={raw.url}", f"--output-dir={blocks}", "--eval-interval=60s", str(base_file)],
                              capture_output=True, text=True, timeout=900)
    assert backfill.returncode == 0, backfill.stdout + backfill.stderr
    shutil.copytree(staged, rec_dir / "prom-data")
    for block in blocks.iterdir():
        shutil.copytree(block, rec_dir / "prom-data" / block.name)
    recorded = PrometheusServer(rec_dir)
    recorded.wait_compacted()
    yield raw, recorded
    raw.stop()
    recorded.stop()
