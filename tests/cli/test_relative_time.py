"""`--at` (and every TIME option) takes relative times, `now`, `now-7d`, `-7d`, `now-1h30m`, beside
RFC 3339 with a zone: one parser, opsctl/cli/params.py (issue 35 item 3, docs/decisions/0402-one-instant.md)."""

from __future__ import annotations

import calendar
import json
import time

import pytest

from opsctl.cli.params import parse_time
from tests.conftest import run_opsctl, write_config

NOW = float(calendar.timegm((2026, 11, 26, 15, 0, 0)))


@pytest.mark.parametrize("text, seconds_before", [
    ("now", 0), ("now-7d", 7 * 86400), ("-7d", 7 * 86400), ("now-1h30m", 3600 + 1800), ("now-2w", 14 * 86400),
    ("NOW-90s", 90), (" now - 1h ", 3600)])
def test_a_relative_time_is_that_long_before_now(text, seconds_before):
    assert parse_time(text, now=NOW) == NOW - seconds_before


def test_rfc3339_with_a_zone_still_works_and_without_one_is_still_refused():
    assert parse_time("2026-11-26T10:00:00-05:00", now=0) == NOW
    with pytest.raises(ValueError, match="has no time zone"):
        parse_time("2026-11-26T15:00:00", now=NOW)


@pytest.mark.parametrize("text", ["yesterday", "now-", "now-7x", "-", "now+1h", "7d", "1w ago"])
def test_anything_else_is_refused_naming_the_forms(text):
    with pytest.raises(ValueError) as caught:
        parse_time(text, now=NOW)
    assert "now-7d" in str(caught.value) and "-7d" in str(caught.value)


def test_the_cli_reads_minus_7d_and_says_the_forms_in_its_help(tmp_path):
    cfg = write_config(tmp_path)
    before = time.time()
    result = run_opsctl("--config", cfg, "sim", "generate", "--days", "0.01", "--end", "-7d", "--dry-run", "-o", "json")
    after = time.time()
    assert result.exit_code == 0, result.output
    end = calendar.timegm(time.strptime(json.loads(result.stdout)["end"], "%Y-%m-%dT%H:%M:%SZ"))
    # --end rounds down to 10 s: within [before - 7d - 10 s, after - 7d]
    assert before - 7 * 86400 - 10 <= end <= after - 7 * 86400
    bad = run_opsctl("--config", cfg, "slo", "report", "--at", "last week")
    assert bad.exit_code == 2 and "now-7d" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    for command in (("slo", "report"), ("slo", "alerts"), ("freeze", "status"), ("sim", "generate")):
        text = " ".join(run_opsctl(*command, "--help").stdout.split())
        assert "now-7d, -7d, now-1h30m" in text, command
