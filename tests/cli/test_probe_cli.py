"""`opsctl probe consistency` as a command: its options, help, output and exit codes, pinned
before its body moved into opsctl.quality.probe_run (issue 26 item 4), and what the body does in
order: flags checked, the push target opened, the backends probed `--repeat` times, pushed,
rendered. The expected texts were written out from the command as it was; latencies vary from
run to run and are masked."""

from __future__ import annotations

import json
import re

import pytest

from tests.quality.test_probe import N, SENSITIVE_IDS, golden_file, probe

# The help texts, as the command printed them before its body moved.
GROUP_HELP = """\
Usage: opsctl probe [OPTIONS] COMMAND [ARGS]...

  Probe the backends' OpenAI-compatible APIs with a golden set.

  Examples:
    opsctl probe consistency --golden golden.jsonl
    opsctl probe consistency --golden golden.jsonl --backend internal --backend databricks -o json
    opsctl probe consistency --golden golden.jsonl --push                # figures for an SLO / alert
    opsctl probe consistency --golden golden.jsonl --repeat 5            # noise floor: self-agreement
    opsctl probe consistency --golden golden.jsonl --push --push-to pushgateway \\
        --pushgateway-url http://pushgateway:9091

Options:
  -h, --help  Show this message and exit.

Commands:
  consistency  Send the golden prompts to each backend and compare the...
"""

OPTIONS = ["--golden", "--backend", "--repeat", "--push", "--push-to", "--pushgateway-url", "--dry-run",
           "-o, --output"]


@pytest.fixture
def broken():
    from tests.quality.test_probe import Backends

    with Backends(drop_bos=True) as b:
        yield b


@pytest.fixture
def healthy():
    from tests.quality.test_probe import Backends

    with Backends(drop_bos=False) as b:
        yield b


def masked(text: str) -> str:
    """Latencies as N ms, and the table's padding and rules (their widths follow the latencies) as one."""
    text = re.sub(r"\b\d+ ms\b", "N ms", text)
    return re.sub(r"-{2,}", "-", re.sub(r" {2,}", "  ", text))


def test_the_group_help_is_unchanged(opsctl):
    result = opsctl("probe", "--help")
    assert result.exit_code == 0
    assert result.stdout == GROUP_HELP


def test_the_command_help_keeps_every_option_and_the_exit_codes(opsctl):
    result = opsctl("probe", "consistency", "--help")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "Usage: opsctl probe consistency [OPTIONS]"
    for option in OPTIONS:
        assert any(line.lstrip().startswith(option) for line in lines), option
    text = " ".join(result.stdout.split())
    assert ("Exit 0 when every threshold holds, 1 when one does not (the figures are still pushed), 2 on bad"
            " input or refused credentials.") in text
    assert "--repeat INTEGER RANGE Send the golden set N times to each backend: its self-agreement is the noise" in text
    assert "[default: 1; 1<=x<=20]" in text


@pytest.mark.parametrize("flags", [["--dry-run"], ["--push-to", "embedded"], ["--pushgateway-url", "http://127.0.0.1:9"]])
def test_push_flags_without_push_exit_2_before_any_request(opsctl, tmp_path, healthy, flags):
    result = probe(opsctl, healthy.config(tmp_path), golden_file(tmp_path), *flags)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines()[-1] == "error: --push-to, --pushgateway-url and --dry-run go with --push"
    assert healthy.internal.requests == [] and healthy.vendor.requests == []


def test_an_unreachable_pushgateway_fails_after_the_probe_and_before_the_report(opsctl, tmp_path, healthy):
    from tests.conftest import free_port

    url = f"http://127.0.0.1:{free_port()}"
    result = probe(opsctl, healthy.config(tmp_path), golden_file(tmp_path), "--push", "--pushgateway-url", url)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"error: cannot push to {url}/metrics/job/opsctl_probe/service/llm-inference: ")
    assert "hint: check quality.push.pushgateway_url or --pushgateway-url" in result.stderr
    assert result.stdout == ""
    assert len(healthy.internal.requests) == N and len(healthy.vendor.requests) == N


def test_repeat_sends_the_golden_set_that_many_times_to_each_backend(opsctl, tmp_path, healthy):
    result = probe(opsctl, healthy.config(tmp_path), golden_file(tmp_path), "--repeat", "3", "-o", "json")
    assert result.exit_code == 0, result.output
    assert len(healthy.internal.requests) == 3 * N
    assert len(healthy.vendor.requests) == 3 * N
    data = json.loads(result.stdout)
    assert data["noise"]["repeat"] == 3
    assert set(data["noise"]["floors"]) == {"internal", "databricks"}


FAILING_TABLE = (
    "BACKEND     ANSWERED  VS GOLDEN  P50    P95    P99    PROMPT TOKENS\n"
    "----------  --------  ---------  -----  -----  -----  ---------------------------\n"
    "internal    20/20     100.0%     N ms  N ms  N ms  = golden\n"
    "databricks  20/20     80.0%      N ms  N ms  N ms  -1 vs golden (BOS missing?)\n"
    "\n"
    "PAIR                    EXACT MATCH\n"
    "----------------------  -----------\n"
    "internal vs databricks  80.0%\n"
    "\n"
    "Differing cases, internal vs databricks: 4\n"
    "  c02 (@57): '…ket 2. We have fixed it.' vs '…ket 2. We have fixed it. it.'\n"
    "  c07 (@57): '…ket 7. We have fixed it.' vs '…ket 7. We have fixed it. it.'\n"
    "  c11 (@58): '…et 11. We have fixed it.' vs '…et 11. We have fixed it. it.'\n"
    "  c16 (@58): '…et 16. We have fixed it.' vs '…et 16. We have fixed it. it.'\n"
    "\n"
    "Differing from golden, databricks: 4\n"
    "  c02 (@57): '…ket 2. We have fixed it. it.' vs '…ket 2. We have fixed it.'\n"
    "  c07 (@57): '…ket 7. We have fixed it. it.' vs '…ket 7. We have fixed it.'\n"
    "  c11 (@58): '…et 11. We have fixed it. it.' vs '…et 11. We have fixed it.'\n"
    "  c16 (@58): '…et 16. We have fixed it. it.' vs '…et 16. We have fixed it.'\n"
    "\n"
    "Prompt tokens:\n"
    "  databricks counts exactly one prompt token fewer than the golden file on every prompt: probably a missing"
    " beginning-of-text (BOS) token in its tokenizer\n"
    "  databricks counts exactly one prompt token fewer than internal on every prompt: databricks probably misses"
    " the beginning-of-text (BOS) token (or internal doubles it) (internal matches the golden file)\n"
    "\n"
    "Checks:\n"
    "  ok    internal: errors: 0 of 20 prompts unanswered (0.0%, allowed 0.0%)\n"
    "  ok    internal vs golden: exact match 100.0% (at least 90.0%)\n"
    "  ok    databricks: errors: 0 of 20 prompts unanswered (0.0%, allowed 0.0%)\n"
    "  FAIL  databricks vs golden: exact match 80.0% (at least 90.0%)\n"
    "  FAIL  internal vs databricks: exact match 80.0% (at least 94.0%)\n"
    "  FAIL  databricks vs golden: prompt tokens: databricks counts exactly one prompt token fewer than the golden"
    " file on every prompt: probably a missing beginning-of-text (BOS) token in its tokenizer\n"
    "  FAIL  databricks vs internal: prompt tokens: databricks counts exactly one prompt token fewer than internal on"
    " every prompt: databricks probably misses the beginning-of-text (BOS) token (or internal doubles it) (internal"
    " matches the golden file)\n"
    "\n"
    "Result: FAIL (4 of 7 checks failed)\n")
FAILED_ERROR = ("error: consistency probe failed 4 check(s): databricks vs golden, internal vs databricks,"
                " databricks vs golden: prompt tokens, databricks vs internal: prompt tokens\n")


def test_the_failing_table_and_its_error_are_unchanged_but_for_latencies(opsctl, tmp_path, broken):
    result = probe(opsctl, broken.config(tmp_path), golden_file(tmp_path))
    assert result.exit_code == 1, result.output
    assert masked(result.stdout) == masked(FAILING_TABLE)
    assert result.stderr == FAILED_ERROR


def test_json_output_keeps_its_keys_and_figures(opsctl, tmp_path, broken):
    result = probe(opsctl, broken.config(tmp_path), golden_file(tmp_path), "-o", "json")
    assert result.exit_code == 1, result.output
    assert result.stderr == FAILED_ERROR
    data = json.loads(result.stdout)
    assert sorted(data) == ["backends", "cases", "checks", "noise", "pairs", "passed", "token_checks"]
    assert data["passed"] is False and data["noise"] is None
    assert [b["backend"] for b in data["backends"]] == ["internal", "databricks"]
    assert [b["exact_match_golden"] for b in data["backends"]] == [1.0, (N - len(SENSITIVE_IDS)) / N]
    assert sorted(d["case_id"] for d in data["pairs"][0]["differences"]) == SENSITIVE_IDS


def test_a_dry_run_push_lists_each_gauge_on_stderr_and_says_would_push(opsctl, tmp_path, healthy):
    result = probe(opsctl, healthy.config(tmp_path), golden_file(tmp_path), "--push", "--dry-run", "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["pushed"]["dry_run"] is True and data["pushed"]["samples"] > 0
    assert "would push" not in result.stderr  # the gauge lines go with the table only
    table = probe(opsctl, healthy.config(tmp_path), golden_file(tmp_path), "--push", "--dry-run")
    lines = [line for line in table.stderr.splitlines() if line.startswith("would push ")]
    assert len(lines) == data["pushed"]["samples"]
    assert table.stdout.rstrip().splitlines()[-1].startswith(f"Would push {data['pushed']['samples']} gauges to ")
