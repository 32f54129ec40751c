"""Credentials: Databricks OAuth M2M against a loopback token endpoint (client credentials checked,
tokens with expires_in), refresh before expiry in simulated time, the optional on-disk cache, and
static bearer tokens / PATs. Secrets never appear in messages."""

from __future__ import annotations

import json
import stat
import threading

import pytest

from opsctl.clock import SimClock
from opsctl.config import DatabricksOAuth, Endpoint, EndpointAuth, SecretRef
from opsctl.errors import UsageError
from opsctl.quality.auth import DatabricksOAuthToken, build_token_source
from opsctl.quality.openai_client import OpenAIClient, RetryPolicy
from tests.fakes.oauth_fake import OAuthFake
from tests.fakes.openai_fake import OpenAIFake

CLIENT_ID = "6f1c2c3e-0000-4000-8000-000000000001"
SECRET = "dose-very-secret-4711"
ANSWERS = {"ping": "pong"}


@pytest.fixture
def oauth():
    with OAuthFake(CLIENT_ID, SECRET, expires_in=3600) as fake:
        yield fake


def settings(fake, *, secret_env="DBX_SECRET", margin=300.0, persist=False):
    return DatabricksOAuth(client_id=CLIENT_ID, client_secret=SecretRef(env=secret_env), workspace_url=fake.url,
                           refresh_margin=margin, persist=persist)


def test_client_credentials_are_exchanged_at_the_workspace_token_endpoint(oauth, monkeypatch):
    monkeypatch.setenv("DBX_SECRET", SECRET)
    source = DatabricksOAuthToken(settings(oauth), clock=SimClock(0))
    header = source.authorization()
    assert oauth.exchanges == 1 and header == f"Bearer {oauth.issued[0]}"
    request = oauth.requests[0]
    assert request.path == "/oidc/v1/token"
    assert request.headers["authorization"].startswith("Basic ")
    assert request.body.decode() == "grant_type=client_credentials&scope=all-apis"


def test_token_is_refreshed_once_after_expiry_minus_margin_in_simulated_time(oauth, monkeypatch):
    monkeypatch.setenv("DBX_SECRET", SECRET)
    clock = SimClock(1_000_000.0)
    tokens = build_token_source(EndpointAuth(databricks_oauth=settings(oauth)), backend="databricks", clock=clock)
    with OpenAIFake(ANSWERS, accept=oauth.accepts) as api:
        endpoint = Endpoint(base_url=api.base_url, model="llm-inference-ft")
        with OpenAIClient(endpoint, tokens, clock=clock, retry=RetryPolicy(0)) as client:
            assert client.complete("ping").text == "pong"
            assert oauth.exchanges == 1
            clock.advance(3600 - 300 - 1)  # one second before expiry minus the margin
            client.complete("ping")
            assert oauth.exchanges == 1
            clock.advance(1)  # now at expiry minus margin: the next request exchanges again
            client.complete("ping")
            assert oauth.exchanges == 2
            client.complete("ping")
            assert oauth.exchanges == 2
            # After the next expiry, eight concurrent requests share one exchange.
            clock.advance(3600)
            threads = [threading.Thread(target=client.complete, args=("ping",)) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=10)
            assert oauth.exchanges == 3
    assert api.served == 4 + 8
    assert [r.headers["authorization"] for r in api.requests[:2]] == [f"Bearer {oauth.issued[0]}"] * 2
    assert api.requests[2].headers["authorization"] == f"Bearer {oauth.issued[1]}"


def test_a_token_the_api_rejects_is_exchanged_again_and_the_request_retried(oauth, monkeypatch):
    monkeypatch.setenv("DBX_SECRET", SECRET)
    clock = SimClock(0.0)
    revoked: set[str] = set()
    source = DatabricksOAuthToken(settings(oauth), clock=clock)
    with OpenAIFake(ANSWERS, accept=lambda h: oauth.accepts(h) and h not in revoked) as api:
        endpoint = Endpoint(base_url=api.base_url, model="llm-inference-ft")
        with OpenAIClient(endpoint, source, clock=clock, retry=RetryPolicy(0)) as client:
            client.complete("ping")
            revoked.add(f"Bearer {oauth.issued[0]}")
            assert client.complete("ping").text == "pong"
    assert oauth.exchanges == 2 and [r.headers["authorization"] for r in api.requests][-2:] == [
        f"Bearer {oauth.issued[0]}", f"Bearer {oauth.issued[1]}"]


def test_a_short_lived_token_is_not_exchanged_on_every_request(oauth, monkeypatch):
    monkeypatch.setenv("DBX_SECRET", SECRET)
    oauth.expires_in = 120  # shorter than the 300 s margin: refresh at half its life instead
    clock = SimClock(0.0)
    source = DatabricksOAuthToken(settings(oauth), clock=clock)
    source.authorization()
    clock.advance(59)
    source.authorization()
    assert oauth.exchanges == 1
    clock.advance(1)
    source.authorization()
    assert oauth.exchanges == 2


def test_wrong_secret_is_refused_with_a_message_that_never_shows_it(oauth, monkeypatch):
    monkeypatch.setenv("DBX_SECRET", "not-the-secret-0815")
    source = DatabricksOAuthToken(settings(oauth), clock=SimClock(0))
    with pytest.raises(UsageError) as info:
        source.authorization()
    text = str(info.value)
    assert f"refused client {CLIENT_ID} (HTTP 401: invalid_client)" in text
    assert "not-the-secret-0815" not in text and SECRET not in text
    assert "not-the-secret" not in repr(source)
    assert oauth.refused == 1 and oauth.exchanges == 0


def test_missing_secret_env_names_the_variable(oauth, monkeypatch):
    monkeypatch.delenv("DBX_SECRET_UNSET", raising=False)
    source = DatabricksOAuthToken(settings(oauth, secret_env="DBX_SECRET_UNSET"), clock=SimClock(0))
    with pytest.raises(UsageError, match="DBX_SECRET_UNSET is not set"):
        source.authorization()


def test_persisted_token_is_private_atomic_and_reused_by_the_next_run(oauth, monkeypatch, tmp_path):
    monkeypatch.setenv("DBX_SECRET", SECRET)
    clock = SimClock(5000.0)
    auth = EndpointAuth(databricks_oauth=settings(oauth, persist=True))
    first = build_token_source(auth, backend="databricks", state_dir=tmp_path, clock=clock)
    header = first.authorization()
    cache = tmp_path / "tokens" / "databricks.json"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    saved = json.loads(cache.read_text())
    assert saved["access_token"] == oauth.issued[0] and saved["expires_at"] == 5000.0 + 3600
    assert SECRET not in cache.read_text()
    assert [p.name for p in cache.parent.iterdir()] == ["databricks.json"]  # no temp file left behind

    second = build_token_source(auth, backend="databricks", state_dir=tmp_path, clock=clock)
    assert second.authorization() == header and oauth.exchanges == 1
    clock.advance(3600 - 300)
    third = build_token_source(auth, backend="databricks", state_dir=tmp_path, clock=clock)
    assert third.authorization() != header and oauth.exchanges == 2


def test_cache_of_another_client_is_ignored(oauth, monkeypatch, tmp_path):
    monkeypatch.setenv("DBX_SECRET", SECRET)
    cache = tmp_path / "tokens" / "databricks.json"
    cache.parent.mkdir(parents=True)
    cache.write_text(json.dumps({"token_url": oauth.url + "/oidc/v1/token", "client_id": "someone-else",
                                 "scope": "all-apis", "access_token": "foreign", "expires_at": 1e12}))
    source = build_token_source(EndpointAuth(databricks_oauth=settings(oauth, persist=True)), backend="databricks",
                                state_dir=tmp_path, clock=SimClock(0))
    assert source.authorization() == f"Bearer {oauth.issued[0]}"


def test_bearer_and_pat_are_sent_as_bearer_tokens_read_from_env_or_file(monkeypatch, tmp_path):
    monkeypatch.setenv("VLLM_KEY", "vllm-key-123\n")
    (tmp_path / "pat").write_text("dapi-abc\n")
    bearer = build_token_source(EndpointAuth(bearer=SecretRef(env="VLLM_KEY")), backend="internal")
    pat = build_token_source(EndpointAuth(pat=SecretRef(file=str(tmp_path / "pat"))), backend="databricks")
    assert bearer.authorization() == "Bearer vllm-key-123"
    assert pat.authorization() == "Bearer dapi-abc"
    assert "vllm-key" not in repr(bearer) and "dapi" not in repr(pat)
    assert build_token_source(EndpointAuth(), backend="internal").authorization() is None


def test_a_token_endpoint_trickling_its_answer_cannot_hold_the_exchange_past_its_timeout(monkeypatch):
    # Headers at once, then a byte every 0.05 s: no single read times out; the answer takes 5 s.
    import time

    from opsctl.errors import OpsctlError
    from tests.fakes.slow_http import TrickleServer

    monkeypatch.setenv("DBX_SECRET", SECRET)
    body = json.dumps({"access_token": "t" * 40, "expires_in": 3600}).encode().ljust(100)
    with TrickleServer(interval=0.05, body=body) as server:
        source = DatabricksOAuthToken(settings(server), clock=SimClock(0), timeout=0.5)
        started = time.monotonic()
        with pytest.raises(OpsctlError, match="did not answer within 0.5s") as err:
            source.authorization()
        elapsed = time.monotonic() - started
    assert elapsed < 2.5  # half the 5 s the whole answer takes
    assert SECRET not in str(err.value) and source.exchanges == 0


def test_the_token_exchange_opens_its_connection_through_the_transport_seam(oauth, monkeypatch):
    import socket

    monkeypatch.setenv("DBX_SECRET", SECRET)
    opened = []

    def connect(address, timeout):
        opened.append(address)
        return socket.create_connection(address, timeout=timeout)

    source = DatabricksOAuthToken(settings(oauth), clock=SimClock(0), connect=connect)
    assert source.authorization() == f"Bearer {oauth.issued[0]}"
    port = int(oauth.url.rsplit(":", 1)[1].split("/")[0])
    assert opened == [("127.0.0.1", port)]
