"""A loopback OAuth 2.0 token endpoint like a Databricks workspace's `/oidc/v1/token`.

Client credentials grant only: the client id and secret in HTTP basic auth or in the form,
grant_type=client_credentials, scope=all-apis. Issues opaque tokens with `expires_in`, counts the
exchanges, and tells an API fake which tokens it issued.
"""

from __future__ import annotations

import base64
import secrets
from urllib.parse import parse_qs

from tests.fakes.loopback import LoopbackServer, Request, Response

TOKEN_PATH = "/oidc/v1/token"


class OAuthFake(LoopbackServer):
    def __init__(self, client_id: str, client_secret: str, *, expires_in: int = 3600, scope: str = "all-apis"):
        super().__init__()
        self.client_id = client_id
        self.client_secret = client_secret
        self.expires_in = expires_in
        self.scope = scope
        self.issued: list[str] = []
        self.refused = 0

    @property
    def exchanges(self) -> int:
        return len(self.issued)

    def accepts(self, authorization: str | None) -> bool:
        """For an API fake: is this `Authorization` header a token issued here?"""
        with self.lock:
            return authorization is not None and authorization.removeprefix("Bearer ") in self.issued

    def _credentials(self, request: Request, form: dict) -> tuple[str | None, str | None]:
        header = request.headers.get("authorization", "")
        if header.startswith("Basic "):
            decoded = base64.b64decode(header[6:]).decode()
            client_id, _, secret = decoded.partition(":")
            return client_id, secret
        return form.get("client_id"), form.get("client_secret")

    def handle(self, request: Request) -> Response:
        if request.path != TOKEN_PATH:
            return Response(404, {"error": "not_found"})
        if request.method != "POST":
            return Response(405, {"error": "invalid_request"})
        if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            return Response(400, {"error": "invalid_request", "error_description": "form body expected"})
        form = {k: v[0] for k, v in parse_qs(request.body.decode()).items()}
        if form.get("grant_type") != "client_credentials":
            return Response(400, {"error": "unsupported_grant_type"})
        client_id, secret = self._credentials(request, form)
        if client_id != self.client_id or secret is None or not secrets.compare_digest(secret, self.client_secret):
            with self.lock:
                self.refused += 1
            return Response(401, {"error": "invalid_client", "error_description": "Client authentication failed"})
        if form.get("scope") != self.scope:
            return Response(400, {"error": "invalid_scope"})
        token = f"dbx-oauth-{secrets.token_hex(12)}"
        with self.lock:
            self.issued.append(token)
        return Response(200, {"access_token": token, "token_type": "Bearer", "expires_in": self.expires_in,
                              "scope": self.scope})
