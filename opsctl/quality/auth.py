"""Credentials for the backends' OpenAI-compatible APIs: one TokenSource per auth method.

  none              no Authorization header (a local vLLM without --api-key)
  bearer            a static token, e.g. vLLM's --api-key
  pat               a Databricks personal access token (sent as a bearer token too)
  databricks_oauth  OAuth machine-to-machine: the service principal's client id and secret are
                    exchanged at `<workspace>/oidc/v1/token` (grant_type=client_credentials,
                    scope=all-apis) for a token that lives about an hour; it is cached in memory
                    (optionally in the state dir, mode 0600, written atomically) and exchanged again
                    `refresh_margin` seconds before it expires. The clock is injectable so refresh is
                    tested in simulated time.

Token and secret values never appear in messages, logs or reprs.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from opsctl.errors import OpsctlError, UsageError

if TYPE_CHECKING:
    from opsctl.config import DatabricksOAuth, EndpointAuth, SecretRef


class TokenSource(Protocol):
    description: str

    def authorization(self) -> str | None:
        """The Authorization header value, or None to send none."""
        ...

    def invalidate(self, header: str) -> None:
        """The API refused `header` (401): forget it if it is still the current one."""
        ...


class NoAuth:
    description = "no auth"

    def authorization(self) -> str | None:
        return None

    def invalidate(self, header: str) -> None:
        pass


class StaticToken:
    """A bearer token or personal access token read from env or a file on first use."""

    def __init__(self, ref: "SecretRef", kind: str):
        self._ref = ref
        self._value: str | None = None
        self.description = f"{kind} from {ref.describe()}"

    def authorization(self) -> str | None:
        if self._value is None:
            self._value = self._ref.resolve()
        return f"Bearer {self._value}"

    def invalidate(self, header: str) -> None:
        pass  # a static token cannot be renewed; the 401 surfaces as an error

    def __repr__(self) -> str:
        return f"StaticToken({self.description})"


class DatabricksOAuthToken:
    """Client-credentials tokens from a Databricks workspace, refreshed before they expire."""

    def __init__(self, settings: "DatabricksOAuth", *, clock=None, cache_file: Path | None = None,
                 timeout: float = 10.0, verify_tls: bool = True, connect=None):
        from opsctl.clock import WallClock

        self.settings = settings
        self.clock = clock or WallClock()
        self.cache_file = cache_file if settings.persist else None
        self.timeout = timeout
        self.verify_tls = verify_tls
        self.connect = connect  # remote.http_call's transport seam (None: a TCP connection)
        self.description = f"Databricks OAuth M2M for client {settings.client_id} at {settings.endpoint}"
        self.exchanges = 0
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expires_at = 0.0
        self._margin = settings.refresh_margin
        if self.cache_file is not None:
            self._load_cache()

    def __repr__(self) -> str:
        return f"DatabricksOAuthToken({self.settings.client_id} at {self.settings.endpoint})"

    def authorization(self) -> str | None:
        with self._lock:
            if self._token is None or self.clock.now() >= self._expires_at - self._margin:
                self._exchange()
            return f"Bearer {self._token}"

    def invalidate(self, header: str) -> None:
        with self._lock:
            if self._token is not None and header == f"Bearer {self._token}":
                self._token = None

    # -- the exchange -------------------------------------------------------------------------

    def _exchange(self) -> None:
        import base64
        import time
        from urllib.parse import urlencode

        from opsctl.remote import DeadlineExceeded, http_call

        secret = self.settings.client_secret.resolve()
        url = self.settings.endpoint
        issued_at = self.clock.now()
        basic = base64.b64encode(f"{self.settings.client_id}:{secret}".encode()).decode()
        form = urlencode({"grant_type": "client_credentials", "scope": self.settings.scope}).encode()
        try:
            response = http_call(
                "POST", url, body=form, deadline=time.monotonic() + self.timeout, connect_timeout=self.timeout,
                verify_tls=self.verify_tls, connect=self.connect,
                headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                         "Content-Type": "application/x-www-form-urlencoded"},
            )
        except DeadlineExceeded as exc:
            raise OpsctlError(
                f"the OAuth token endpoint {url} did not answer within {self.timeout:g}s",
                hint="check databricks_oauth.workspace_url / token_url and the network",
            ) from exc
        except OSError as exc:
            raise OpsctlError(
                f"cannot reach the OAuth token endpoint {url}: {type(exc).__name__}",
                hint="check databricks_oauth.workspace_url / token_url and the network",
            ) from exc
        if response.status in (400, 401, 403):
            raise UsageError(
                f"the OAuth token endpoint {url} refused client {self.settings.client_id} "
                f"(HTTP {response.status}{_oauth_error(response.body)})",
                hint="check the client id and the secret's env var or file (the value is never shown)",
            )
        if response.status >= 300:
            raise OpsctlError(f"the OAuth token endpoint {url} answered HTTP {response.status}")
        try:
            body = json.loads(response.body)
            token = body["access_token"]
            # Databricks tokens live an hour; if the field is missing, assume no longer than that.
            expires_in = float(body.get("expires_in", 3600))
        except (ValueError, KeyError, TypeError) as exc:
            raise OpsctlError(f"the OAuth token endpoint {url} answered without an access_token") from exc
        if not isinstance(token, str) or not token or expires_in <= 0:
            raise OpsctlError(f"the OAuth token endpoint {url} answered an unusable token")
        self.exchanges += 1
        self._token = token
        self._expires_at = issued_at + expires_in
        # A token shorter-lived than the margin would be exchanged on every request.
        self._margin = min(self.settings.refresh_margin, expires_in / 2)
        if self.cache_file is not None:
            self._save_cache()

    # -- the optional on-disk cache -----------------------------------------------------------

    def _cache_key(self) -> dict:
        return {"token_url": self.settings.endpoint, "client_id": self.settings.client_id,
                "scope": self.settings.scope}

    def _load_cache(self) -> None:
        if self.cache_file is None:
            return
        try:
            data = json.loads(self.cache_file.read_text())
        except (OSError, ValueError):
            return
        if not isinstance(data, dict) or any(data.get(k) != v for k, v in self._cache_key().items()):
            return
        token, expires_at = data.get("access_token"), data.get("expires_at")
        if isinstance(token, str) and isinstance(expires_at, (int, float)):
            self._token, self._expires_at = token, float(expires_at)
            self._margin = min(self.settings.refresh_margin, float(data.get("margin", self._margin)))

    def _save_cache(self) -> None:
        if self.cache_file is None:
            return
        data = dict(self._cache_key(), access_token=self._token, expires_at=self._expires_at, margin=self._margin)
        try:
            write_private_atomic(self.cache_file, json.dumps(data))
        except OSError as exc:
            # The cache only saves an exchange; losing it is not worth failing the probe.
            import sys

            print(f"warning: cannot cache the OAuth token in {self.cache_file.parent}: {exc.strerror}", file=sys.stderr)


def write_private_atomic(path: Path, text: str) -> None:
    """Write a file readable only by its owner, whole or not at all."""
    from opsctl.statefile import write_text_atomic

    Path(path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_text_atomic(path, text, mode=0o600)


def _oauth_error(body: bytes) -> str:
    """The RFC 6749 error code, never the body as a whole (it could echo a credential)."""
    try:
        code = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return ""
    return f": {code}" if isinstance(code, str) and code.replace("_", "").isalnum() else ""


def build_token_source(auth: "EndpointAuth", *, backend: str, state_dir: Path | None = None, clock=None,
                       timeout: float = 10.0, verify_tls: bool = True, connect=None) -> TokenSource:
    """The TokenSource for an endpoint's auth method. Unknown methods fail closed."""
    method = auth.method
    if method == "none":
        return NoAuth()
    if method == "bearer" and auth.bearer is not None:
        return StaticToken(auth.bearer, "bearer token")
    if method == "pat" and auth.pat is not None:
        return StaticToken(auth.pat, "personal access token")
    if method == "databricks_oauth" and auth.databricks_oauth is not None:
        cache = state_dir / "tokens" / f"{backend}.json" if state_dir is not None else None
        return DatabricksOAuthToken(auth.databricks_oauth, clock=clock, cache_file=cache, timeout=timeout,
                                    verify_tls=verify_tls, connect=connect)
    raise UsageError(f"unknown auth method {method!r} (known: none, bearer, pat, databricks_oauth)")
