"""Line-oriented files from outside: golden sets of the quality probe and `metrics ingest` input
(JSONL request logs, OpenMetrics text). Any content ends in success or an error naming the file
(and the line), exit 2, never a traceback; a rejected ingest writes nothing."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsctl.errors import ConfigError
from opsctl.quality.golden import load_golden
from tests.cli.inprocess import invoke
from tests.conftest import write_config
from tests.property.helpers import assert_clean, mutate, values

GOLDEN = {"id": "c1", "prompt": "Translate 'hello' to French.", "expected": "bonjour", "prompt_tokens": 9}
REQUEST = {"ts": "2026-11-20T14:00:03.2Z", "backend": "databricks", "status": 200, "latency_ms": 182,
           "prompt_tokens": 431, "completion_tokens": 210}
OPENMETRICS = [
    "# TYPE llm_proxy_requests counter",
    'llm_proxy_requests_total{backend="databricks",outcome="ok"} 0 1795100000',
    'llm_proxy_requests_total{backend="databricks",outcome="ok"} 120 1795100010',
    'llm_proxy_requests_total{backend="internal",outcome="server_error"} 3 1795100010',
    'llm_proxy_request_duration_seconds_bucket{backend="internal",le="0.5"} 7 1795100010',
    "# EOF",
]


@st.composite
def mutated(draw, sample: dict):
    return json.dumps(mutate(sample, draw, depth=1))


def json_lines(sample: dict):
    """Lines that are the sample, a mutated sample, or any JSON / text at all."""
    return st.lists(st.one_of(
        st.just(json.dumps(sample)),
        mutated(sample),
        values.map(json.dumps),
        st.text(max_size=40),
    ), max_size=6)


@given(json_lines(GOLDEN))
def test_any_golden_file_loads_or_lists_its_problems_by_line(lines):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "golden.jsonl"
        path.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
        try:
            cases = load_golden(path)
        except ConfigError as exc:
            assert exc.problems and all(p.startswith(str(path)) for p in exc.problems), exc.problems
            assert all("\n" not in p for p in exc.problems)
            return
        assert cases and all(isinstance(c.prompt, str) and c.prompt for c in cases)
        assert len({c.id for c in cases}) == len(cases)


@given(st.binary(max_size=200))
def test_any_bytes_as_a_golden_file_load_or_name_the_file(content):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "golden.jsonl"
        path.write_bytes(content)
        try:
            load_golden(path)
        except ConfigError as exc:
            assert str(path) in str(exc)


@pytest.fixture(scope="module")
def ingest_config(tmp_path_factory):
    return write_config(tmp_path_factory.mktemp("ingest"))


def ingest(config: Path, name: str, content: str | bytes, fmt: str):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
        result = invoke("--config", config, "metrics", "ingest", path, "--format", fmt, "--dry-run", "-o", "json")
        assert_clean(result, naming=str(path))
        store = config.parent / "state" / "metrics.sqlite"
        assert not store.exists(), "a dry run writes nothing"
        return result


@settings(max_examples=80)
@given(json_lines(REQUEST))
def test_any_jsonl_request_log_ingests_or_names_the_file_and_line(ingest_config, lines):
    result = ingest(ingest_config, "requests.jsonl", "\n".join(lines), "jsonl")
    if result.exit_code == 0:
        summary = json.loads(result.stdout)
        assert summary["lines"] >= 1 and summary["backends"]


@settings(max_examples=80)
@given(st.lists(st.one_of(st.sampled_from(OPENMETRICS), st.text(max_size=60),
                          st.sampled_from(OPENMETRICS).flatmap(
                              lambda line: st.integers(0, max(0, len(line) - 1)).flatmap(
                                  lambda i: st.text(max_size=3).map(lambda t: line[:i] + t + line[i + 1:])))),
                max_size=8))
def test_any_openmetrics_text_ingests_or_names_the_file_and_line(ingest_config, lines):
    ingest(ingest_config, "history.om", "\n".join(lines) + "\n", "openmetrics")


@given(st.binary(max_size=200), st.sampled_from(["jsonl", "openmetrics"]))
def test_any_bytes_ingest_or_name_the_file(ingest_config, content, fmt):
    ingest(ingest_config, "x.data", content, fmt)
