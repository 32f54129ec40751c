"""`opsctl metrics ingest`: JSONL request logs and OpenMetrics text into the embedded store.

Every expected count below is worked out by hand from the lines of the file."""

from __future__ import annotations

import json

import pytest

from tests.metrics.conftest import parse_json

T0 = 1_800_000_000  # 2027-01-15T08:00:00Z, on the 10-second grid


def row(**values):
    """A full store row: zeros except the given columns."""
    from opsctl.metrics import schema

    full = {c: 0.0 for c in schema.VALUE_COLUMNS}
    full.update(values)
    return full


def approx_rows(rows):
    return {ts: pytest.approx(values, abs=1e-9) for ts, values in rows.items()}


# ---------------------------------------------------------------------------------------------
# JSONL request log

LOG = [
    # ts, backend, status, latency_ms, prompt, completion -> step end, outcome, lowest bucket
    {"ts": "2027-01-15T08:00:03Z", "backend": "databricks", "status": 200, "latency_ms": 182,
     "prompt_tokens": 431, "completion_tokens": 210},                      # T0+10 ok, le 0.2
    {"ts": T0 + 10, "backend": "databricks", "status": 200, "latency_ms": 500,
     "prompt_tokens": 100, "completion_tokens": 50},                       # T0+10 ok, le 0.5 (inclusive)
    {"ts": "2027-01-15T08:00:10.500Z", "backend": "databricks", "status": 503, "latency_ms": 40,
     "prompt_tokens": 20, "completion_tokens": None},                      # T0+20 server_error, le 0.05
    {"ts": T0 + 12, "backend": "databricks", "status": 429, "latency_ms": 3, "prompt_tokens": 7},  # T0+20 throttled
    {"ts": T0 + 19.999, "backend": "internal", "status": "timeout", "latency_ms": 30000,
     "prompt_tokens": 300, "completion_tokens": 0},                        # T0+20 timeout, +Inf only
    {"ts": "2027-01-15T08:00:20Z", "backend": "internal", "status": 404, "latency_ms": 12,
     "prompt_tokens": 5, "completion_tokens": 0},                          # T0+20 client_error, le 0.05
    {"ts": T0 + 21, "backend": "internal", "status": 408, "latency_ms": 1000,
     "prompt_tokens": 10, "completion_tokens": 0},                         # T0+30 timeout (408), le 1.0
    {"ts": str(T0 + 25), "backend": "internal", "status": "301", "latency_ms": 2500,
     "prompt_tokens": 11, "completion_tokens": 4, "request_id": "r-8"},    # T0+30 ok, le 5.0
]

EXPECTED_LOG = {
    "databricks": {
        T0 + 10: row(req_ok=2, le_2=1, le_3=1, le_4=2, le_5=2, le_6=2, le_7=2, le_8=2, le_9=2, le_10=2,
                     lat_count=2, lat_sum=0.682, prompt_tokens=531, completion_tokens=260),
        T0 + 20: row(req_server_error=1, req_throttled=1, **{f"le_{i}": 2 for i in range(11)},
                     lat_count=2, lat_sum=0.043, prompt_tokens=27),
    },
    "internal": {
        T0 + 20: row(req_timeout=1, req_client_error=1, **{f"le_{i}": 1 for i in range(10)}, le_10=2,
                     lat_count=2, lat_sum=30.012, prompt_tokens=305),
        T0 + 30: row(req_timeout=1, req_ok=1, le_6=1, le_7=1, le_8=2, le_9=2, le_10=2,
                     lat_count=2, lat_sum=3.5, prompt_tokens=21, completion_tokens=4),
    },
}


def write_jsonl(path, records, extra_lines=()):
    lines = [json.dumps(r) for r in records] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_jsonl_request_log_lands_in_the_steps_by_hand(tmp_path, cli, store_path, store_columns):
    log = write_jsonl(tmp_path / "proxy.jsonl", LOG, extra_lines=[""])
    result = cli("metrics", "ingest", log, "-o", "json")
    assert result.exit_code == 0, result.stderr
    for backend, expected in EXPECTED_LOG.items():
        assert store_columns(store_path, backend) == approx_rows(expected)
    summary = parse_json(result)
    assert summary["format"] == "jsonl" and summary["written"] is True
    assert summary["start"] == "2027-01-15T08:00:00Z" and summary["end"] == "2027-01-15T08:00:30Z"
    assert [(b["backend"], b["steps"], b["requests"]) for b in summary["backends"]] == [
        ("databricks", 2, 4), ("internal", 2, 4)]


def test_a_401_or_403_from_a_backend_is_an_auth_error_and_counts_against_availability(tmp_path, cli, store_path,
                                                                                      store_columns):
    """Two of the vendor's answers are 401 and 403 (its auth layer refusing our credentials): the
    availability SLO shipped in slos/ counts them bad, 7 good of 9 valid, where it used to read 100%
    (a 404 stays the caller's own error, outside availability)."""
    from opsctl.metrics.embedded import EmbeddedStore
    from opsctl.slo.loading import load_slos
    from tests.conftest import REPO

    statuses = [200] * 7 + [401, 403, 404]
    log = write_jsonl(tmp_path / "proxy.jsonl", [
        {"ts": T0 + 1 + i, "backend": "databricks", "status": s, "latency_ms": 20, "prompt_tokens": 1}
        for i, s in enumerate(statuses)])
    assert cli("metrics", "ingest", log).exit_code == 0
    [values] = store_columns(store_path, "databricks").values()
    assert (values["req_ok"], values["req_auth_error"], values["req_client_error"]) == (7, 2, 1)
    [slo] = [s for s in load_slos([REPO / "slos" / "databricks-availability.yaml"], {"databricks", "internal"})]
    store = EmbeddedStore.open(store_path, create=False)
    try:
        queries = slo.queries("10s")
        good, valid = store.query_many([queries["good"], queries["valid"]], T0 + 10)
    finally:
        store.close()
    assert (good, valid) == (7.0, 9.0)  # 2 of the 9 valid requests failed: 401 and 403 are bad


def test_ingesting_the_same_log_twice_changes_nothing_and_says_so(tmp_path, cli, store_path, store_rows):
    log = write_jsonl(tmp_path / "proxy.jsonl", LOG)
    assert cli("metrics", "ingest", log).exit_code == 0
    before = store_rows(store_path)
    again = cli("metrics", "ingest", log, "-o", "json")  # a cron job's retry
    assert again.exit_code == 0, again.stderr
    assert store_rows(store_path) == before  # increments and running totals alike
    assert parse_json(again)["new_steps"] == 0 and parse_json(again)["unchanged_steps"] == 4
    assert "4 step(s) already stored with the same counts" in again.stderr


def test_two_ingests_of_one_file_at_once_store_it_once(tmp_path, config_file, store_path, store_columns):
    import subprocess
    import sys

    from tests.conftest import REPO

    log = write_jsonl(tmp_path / "proxy.jsonl", LOG)
    # Two processes: the race is between opsctl processes sharing the store file.
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    procs = [subprocess.Popen([sys.executable, "-m", "opsctl", "--config", str(config_file), "metrics", "ingest",
                               str(log)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    for backend, expected in EXPECTED_LOG.items():
        assert store_columns(store_path, backend) == approx_rows(expected)


def test_ingesting_the_same_openmetrics_file_twice_changes_nothing(tmp_path, cli, store_path, store_rows):
    path = tmp_path / "metrics.om"
    path.write_text(OPENMETRICS)
    assert cli("metrics", "ingest", path).exit_code == 0
    before = store_rows(store_path)
    assert cli("metrics", "ingest", path).exit_code == 0
    assert store_rows(store_path) == before


def test_a_file_overlapping_what_is_stored_writes_only_the_new_steps(tmp_path, cli, store_path, store_columns):
    first = write_jsonl(tmp_path / "first.jsonl", LOG[:2])  # databricks T0+10
    assert cli("metrics", "ingest", first).exit_code == 0
    both = write_jsonl(tmp_path / "both.jsonl", LOG)  # T0+10 again (same counts) and the rest
    result = cli("metrics", "ingest", both, "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert (parse_json(result)["new_steps"], parse_json(result)["unchanged_steps"]) == (3, 1)
    for backend, expected in EXPECTED_LOG.items():
        assert store_columns(store_path, backend) == approx_rows(expected)


def test_other_counts_for_a_stored_step_are_a_conflict_unless_add_or_replace_says_so(
        tmp_path, cli, store_path, store_rows, store_columns):
    log = write_jsonl(tmp_path / "proxy.jsonl", LOG)
    assert cli("metrics", "ingest", log).exit_code == 0
    before = store_rows(store_path)
    part = write_jsonl(tmp_path / "part.jsonl", LOG[:1])  # one request of the stored T0+10 step
    result = cli("metrics", "ingest", part)
    assert result.exit_code == 5, result.stderr
    assert "1 step(s) already stored with other counts" in result.stderr and "--replace" in result.stderr
    assert store_rows(store_path) == before
    assert cli("metrics", "ingest", part, "--add").exit_code == 0
    assert store_columns(store_path, "databricks")[T0 + 10]["req_ok"] == 3  # 2 stored + 1 added
    assert cli("metrics", "ingest", log, "--replace").exit_code == 0
    assert store_columns(store_path, "databricks") == approx_rows(EXPECTED_LOG["databricks"])
    assert cli("metrics", "ingest", log, "--add", "--replace").exit_code == 2


def test_every_problem_of_a_jsonl_line_is_reported(tmp_path, cli, store_path):
    line = '{"ts": "yesterday", "backend": "vertex", "status": 700, "latency_ms": -1, "suggestions": 1.5}'
    result = cli("metrics", "ingest", write_jsonl(tmp_path / "bad.jsonl", LOG[:1], extra_lines=[line]))
    assert result.exit_code == 2
    for problem in ("ts 'yesterday' is not an RFC 3339 time", "unknown backend 'vertex'", "status must be",
                    "latency_ms must be", "suggestions must be a non-negative integer"):
        assert f"bad.jsonl:2: {problem}" in result.stderr, problem
    assert "5 problem(s)" in result.stderr
    assert not store_path.exists()


def test_every_problem_of_an_openmetrics_line_is_reported(tmp_path, cli, store_path):
    path = tmp_path / "bad.om"
    path.write_text(f'llm_proxy_requests_total{{backend="vertex",outcome="ok"}} -3 {T0 * 1000}\n# EOF\n')
    result = cli("metrics", "ingest", path)
    assert result.exit_code == 2
    for problem in ("unknown backend 'vertex'", "finite non-negative", "looks like milliseconds"):
        assert "bad.om:1: " in result.stderr and problem in result.stderr, problem
    assert "3 problem(s)" in result.stderr


def test_suggestions_are_ingested_from_both_formats(tmp_path, cli, store_path, store_columns):
    log = write_jsonl(tmp_path / "proxy.jsonl", [
        {"ts": T0 + 1, "backend": "databricks", "status": 200, "latency_ms": 100, "suggestions": 3},
        {"ts": T0 + 2, "backend": "databricks", "status": 200, "latency_ms": 100, "suggestions": 2},
        {"ts": T0 + 3, "backend": "databricks", "status": 200, "latency_ms": 100},  # absent: 0
    ])
    assert cli("metrics", "ingest", log).exit_code == 0
    assert store_columns(store_path, "databricks")[T0 + 10]["suggestions"] == 5
    om = tmp_path / "s.om"
    om.write_text(f'llm_proxy_suggestions_total{{backend="internal"}} 40 {T0}\n'
                  f'llm_proxy_suggestions_total{{backend="internal"}} 47 {T0 + 10}\n# EOF\n')
    assert cli("metrics", "ingest", om).exit_code == 0
    assert store_columns(store_path, "internal")[T0 + 10]["suggestions"] == 7


def test_dry_run_validates_and_writes_nothing(tmp_path, cli, store_path):
    log = write_jsonl(tmp_path / "proxy.jsonl", LOG)
    result = cli("metrics", "ingest", log, "--dry-run", "-o", "json")
    assert result.exit_code == 0 and parse_json(result)["written"] is False
    assert not store_path.exists()


@pytest.mark.parametrize(
    "bad_line, problem",
    [
        ('{"ts": 1800000001, "backend": "databricks", "status": 200', "not valid JSON"),
        ('[1, 2, 3]', "expected a JSON object"),
        ('{"ts": 1800000001, "backend": "databricks", "status": 200}', "missing latency_ms"),
        ('{"ts": "yesterday", "backend": "databricks", "status": 200, "latency_ms": 5}', "is not an RFC 3339 time"),
        ('{"ts": 1800000001000, "backend": "databricks", "status": 200, "latency_ms": 5}', "looks like milliseconds"),
        ('{"ts": 1800000001, "backend": "databricks", "status": "teapot", "latency_ms": 5}', "status must be"),
        ('{"ts": 1800000001, "backend": "databricks", "status": 700, "latency_ms": 5}', "status must be"),
        ('{"ts": 1800000001, "backend": "databricks", "status": 200, "latency_ms": -1}', "latency_ms must be"),
        ('{"ts": 1800000001, "backend": "databricks", "status": 200, "latency_ms": 5, "prompt_tokens": 1.5}',
         "prompt_tokens must be a non-negative integer"),
        ('{"ts": 1800000001, "backend": "vertex", "status": 200, "latency_ms": 5}', "unknown backend 'vertex'"),
    ],
)
def test_a_bad_jsonl_line_fails_with_exit_2_naming_file_and_line_and_writes_nothing(
        tmp_path, cli, store_path, store_rows, bad_line, problem):
    assert cli("metrics", "ingest", write_jsonl(tmp_path / "good.jsonl", LOG)).exit_code == 0
    before = store_rows(store_path)
    log = write_jsonl(tmp_path / "bad.jsonl", LOG[:2], extra_lines=[bad_line] + [json.dumps(r) for r in LOG[2:]])
    result = cli("metrics", "ingest", log)
    assert result.exit_code == 2
    assert f"{log}:3: " in result.stderr and problem in result.stderr
    assert "nothing was written" in result.stderr
    assert store_rows(store_path) == before


def test_every_bad_line_is_listed(tmp_path, cli, store_path):
    lines = ['{"ts": 1800000001, "backend": "x", "status": 200, "latency_ms": 5}'] * 3
    result = cli("metrics", "ingest", write_jsonl(tmp_path / "bad.jsonl", [], extra_lines=lines))
    assert result.exit_code == 2
    assert all(f"bad.jsonl:{n}: unknown backend 'x'" in result.stderr for n in (1, 2, 3))
    assert not store_path.exists()


# ---------------------------------------------------------------------------------------------
# OpenMetrics text

OPENMETRICS = f"""\
# TYPE llm_proxy_requests counter
# HELP llm_proxy_requests Requests.
llm_proxy_requests_total{{backend="databricks",outcome="ok",instance="a"}} 100 {T0}
llm_proxy_requests_total{{backend="databricks",outcome="ok",instance="a"}} 150 {T0 + 10}
llm_proxy_requests_total{{backend="databricks",outcome="ok",instance="a"}} 20 {T0 + 20}
llm_proxy_requests_total{{backend="databricks",outcome="ok",instance="a"}} 45 {T0 + 27}
llm_proxy_requests_total{{instance="b",outcome="ok",backend="databricks"}} 7 {T0 + 5}
llm_proxy_requests_total{{instance="b",outcome="ok",backend="databricks"}} 10 {T0 + 10}
llm_proxy_requests_total{{instance="b",outcome="ok",backend="databricks"}} 30 {T0 + 30}
llm_proxy_requests_total{{backend="databricks",outcome="server_error",instance="a"}} 0 {T0}
llm_proxy_requests_total{{backend="databricks",outcome="server_error",instance="a"}} 2 {T0 + 30}
# TYPE llm_proxy_request_duration_seconds histogram
llm_proxy_request_duration_seconds_bucket{{backend="internal",le="1"}} 5 {T0}
llm_proxy_request_duration_seconds_bucket{{backend="internal",le="1"}} 9 {T0 + 10}
llm_proxy_request_duration_seconds_bucket{{backend="internal",le="+Inf"}} 6 {T0}
llm_proxy_request_duration_seconds_bucket{{backend="internal",le="+Inf"}} 11 {T0 + 10}
llm_proxy_request_duration_seconds_count{{backend="internal"}} 6 {T0}
llm_proxy_request_duration_seconds_count{{backend="internal"}} 11 {T0 + 10}
llm_proxy_request_duration_seconds_sum{{backend="internal"}} 1.5 {T0}
llm_proxy_request_duration_seconds_sum{{backend="internal"}} 2.75 {T0 + 10}
# TYPE process_cpu_seconds counter
process_cpu_seconds_total 12.5 {T0 + 10}
# TYPE llm_proxy_prompt_tokens counter
llm_proxy_prompt_tokens_total{{backend="internal"}} 1000 {T0}.5
llm_proxy_prompt_tokens_total{{backend="internal"}} 1600 {T0 + 8} # {{trace_id="abc"}} 1 {T0 + 8}
# EOF
"""

EXPECTED_OPENMETRICS = {
    "databricks": {
        # instance a: 150-100 = 50; instance b: 10-7 = 3 (7 is its baseline)
        T0 + 10: row(req_ok=53),
        # instance a: the counter reset from 150 to 20 counts 20
        T0 + 20: row(req_ok=20),
        # a: 45-20 = 25 at T0+27 -> step T0+30; b: 30-10 = 20; server_error 2-0 across a gap
        T0 + 30: row(req_ok=45, req_server_error=2),
    },
    "internal": {
        # le="1" is the 1.0 bucket (le_6); +Inf is le_10; prompt tokens at T0+0.5 are the baseline
        T0 + 10: row(le_6=4, le_10=5, lat_count=5, lat_sum=1.25, prompt_tokens=600),
    },
}


def test_openmetrics_counters_become_per_step_increments(tmp_path, cli, store_path, store_columns):
    path = tmp_path / "metrics.txt"
    path.write_text(OPENMETRICS)
    result = cli("metrics", "ingest", path, "-o", "json")
    assert result.exit_code == 0, result.stderr
    for backend, expected in EXPECTED_OPENMETRICS.items():
        assert store_columns(store_path, backend) == approx_rows(expected)
    summary = parse_json(result)
    assert summary["format"] == "openmetrics" and summary["skipped_samples"] == 1
    assert [(b["backend"], b["steps"], b["requests"]) for b in summary["backends"]] == [
        ("databricks", 3, 120), ("internal", 1, 0)]


@pytest.mark.parametrize(
    "bad_line, problem",
    [
        ('llm_proxy_requests_total{backend="databricks",outcome="ok"} 5', "needs a value and a timestamp"),
        (f'llm_proxy_requests_total{{backend="databricks",outcome="ok"}} 5 {T0 * 1000}', "looks like milliseconds"),
        (f'llm_proxy_requests_total{{backend="vertex",outcome="ok"}} 5 {T0}', "unknown backend 'vertex'"),
        (f'llm_proxy_requests_total{{outcome="ok"}} 5 {T0}', "without a backend label"),
        (f'llm_proxy_requests_total{{backend="databricks",outcome="fine"}} 5 {T0}', "outcome='fine'"),
        (f'llm_proxy_request_duration_seconds_bucket{{backend="internal",le="0.25"}} 5 {T0}', "le='0.25'"),
        (f'llm_proxy_requests_total{{backend="databricks",outcome="ok" 5 {T0}', "cannot parse the labels"),
        (f'llm_proxy_requests_total{{backend="databricks",outcome="ok"}} NaN {T0}', "finite non-negative"),
        (f'llm_proxy_requests_total{{backend="databricks",outcome="ok"}} many {T0}', "'many' after"),
        # the same series as the line before it, going back in time
        (f'llm_proxy_requests_total{{backend="databricks",outcome="server_error",instance="a"}} 3 {T0 + 20}',
         "is not after the previous sample of this series (line 11)"),
    ],
)
def test_a_bad_openmetrics_line_fails_with_exit_2_naming_file_and_line(
        tmp_path, cli, store_path, store_rows, bad_line, problem):
    lines = OPENMETRICS.splitlines()
    bad_at = 12  # right after the server_error series (lines 10 and 11)
    path = tmp_path / "bad.om"
    path.write_text("\n".join(lines[: bad_at - 1] + [bad_line] + lines[bad_at - 1:]) + "\n")
    result = cli("metrics", "ingest", path)
    assert result.exit_code == 2, result.stderr
    assert f"{path}:{bad_at}: " in result.stderr and problem in result.stderr
    assert not store_path.exists()


def test_content_after_eof_is_an_error(tmp_path, cli):
    path = tmp_path / "bad.om"
    path.write_text(OPENMETRICS + f'llm_proxy_requests_total{{backend="databricks",outcome="ok"}} 5 {T0}\n')
    result = cli("metrics", "ingest", path)
    assert result.exit_code == 2 and "content after '# EOF'" in result.stderr


def test_an_openmetrics_file_with_only_baselines_has_nothing_to_ingest(tmp_path, cli, store_path):
    path = tmp_path / "one.om"
    path.write_text(f'llm_proxy_requests_total{{backend="databricks",outcome="ok"}} 5 {T0}\n# EOF\n')
    result = cli("metrics", "ingest", path)
    assert result.exit_code == 2 and "nothing to ingest" in result.stderr
    assert not store_path.exists()


def test_the_format_flag_overrides_detection(tmp_path, cli):
    log = write_jsonl(tmp_path / "proxy.log", LOG)
    result = cli("metrics", "ingest", log, "--format", "openmetrics")
    assert result.exit_code == 2 and f"{log}:1: " in result.stderr


def test_an_undetectable_file_asks_for_the_format(tmp_path, cli):
    path = tmp_path / "mystery"
    path.write_text("!!! not metrics\n")
    result = cli("metrics", "ingest", path)
    assert result.exit_code == 2 and "--format" in result.stderr


def test_a_missing_file_is_exit_2(tmp_path, cli):
    result = cli("metrics", "ingest", tmp_path / "nope.jsonl")
    assert result.exit_code == 2 and "no such file" in result.stderr


# ---------------------------------------------------------------------------------------------
# metrics info


def test_metrics_info_describes_the_store(tmp_path, cli):
    assert cli("metrics", "ingest", write_jsonl(tmp_path / "proxy.jsonl", LOG)).exit_code == 0
    result = cli("metrics", "info", "-o", "json")
    assert result.exit_code == 0, result.stderr
    data = parse_json(result)
    assert data["start"] == "2027-01-15T08:00:00Z" and data["end"] == "2027-01-15T08:00:30Z"
    assert [(b["backend"], b["steps"], b["requests"]) for b in data["backends"]] == [
        ("databricks", 2, 4), ("internal", 2, 4)]
    assert data["backends"][1]["outcomes"] == {"ok": 1, "client_error": 1, "auth_error": 0, "throttled": 0,
                                               "server_error": 0, "timeout": 2}
    table = cli("metrics", "info")
    assert table.exit_code == 0 and "databricks" in table.stdout


def test_metrics_info_without_a_store_is_no_data(cli):
    result = cli("metrics", "info")
    assert result.exit_code == 3 and "no embedded metrics" in result.stderr
