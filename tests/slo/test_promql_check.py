"""opsctl's PromQL check (opsctl.slo.promql_check: promql-parser plus what Prometheus 2.42 reads
differently) against Prometheus' own parser: `promtool check rules` on a corpus of queries
(tests/slo/data/promql_corpus.txt: every construct of the grammar, the 3.x-only forms, and
errors), one recording rule each; both must accept and refuse the same queries."""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from opsctl.slo.promql_check import load_problem, problem
from tests.conftest import REPO, require_binary

CORPUS = [line for line in (REPO / "tests/slo/data/promql_corpus.txt").read_text().splitlines() if line.strip()]


def promtool_refused(tmp_path, queries: list[str]) -> set[int]:
    """Indexes of the queries `promtool check rules` refuses (it names every failing rule at once)."""
    path = tmp_path / "corpus.yaml"
    rules = [{"record": "corpus:query:n", "expr": q} for q in queries]
    path.write_text(yaml.safe_dump({"groups": [{"name": "corpus", "rules": rules}]}))
    out = subprocess.run([require_binary("promtool"), "check", "rules", str(path)], capture_output=True, text=True)
    return {int(n) - 1 for n in re.findall(r'group "corpus", rule (\d+),', out.stdout + out.stderr)}


def test_the_check_refuses_exactly_what_promtool_refuses_on_the_corpus(tmp_path):
    refused = promtool_refused(tmp_path, CORPUS)
    assert 40 < len(refused) < len(CORPUS) - 40  # the corpus holds both, in numbers
    disagree = [(q, i in refused, load_problem(q)) for i, q in enumerate(CORPUS)
                if (i in refused) != (load_problem(q) is not None)]
    assert disagree == []


def test_slo_generator_and_sloth_windows_substituted_are_checked_as_prometheus_reads_them():
    assert load_problem('sum_over_time(probe_success{job="x"} == 0[5m])') == "ranges only allowed for vector selectors"
    assert load_problem("sum(rate(x[{{.window}}]))") is not None  # a template left in is no PromQL
    assert load_problem("sum(rate(x[300s]))") is None


@pytest.mark.parametrize("query, said", [
    ("holt_winters(x[1h], 0.5, 0.5)", None),  # 2.42's name (3.0 renamed it)
    ("limitk(2, x)", "limitk: not in Prometheus 2.42's PromQL"),
    ("sort_by_label(x, \"a\")", "sort_by_label: not in Prometheus 2.42's PromQL"),
    ("rate(x[300])", "duration '300' needs its unit"),
    ("x offset 300", "duration '300' needs its unit"),
    ('{"a.b"="c"}', 'quoted name "a.b" in a selector'),
])
def test_what_prometheus_3_added_is_refused_by_name(query, said):
    got = load_problem(query)
    assert (got is None) if said is None else (got is not None and got.startswith(said))


@pytest.mark.parametrize("query", ["x[5m]", "rate(x[5m])[5m:1m]", "(x[5m])", '"text"'])
def test_a_query_no_rule_can_evaluate_is_refused_though_it_parses(query):
    assert load_problem(query) is None
    assert problem(query) is not None


def test_an_instant_vector_or_a_scalar_is_a_query():
    assert problem("sum(rate(x[5m]))") is None and problem("1 - (x or vector(0))") is None and problem("1") is None
