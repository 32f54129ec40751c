"""Prometheus credentials come from env or a file, reach the server, and never reach the output."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import write_config

# bcrypt of "test", the example in Prometheus' web configuration documentation.
WEB_CONFIG = "basic_auth_users:\n  admin: $2b$12$hNf2lSsxfm0.i4a.1kVpSOVyBCfIB51VRjgBUyv6kdnyTlgWj81Ay\n"


def auth_config(tmp_path, url, auth_yaml):
    cfg = write_config(tmp_path, prometheus_url=url)
    cfg.write_text(cfg.read_text().replace("timeout: 5,", f"timeout: 5, auth: {auth_yaml},"))
    return cfg


@pytest.mark.prometheus
def test_basic_auth_password_from_a_file_is_accepted_and_never_printed(opsctl, tmp_path, prometheus_factory):
    server = prometheus_factory(web_config=WEB_CONFIG)
    secret = tmp_path / "password"
    secret.write_text("test\n")
    cfg = auth_config(tmp_path, server.url, f'{{username: admin, password: {{file: "{secret}"}}}}')
    result = opsctl("--config", str(cfg), "slo", "report", "--source", "prometheus", "-o", "json")
    # Authenticated, the empty server answers with no series: unknown, exit 3, not an auth error.
    assert result.exit_code == 3, result.output
    assert {r["status"] for r in json.loads(result.stdout)} == {"unknown"}
    shown = opsctl("--config", str(cfg), "config", "show", "-o", "json")
    assert json.loads(shown.stdout)["metrics"]["prometheus"]["auth"] == {
        "bearer_token": None, "username": "admin", "password": {"file": str(secret)}}


@pytest.mark.prometheus
def test_wrong_password_is_a_clear_credentials_error(opsctl, tmp_path, prometheus_factory):
    server = prometheus_factory(web_config=WEB_CONFIG)
    cfg = auth_config(tmp_path, server.url, "{username: admin, password: {env: PROM_PASSWORD}}")
    result = opsctl("--config", str(cfg), "slo", "report", "--source", "prometheus",
                    env={"PROM_PASSWORD": "wrong-secret-value"})
    assert result.exit_code == 2
    assert "refused the credentials" in result.stderr
    assert "wrong-secret-value" not in result.output


def test_bearer_token_from_env_is_sent_as_authorization_header(opsctl, tmp_path):
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self):
            seen.append(self.headers.get("Authorization"))
            body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        cfg = auth_config(tmp_path, url, "{bearer_token: {env: PROM_TOKEN}}")
        result = opsctl("--config", str(cfg), "slo", "report", "--source", "prometheus",
                        env={"PROM_TOKEN": "tok-123-secret"})
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 3
    assert seen and set(seen) == {"Bearer tok-123-secret"}
    assert "tok-123-secret" not in result.output


def test_missing_secret_env_is_a_usage_error_naming_the_variable(opsctl, tmp_path):
    cfg = auth_config(tmp_path, "http://127.0.0.1:9", "{bearer_token: {env: PROM_TOKEN_UNSET}}")
    result = opsctl("--config", str(cfg), "slo", "report", "--source", "prometheus")
    assert result.exit_code == 2
    assert "PROM_TOKEN_UNSET" in result.stderr
