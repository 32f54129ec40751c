"""An SLO whose latency selector writes `le="2"` where the bucket is labelled `2.0` (issue 35's 3 a.m.
snag): the report still says UNKNOWN (exit 3: no data is never healthy) and names the label that
has data, in one line with the fix; a bound with no bucket at all gets no such hint."""

from __future__ import annotations

import json

from tests.conftest import REPO, run_opsctl, write_config


def _catalog(tmp_path, le: str):
    slos = tmp_path / "slos"
    slos.mkdir(parents=True, exist_ok=True)
    text = (REPO / "slos" / "service-latency-1s.yaml").read_text()
    written = 'le=~"1|1\\\\.0*"'
    assert written in text  # the shipped selector, replaced by the one under test
    (slos / "latency.yaml").write_text(text.replace(written, f'le="{le}"'))
    cfg = write_config(tmp_path, slo_dir=slos)
    generated = run_opsctl("--config", cfg, "sim", "generate", "--days", "1", "--peak-rps", "50")
    assert generated.exit_code == 0, generated.output
    return cfg, slos / "latency.yaml"


def test_le_2_names_the_2_0_bucket_and_the_fix(tmp_path):
    cfg, file = _catalog(tmp_path, "2")
    result = run_opsctl("--config", cfg, "slo", "report")
    assert result.exit_code == 3, result.output
    hint = (f'note: llm-inference-service-latency-1s: filter_good: le="2" matches no bucket, but the bucket is'
            f' labelled le="2.0": write le="2.0" (or le=~"2|2\\.0") in {file}')
    assert hint in result.stdout.splitlines(), result.stdout
    [row] = json.loads(run_opsctl("--config", cfg, "slo", "report", "-o", "json").stdout)
    assert hint.removeprefix("note: ") in row["notes"] and row["status"] == "unknown"


def test_the_right_label_reports_and_a_missing_bound_gets_no_hint(tmp_path):
    cfg, _ = _catalog(tmp_path / "right", "2.0")
    result = run_opsctl("--config", cfg, "slo", "report")
    assert result.exit_code != 3, result.output
    assert "matches no bucket" not in result.stdout
    cfg, _ = _catalog(tmp_path / "none", "3")  # no bucket bound at 3 s: nothing numerically equal either
    result = run_opsctl("--config", cfg, "slo", "report")
    assert result.exit_code == 3 and "matches no bucket" not in result.stdout
