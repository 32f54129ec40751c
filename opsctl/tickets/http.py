"""A JSON-over-HTTPS helper for ticket channels (`remote.http_call`): single attempts, errors mapped, secrets kept out.

Requests are built without credentials; `send` adds them (resolving the secret only then) and
`show` renders the same request for `--dry-run` with each credential header replaced by a note
saying where the secret lives. Each attempt is bounded as a whole by its timeout (connect, send,
headers and body), through the proxies and CA bundles the environment names. Retries belong to
`desk.TicketDesk`, not here.
"""

from __future__ import annotations

import dataclasses
import json as jsonlib
import time
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlencode

from opsctl import __version__
from opsctl.errors import OpsctlError, UsageError
from opsctl.remote import (
    ConnectTimeout,
    DeadlineExceeded,
    HttpAnswer,
    Redactor,
    RemoteUnavailable,
    error_for_status,
    http_call,
    network_error,
    parse_retry_after,
    render_request,
    short,
)


@dataclasses.dataclass
class ApiRequest:
    """One request as built: header names lower-case; credentials are added only by `send`."""

    method: str
    url: str
    headers: dict[str, str]
    content: bytes = b""


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

    def close(self) -> None:
        pass  # one connection per attempt: nothing is kept open between calls

    def request(self, method: str, path: str, *, json: Any = None, params: dict | None = None,
                headers: dict | None = None) -> ApiRequest:
        url = path if path.startswith(("https://", "http://")) else self.base_url + path
        if params:
            url += ("&" if "?" in url else "?") + urlencode(params)
        sent = {"accept": "application/json", "user-agent": f"opsctl/{__version__}"}
        content = b""
        if json is not None:
            content = jsonlib.dumps(json, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
            sent["content-type"] = "application/json"
        sent.update({k.lower(): v for k, v in (headers or {}).items()})
        return ApiRequest(method, url, sent, content)

    def send(self, request: ApiRequest, *, action: str, permission: str, timeout: float | None = None,
             sign: Callable[[bytes], dict[str, str]] | None = None) -> Any:
        """Send once; the decoded JSON body (None when empty), or an opsctl error."""
        from urllib.parse import urlsplit

        headers = dict(request.headers)
        headers.update({k.lower(): v for k, v in self.auth().items()})
        if sign is not None:
            headers.update({k.lower(): v for k, v in sign(request.content).items()})
        budget = timeout or self.timeout
        parts = urlsplit(request.url)
        where = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
        try:
            answer = http_call(request.method, request.url, headers=headers, body=request.content or None,
                               deadline=time.monotonic() + budget, connect_timeout=budget,
                               ca_file=str(self.ca_file) if self.ca_file else None)
        except DeadlineExceeded as exc:
            raise RemoteUnavailable(f"{self.service}: {action}: {where} did not answer within {budget:g}s",
                                    maybe_sent=not isinstance(exc, ConnectTimeout)) from None
        except UsageError:
            raise
        except OSError as exc:
            raise network_error(self.service, action, where, exc, self.redactor) from None
        if 200 <= answer.status < 300:
            if not answer.body:
                return None
            try:
                return jsonlib.loads(answer.body)
            except ValueError:
                raise OpsctlError(f"{self.service}: {action}: the answer is not JSON: "
                                  f"{self.redactor.scrub(short(_text(answer)))}") from None
        raise error_for_status(self.service, action, answer.status, credential=self.credential,
                               permission=permission, detail=self._detail(answer),
                               retry_after=parse_retry_after(answer.headers.get("retry-after")))

    def show(self, request: ApiRequest, extra_notes: dict[str, str] | None = None) -> dict:
        notes = {**self.auth_notes, **(extra_notes or {})}
        headers = dict(request.headers)
        for name in notes:
            headers[name] = "redacted"
        return render_request(request.method, request.url, headers, request.content, redactor=self.redactor,
                              secret_notes=notes)

    def _detail(self, response: HttpAnswer) -> str:
        try:
            body = jsonlib.loads(response.body)
        except ValueError:
            return self.redactor.scrub(short(_text(response)))
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
        return self.redactor.scrub(short("; ".join(p for p in parts if p) or _text(response)))


def _text(answer: HttpAnswer) -> str:
    return answer.body.decode("utf-8", errors="replace")
