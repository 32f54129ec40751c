"""The recorded-series servers shared by test_report_recorded and test_alerts_recorded: built once
per session (two days of data backfilled, and the generated rules evaluated over them)."""

from __future__ import annotations

import re
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

    Both data dirs are filled before their server starts (never copied from a running server,
    which may be compacting). The recorded increases come from `promtool tsdb create-blocks-from
    rules` over the raw server, as an operator backfills them; its 2 h blocks overlap the raw block,
    and a Prometheus holding both merges them only at its first compaction, a minute after it
    starts, answering queries while it merges with a series missing (seen once in several CI runs).
    So the rule blocks' samples (read back with `promtool tsdb dump`, every value and millisecond
    as written) are backfilled together with the raw data into one block: the same samples, nothing
    to merge, no minute's wait."""
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
    (blocks / "wal").mkdir()  # `tsdb dump` opens the directory as a database, which has one
    dump = subprocess.run([promtool, "tsdb", "dump", str(blocks)], capture_output=True, text=True, timeout=300)
    assert dump.returncode == 0, dump.stderr
    recorded_lines = [_openmetrics_line(line) for line in dump.stdout.splitlines() if line]
    assert len(recorded_lines) == 2 * len(SLOS) * (END - START) // 60  # good and valid of each SLO every minute
    both = work / "raw-and-recorded.om"
    both.write_text(om.read_text().removesuffix("# EOF\n") + "\n".join(recorded_lines) + "\n# EOF\n")
    recorded = PrometheusServer(rec_dir, openmetrics=both)
    recorded.wait_compacted()  # nothing overlaps: returns at once
    yield raw, recorded
    raw.stop()
    recorded.stop()


_DUMPED = re.compile(r'^\{__name__="([^"]+)"(.*)\} (\S+) (-?\d+)$')


def _openmetrics_line(dumped: str) -> str:
    """A `promtool tsdb dump` line (`{__name__="m", a="b"} value ms`) as an OpenMetrics sample
    (`m{a="b"} value seconds`, to the millisecond)."""
    m = _DUMPED.match(dumped)
    assert m, dumped
    name, labels, value, ms = m.groups()
    labels = labels.lstrip(", ").replace('", ', '",')
    seconds = f"{int(ms) // 1000}.{int(ms) % 1000:03d}"
    return f"{name}{{{labels}}} {value} {seconds}" if labels else f"{name} {value} {seconds}"
