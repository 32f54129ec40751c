"""A JSON-over-HTTPS helper for ticket channels (httpx): single attempts, errors mapped, secrets kept out.

Requests are built without credentials; `send` adds them (resolving the secret only then) and
`show` renders the same request for `--dry-run` with each credential header replaced by a note
saying where the secret lives. Retries belong to `desk.TicketDesk`, not here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from opsctl import __version__
from opsctl.errors import OpsctlError
from opsctl.remote import (
    Redactor,
    error_for_status,
    network_error,
    parse_retry_after,
    render_request,
    short,
    tls_context,
)


class HttpApi:
    def __init__(self, service: str, base_url: str, *, auth: Callable[[], dict[str, str]],
                 auth_notes: dict[str, str], credential: str, redactor: Redactor, ca_file: Path | None = None,
                 timeout: float = 10.0):
        self.service = service
        self.base_url = base_url.rstrip("/")
        self.auth = auth
        self.auth_notes = auth_notes
        self.credential = credential
        self.redactor = redactor
        self.ca_file = ca_file
        self.timeout = timeout
        self._client = None

    def client(self):
        if self._client is None:
            import httpx

            verify: Any = tls_context(self.ca_file) if self.ca_file else True
            self._client = httpx.Client(verify=verify, timeout=self.timeout, follow_redirects=False,
                                        headers={"User-Agent": f"opsctl/{__version__}", "Accept": "application/json"})
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def request(self, method: str, path: str, *, json: Any = None, params: dict | None = None,
                headers: dict | None = None):
        url = path if path.startswith("https://") else self.base_url + path
        return self.client().build_request(method, url, json=json, params=params, headers=headers)

    def send(self, request, *, action: str, permission: str, timeout: float | None = None,
             sign: Callable[[bytes], dict[str, str]] | None = None) -> Any:
        """Send once; the decoded JSON body (None when empty), or an opsctl error."""
        import httpx

        request.headers.update(self.auth())
        if sign is not None:
            request.headers.update(sign(request.content))
        request.extensions["timeout"] = httpx.Timeout(timeout or self.timeout).as_dict()
        try:
            response = self.client().send(request)
        except httpx.TransportError as exc:
            where = f"{request.url.scheme}://{request.url.netloc.decode()}"
            raise network_error(self.service, action, where, exc, self.redactor) from None
        if response.is_success:
            if not response.content:
                return None
            try:
                return response.json()
            except ValueError:
                raise OpsctlError(f"{self.service}: {action}: the answer is not JSON: "
                                  f"{self.redactor.scrub(short(response.text))}") from None
        raise error_for_status(self.service, action, response.status_code, credential=self.credential,
                               permission=permission, detail=self._detail(response),
                               retry_after=parse_retry_after(response.headers.get("retry-after")))

    def show(self, request, extra_notes: dict[str, str] | None = None) -> dict:
        notes = {**self.auth_notes, **(extra_notes or {})}
        headers = dict(request.headers)
        for name in notes:
            headers[name] = "redacted"
        return render_request(request.method, str(request.url), headers, request.content, redactor=self.redactor,
                              secret_notes=notes)

    def _detail(self, response) -> str:
        try:
            body = response.json()
        except ValueError:
            return self.redactor.scrub(short(response.text))
        parts: list[str] = []

        def walk(value):
            if isinstance(value, str):
                parts.append(value)
            elif isinstance(value, list):
                for v in value:
                    walk(v)
            elif isinstance(value, dict):
                for k in ("error", "message", "description", "errorMessage", "errorMessages", "errors", "details"):
                    if k not in value:
                        continue
                    if k in ("details", "errors") and isinstance(value[k], dict):  # {field: [problems]}
                        for v in value[k].values():
                            walk(v)
                    else:
                        walk(value[k])

        walk(body)
        return self.redactor.scrub(short("; ".join(p for p in parts if p) or response.text))
