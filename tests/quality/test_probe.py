"""`opsctl probe consistency` against two loopback OpenAI-compatible backends: a healthy internal
vLLM and a vendor release whose tokenizer dropped the beginning-of-text token (answers change on
some prompts, usage.prompt_tokens is one lower on all). The probe must catch it and exit 1."""

from __future__ import annotations

import json
import sqlite3

import pytest

from opsctl.metrics.gauges import GaugeStore
from tests.conftest import require_binary, write_config
from tests.fakes.loopback import Response
from tests.fakes.oauth_fake import OAuthFake
from tests.fakes.openai_fake import OpenAIFake, degraded, prompt_tokens
from tests.fakes.pushgateway_fake import PushgatewayFake, check_exposition

VLLM_KEY = "vllm-api-key-Zx81"
CLIENT_ID = "6f1c2c3e-0000-4000-8000-000000000001"
CLIENT_SECRET = "dbx-client-secret-Qm27"
N = 20
PROMPTS = [f"Case {i}: complete the support reply for ticket number {i} " + "please " * (i % 4) for i in range(N)]
ANSWERS = {p: f"Thanks for reaching out about ticket {i}. We have fixed it." for i, p in enumerate(PROMPTS)}
SENSITIVE = [PROMPTS[i] for i in (2, 7, 11, 16)]  # 4 of 20 answers change without BOS: 80% agreement
SENSITIVE_IDS = ["c02", "c07", "c11", "c16"]
SECRET_ENV = {"VLLM_KEY": VLLM_KEY, "DBX_CLIENT_SECRET": CLIENT_SECRET}


def golden_file(tmp_path, *, with_tokens=True):
    path = tmp_path / "golden.jsonl"
    lines = []
    for i, prompt in enumerate(PROMPTS):
        case = {"id": f"c{i:02d}", "prompt": prompt, "expected": ANSWERS[prompt]}
        if with_tokens:
            case["prompt_tokens"] = prompt_tokens(prompt)  # BOS + words, as the reference tokenizer counts
        lines.append(json.dumps(case))
    path.write_text("\n".join(lines) + "\n")
    return path


def config(tmp_path, internal_url, vendor_url, oauth_url, extra=""):
    return write_config(tmp_path, f"""\
        endpoints:
          internal:
            base_url: {internal_url}
            model: llm-inference-ft
            auth: {{bearer: {{env: VLLM_KEY}}}}
          databricks:
            base_url: {vendor_url}
            model: llm-inference-ft
            auth:
              databricks_oauth:
                workspace_url: {oauth_url}
                client_id: {CLIENT_ID}
                client_secret: {{env: DBX_CLIENT_SECRET}}
        quality:
          probe: {{concurrency: 4, timeout: 5, retries: 2, backoff_base: 0.01, backoff_cap: 0.05, deadline: 60}}
        """ + extra)


class Backends:
    def __init__(self, *, drop_bos: bool, sensitive=SENSITIVE, internal_script=()):
        self.oauth = OAuthFake(CLIENT_ID, CLIENT_SECRET)
        self.internal = OpenAIFake(ANSWERS, accept=lambda h: h == f"Bearer {VLLM_KEY}", script=internal_script)
        self.vendor = OpenAIFake(ANSWERS, drop_bos=drop_bos, bos_sensitive=sensitive,
                                 accept=lambda h: self.oauth.accepts(h), prefix="/serving-endpoints")

    def __enter__(self):
        for fake in (self.oauth, self.internal, self.vendor):
            fake.__enter__()
        return self

    def __exit__(self, *exc):
        for fake in (self.oauth, self.internal, self.vendor):
            fake.__exit__(*exc)

    def config(self, tmp_path, extra=""):
        return config(tmp_path, self.internal.base_url, self.vendor.base_url, self.oauth.url, extra)


@pytest.fixture
def broken():
    with Backends(drop_bos=True) as b:
        yield b


@pytest.fixture
def healthy():
    with Backends(drop_bos=False) as b:
        yield b


def probe(opsctl, cfg, golden, *args):
    return opsctl("--config", str(cfg), "probe", "consistency", "--golden", str(golden), *args, env=SECRET_ENV)


def test_missing_bos_token_is_caught_and_fails_the_probe(opsctl, tmp_path, broken):
    cfg = broken.config(tmp_path)
    result = probe(opsctl, cfg, golden_file(tmp_path))
    assert result.exit_code == 1, result.output
    out = result.stdout
    # 16 of 20 answers agree: 80% < 94%
    assert "internal vs databricks  80.0%" in out
    assert "FAIL  internal vs databricks: exact match 80.0% (at least 94.0%)" in out
    assert ("databricks counts exactly one prompt token fewer than the golden file on every prompt: "
            "probably a missing beginning-of-text (BOS) token") in out
    assert ("databricks counts exactly one prompt token fewer than internal on every prompt: "
            "databricks probably misses the beginning-of-text (BOS) token (or internal doubles it) "
            "(internal matches the golden file)") in out
    assert "-1 vs golden (BOS missing?)" in out
    for case_id in SENSITIVE_IDS:
        assert f"  {case_id} (@" in out
    assert "Result: FAIL" in out
    assert "consistency probe failed" in result.stderr


def test_json_report_lists_differing_cases_and_token_offsets(opsctl, tmp_path, broken):
    cfg = broken.config(tmp_path)
    result = probe(opsctl, cfg, golden_file(tmp_path), "-o", "json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["passed"] is False and data["cases"] == N
    backends = {b["backend"]: b for b in data["backends"]}
    assert backends["internal"]["exact_match_golden"] == 1.0
    assert backends["databricks"]["exact_match_golden"] == (N - 4) / N
    assert [d["case_id"] for d in backends["databricks"]["differences"]] == SENSITIVE_IDS
    first = backends["databricks"]["differences"][0]
    expected = ANSWERS[PROMPTS[2]]
    assert first["position"] == len(expected)  # the degraded answer repeats a word after the expected text
    assert first["got"].endswith(degraded(expected)[len(expected):])
    pair = data["pairs"][0]
    assert (pair["a"], pair["b"], pair["exact_match"]) == ("internal", "databricks", 0.8)
    checks = {(t["backend"], t["reference"]): t for t in data["token_checks"]}
    assert checks[("databricks", "golden")]["offset"] == -1 and checks[("databricks", "golden")]["bos"] == "missing"
    assert checks[("databricks", "golden")]["mismatched"] == N
    assert checks[("internal", "golden")]["mismatched"] == 0
    assert checks[("databricks", "internal")]["offset"] == -1  # the golden file shows databricks is off
    for b in backends.values():
        assert b["answered"] == N and b["error_rate"] == 0
        assert b["latency"]["p50"] is not None and b["latency"]["p50"] <= b["latency"]["p99"]


def test_off_by_one_alone_fails_even_when_every_answer_matches(opsctl, tmp_path):
    with Backends(drop_bos=True, sensitive=()) as b:
        result = probe(opsctl, b.config(tmp_path), golden_file(tmp_path, with_tokens=False))
    assert result.exit_code == 1, result.output
    assert "internal vs databricks  100.0%" in result.stdout
    assert "beginning-of-text (BOS) token" in result.stdout
    assert ("internal counts exactly one prompt token more than databricks on every prompt: "
            "internal probably doubles the beginning-of-text (BOS) token (or databricks misses it)") in result.stdout
    assert "FAIL  internal vs databricks: prompt tokens" in result.stdout


def test_consistent_backends_pass(opsctl, tmp_path, healthy):
    result = probe(opsctl, healthy.config(tmp_path), golden_file(tmp_path))
    assert result.exit_code == 0, result.output
    assert "Result: PASS" in result.stdout
    assert "internal vs databricks  100.0%" in result.stdout
    assert healthy.oauth.exchanges == 1  # one token for the whole run
    assert healthy.vendor.served == N and healthy.internal.served == N


def test_a_429_is_retried_and_the_probe_still_passes(opsctl, tmp_path):
    with Backends(drop_bos=False, internal_script=[Response(429, {"error": {"message": "slow down"}})]) as b:
        result = probe(opsctl, b.config(tmp_path), golden_file(tmp_path), "-o", "json")
        assert result.exit_code == 0, result.output
        assert len(b.internal.requests) == N + 1 and b.internal.served == N


def test_one_backend_is_compared_with_the_golden_file_only(opsctl, tmp_path, broken):
    result = probe(opsctl, broken.config(tmp_path), golden_file(tmp_path), "--backend", "internal", "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [b["backend"] for b in data["backends"]] == ["internal"] and data["pairs"] == []
    assert broken.vendor.requests == []


def test_push_to_the_embedded_store_writes_gauges(opsctl, tmp_path, broken):
    result = probe(opsctl, broken.config(tmp_path), golden_file(tmp_path), "--push")
    assert result.exit_code == 1, result.output
    assert "Pushed" in result.stdout
    store = GaugeStore.open(tmp_path / "state" / "metrics.sqlite")
    try:
        match = {(g.labels["backend"], g.labels["reference"]): g.value for g in store.latest("opsctl_probe_exact_match_ratio")}
        bos = {(g.labels["backend"], g.labels["reference"]): g.value for g in store.latest("opsctl_probe_bos_suspected")}
        passed = store.latest("opsctl_probe_passed")
    finally:
        store.close()
    assert match == {("internal", "golden"): 1.0, ("databricks", "golden"): 0.8,
                     ("internal", "databricks"): 0.8, ("databricks", "internal"): 0.8}
    assert bos[("databricks", "golden")] == 1.0 and bos[("internal", "golden")] == 0.0
    assert [g.value for g in passed] == [0.0]
    # The steps table of the embedded store is untouched: the gauges live in a table of their own.
    conn = sqlite3.connect(tmp_path / "state" / "metrics.sqlite")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    assert tables == {"gauges"}


def test_push_to_a_pushgateway_puts_the_text_format(opsctl, tmp_path, broken):
    with PushgatewayFake() as gateway:
        result = probe(opsctl, broken.config(tmp_path), golden_file(tmp_path), "--push", "--push-to", "pushgateway",
                       "--pushgateway-url", gateway.url)
        assert result.exit_code == 1, result.output
        assert list(gateway.groups) == ["/metrics/job/opsctl_probe/service/llm-inference"]
        body = gateway.groups["/metrics/job/opsctl_probe/service/llm-inference"]
        put = gateway.requests[0]
    assert put.method == "PUT" and put.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert check_exposition(body) == []
    lines = body.splitlines()
    assert "# TYPE opsctl_probe_bos_suspected gauge" in lines
    assert 'opsctl_probe_bos_suspected{backend="databricks",reference="golden",service="llm-inference"} 1.0' in lines
    assert 'opsctl_probe_exact_match_ratio{backend="databricks",reference="internal",service="llm-inference"} 0.8' in lines
    assert 'opsctl_probe_prompt_token_offset{backend="databricks",reference="golden",service="llm-inference"} -1.0' in lines
    assert 'opsctl_probe_passed{service="llm-inference"} 0.0' in lines
    # promtool parses and lints the same body
    import subprocess

    promtool = require_binary("promtool")
    lint = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, text=True, timeout=30)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_dry_run_push_writes_nothing(opsctl, tmp_path, healthy):
    result = probe(opsctl, healthy.config(tmp_path), golden_file(tmp_path), "--push", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "would push opsctl_probe_passed" in result.stderr
    assert "Would push" in result.stdout
    assert not (tmp_path / "state" / "metrics.sqlite").exists()


def test_no_secret_or_token_appears_in_any_output(opsctl, tmp_path, broken):
    cfg = broken.config(tmp_path)
    golden = golden_file(tmp_path)
    outputs = [probe(opsctl, cfg, golden, "-o", fmt) for fmt in ("table", "json", "yaml")]
    with PushgatewayFake() as gateway:
        outputs.append(probe(opsctl, cfg, golden, "--push", "--pushgateway-url", gateway.url))
        bodies = list(gateway.groups.values())
    outputs.append(opsctl("--config", str(cfg), "config", "show", "-o", "yaml", env=SECRET_ENV))
    secrets = [VLLM_KEY, CLIENT_SECRET] + broken.oauth.issued
    assert len(broken.oauth.issued) >= 4
    for text in [o.stdout + o.stderr for o in outputs] + bodies:
        for secret in secrets:
            assert secret not in text


def test_refused_client_secret_exits_2_without_showing_it(opsctl, tmp_path, healthy):
    env = dict(SECRET_ENV, DBX_CLIENT_SECRET="wrong-secret-9931")
    result = opsctl("--config", str(healthy.config(tmp_path)), "probe", "consistency", "--golden",
                    str(golden_file(tmp_path)), env=env)
    assert result.exit_code == 2, result.output
    assert f"refused client {CLIENT_ID}" in result.stderr
    assert "wrong-secret-9931" not in result.output and CLIENT_SECRET not in result.output
    assert healthy.vendor.requests == []


def test_unreachable_backend_fails_with_each_case_unanswered(opsctl, tmp_path, healthy):
    from tests.conftest import free_port

    dead = f"http://127.0.0.1:{free_port()}/v1"
    cfg = config(tmp_path, dead, healthy.vendor.base_url, healthy.oauth.url)
    result = probe(opsctl, cfg, golden_file(tmp_path), "-o", "json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    internal = next(b for b in data["backends"] if b["backend"] == "internal")
    assert internal["answered"] == 0 and internal["error_rate"] == 1.0
    assert "transport error: ConnectError after 3 attempt(s)" in internal["errors"][0]["error"]


@pytest.mark.parametrize("content, message", [
    ('{"id": "a", "prompt": "p"}\n', "golden.jsonl:1: 'expected' must be a string"),
    ('{"prompt": "p", "expected": "x", "tokens": 3}\n', "golden.jsonl:1: unknown key(s) tokens"),
    ('{"id": "a", "prompt": "p", "expected": "x"}\n{"id": "a", "prompt": "q", "expected": "y"}\n',
     "golden.jsonl:2: duplicate id 'a'"),
    ('not json\n', "golden.jsonl:1: not JSON"),
    ('\n', "the golden file has no cases"),
])
def test_bad_golden_file_exits_2_naming_the_line(opsctl, tmp_path, content, message):
    golden = tmp_path / "golden.jsonl"
    golden.write_text(content)
    cfg = config(tmp_path, "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1", "http://127.0.0.1:9")
    result = probe(opsctl, cfg, golden)
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_backend_without_endpoint_or_unknown_exits_2(opsctl, tmp_path):
    golden = golden_file(tmp_path)
    cfg = write_config(tmp_path)
    result = probe(opsctl, cfg, golden, "--backend", "internal")
    assert result.exit_code == 2 and "has no endpoint configured" in result.stderr
    result = probe(opsctl, cfg, golden, "--backend", "nope")
    assert result.exit_code == 2 and "unknown backend 'nope'" in result.stderr
    result = probe(opsctl, cfg, golden)
    assert result.exit_code == 2 and "no endpoints configured" in result.stderr


def test_mixed_apis_are_warned_about_and_the_template_offset_is_named(opsctl, tmp_path, healthy):
    cfg = healthy.config(tmp_path)
    text = cfg.read_text().replace("model: llm-inference-ft\n    auth:\n      databricks_oauth",
                                   "model: llm-inference-ft\n    api: chat\n    auth:\n      databricks_oauth")
    assert "api: chat" in text
    cfg.write_text(text)
    result = probe(opsctl, cfg, golden_file(tmp_path))
    assert result.exit_code == 1, result.output
    assert "warning: the backends use different APIs (internal: completions, databricks: chat)" in result.stderr
    # the fake's chat template adds 4 tokens on every prompt: a constant offset, not a BOS problem
    assert "databricks counts +4 prompt tokens against the golden file on every prompt (a different template?)" \
        in result.stdout
    assert "internal vs databricks  100.0%" in result.stdout
