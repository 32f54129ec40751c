"""Every PromQL expression a runbook shows parses in Prometheus (`promtool check rules`)."""

from __future__ import annotations

import subprocess

import yaml

from tests.conftest import REPO, require_binary
from tests.runbooks.conftest import fenced_blocks


def test_every_promql_block_parses_with_promtool(tmp_path):
    promtool = require_binary("promtool")
    exprs = {}
    for path in sorted((REPO / "runbooks").glob("*.md")):
        for lang, lines in fenced_blocks(path.read_text()):
            if lang == "promql":
                for line in lines:
                    if line.strip() and not line.lstrip().startswith("#"):
                        exprs.setdefault(line.strip(), path.name)
    assert len(exprs) >= 20
    rules = [{"record": f"runbook:expr_{i}:check", "expr": e} for i, e in enumerate(exprs)]
    rule_file = tmp_path / "runbook-promql.yaml"
    rule_file.write_text(yaml.safe_dump({"groups": [{"name": "runbooks", "rules": rules}]}, sort_keys=False))
    check = subprocess.run([promtool, "check", "rules", str(rule_file)], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(rules)} rules found" in check.stdout
