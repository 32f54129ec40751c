"""Talking to remote services safely: HTTP status -> opsctl error, secret redaction, request rendering.

    RemoteUnavailable (1)   429, 5xx, network: worth retrying; `maybe_sent` tells whether the
                            server may have acted on the request (5xx, timeout) or surely did not (429)
    RemoteAuthError (2)     401/403: names the credential (where it lives, never its value) and the
                            permission that is missing
    RemoteRejected (2)      other 4xx: the request (usually the config mapping) is wrong
    RemoteNotFound (3)      404
    RemoteConflict (5)      409
"""

from __future__ import annotations

import dataclasses
import email.utils
import json
import time
from typing import Iterable, Mapping

from opsctl.errors import ConflictError, NoDataError, OpsctlError, UsageError


class RemoteUnavailable(OpsctlError):
    exit_code = 1

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None,
                 maybe_sent: bool = True, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.status = status
        self.retry_after = retry_after
        self.maybe_sent = maybe_sent


class RemoteAuthError(UsageError):
    def __init__(self, message: str, *, status: int, permission: str, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.status = status
        self.permission = permission


class RemoteRejected(UsageError):
    pass


class RemoteNotFound(NoDataError):
    pass


class RemoteConflict(ConflictError):
    pass


REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 409: "Conflict",
           422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
           502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}


def error_for_status(service: str, action: str, status: int, *, credential: str, permission: str,
                     detail: str = "", retry_after: float | None = None) -> OpsctlError:
    """The opsctl error for a failed HTTP call. `detail` must already be scrubbed of secrets."""
    reason = f"HTTP {status} {REASONS.get(status, '')}".rstrip()
    tail = f": {detail}" if detail else ""
    if status == 401:
        return RemoteAuthError(
            f"{service} rejected the credential for {action} ({reason}){tail}", status=status, permission=permission,
            hint=f"check {credential}: it must hold a valid, active key with permission to {permission}",
        )
    if status == 403:
        return RemoteAuthError(
            f"{service} refused {action} ({reason}): the credential lacks permission to {permission}{tail}",
            status=status, permission=permission,
            hint=f"grant that permission to the key in {credential}, or configure a key that has it",
        )
    if status == 404:
        return RemoteNotFound(f"{service}: {action}: not found ({reason}){tail}")
    if status == 409:
        return RemoteConflict(f"{service}: {action}: conflict with the current state ({reason}){tail}")
    if status == 429:
        return RemoteUnavailable(f"{service}: {action}: rate limited ({reason}){tail}", status=status,
                                 retry_after=retry_after, maybe_sent=False)
    if status >= 500:
        return RemoteUnavailable(f"{service}: {action}: server error ({reason}){tail}", status=status,
                                 retry_after=retry_after, maybe_sent=True)
    return RemoteRejected(
        f"{service}: {action}: request rejected ({reason}){tail}",
        hint="check the provider settings and the vendor's category/severity mapping in the config",
    )


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class Redactor:
    """Replaces every known secret value in a text with `***`."""

    def __init__(self, secrets: Iterable[str] = ()):
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def add(self, secret: str) -> None:
        if secret and secret not in self._secrets:
            self._secrets = sorted([*self._secrets, secret], key=len, reverse=True)

    def scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


def short(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


SENSITIVE_HEADERS = ("authorization", "proxy-authorization", "cookie", "x-api-key", "x-opsctl-signature")


def render_request(method: str, url: str, headers: Mapping[str, str], body: bytes | None, *,
                   redactor: Redactor, secret_notes: Mapping[str, str] | None = None) -> dict:
    """One HTTP request as data for `--dry-run`: sensitive headers and known secrets redacted.

    `secret_notes` maps a header name to a description of where its secret comes from, shown in
    place of the value (e.g. "Token token=<redacted: env:PAGERDUTY_API_TOKEN>").
    """
    notes = {k.lower(): v for k, v in (secret_notes or {}).items()}
    shown = {}
    for name, value in headers.items():
        low = name.lower()
        if low in SENSITIVE_HEADERS:
            shown[name] = notes.get(low, "<redacted>")
        else:
            shown[name] = redactor.scrub(value)
    out: dict = {"method": method, "url": redactor.scrub(url), "headers": shown}
    if body:
        text = redactor.scrub(body.decode("utf-8", errors="replace"))
        try:
            out["json"] = json.loads(text)
        except ValueError:
            out["body"] = text
    return out


def network_error(service: str, what: str, url: str, exc: BaseException,
                  redactor: "Redactor | None" = None) -> OpsctlError:
    """The opsctl error for a failure below HTTP (httpx, httpx2 or socket errors, found by class name).

    An untrusted certificate is a configuration problem (exit 2, not retried); a refused or
    timed-out connection surely sent nothing; anything later (read timeout, reset) may have.
    """
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 10:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    import ssl

    for e in chain:
        if isinstance(e, ssl.SSLCertVerificationError):
            return UsageError(
                f"{service}: {what}: the TLS certificate of {url} is not trusted ({e.verify_message})",
                hint="set ca_file in this provider's config to the CA bundle that signed it",
            )
    names = {type(e).__name__ for e in chain}
    cause = chain[-1]
    text = short(str(cause) or type(cause).__name__, 160)
    if redactor is not None:
        text = redactor.scrub(text)
    refused = bool(names & {"ConnectError", "ConnectTimeout", "ConnectionRefusedError", "PoolTimeout"})
    return RemoteUnavailable(f"{service}: {what}: cannot reach {url}: {type(cause).__name__}: {text}",
                             maybe_sent=not refused)


def tls_context(ca_file=None):
    """The system's trusted CAs, plus `ca_file` when set (a TLS-inspecting proxy, a private CA)."""
    import ssl

    context = ssl.create_default_context()
    if ca_file:
        try:
            context.load_verify_locations(cafile=str(ca_file))
        except (OSError, ssl.SSLError) as exc:
            raise UsageError(f"ca_file {ca_file}: cannot load it as a CA bundle: {exc}") from exc
    return context


# -- one HTTP call under an overall deadline ------------------------------------------------------

class DeadlineExceeded(TimeoutError):
    """The whole call (connect, send, headers and body) ran past its deadline."""


class _DeadlineSocket:
    """A socket whose every send and receive is bounded by what is left of one deadline.

    A socket timeout bounds a single read, so a server that trickles a byte a second never trips
    it; re-arming the timeout from the deadline before each read bounds the whole exchange.
    """

    def __init__(self, sock, deadline: float):
        self._sock = sock
        self._deadline = deadline

    def _arm(self) -> None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded("deadline exceeded")
        self._sock.settimeout(left)

    def sendall(self, data) -> None:
        self._arm()
        self._sock.sendall(data)

    def recv_into(self, buffer, nbytes: int = 0) -> int:
        self._arm()
        try:
            return self._sock.recv_into(buffer, nbytes)
        except TimeoutError as exc:
            raise DeadlineExceeded("deadline exceeded") from exc

    def makefile(self, mode: str = "rb", *args, **kwargs):
        import io

        return io.BufferedReader(_DeadlineReader(self))

    def close(self) -> None:
        pass  # http.client closes early on `Connection: close`; the caller closes the real socket

    def __getattr__(self, name):
        return getattr(self._sock, name)


class _DeadlineReader:
    """The raw stream http.client reads a response from (through a BufferedReader)."""

    def __init__(self, sock: _DeadlineSocket):
        self._sock = sock
        self.closed = False

    def readinto(self, buffer) -> int:
        return self._sock.recv_into(buffer)

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True

    def flush(self) -> None:
        pass


@dataclasses.dataclass(frozen=True)
class HttpAnswer:
    status: int
    headers: dict
    body: bytes


MAX_BODY = 256 * 1024 * 1024


def http_call(method: str, url: str, *, headers: Mapping[str, str] | None = None, body: bytes | None = None,
              deadline: float, connect_timeout: float = 10.0, ca_file: str | None = None,
              verify_tls: bool = True) -> HttpAnswer:
    """One HTTP(S) request that returns or raises by `deadline` (a time.monotonic() instant).

    Raises DeadlineExceeded when the deadline passes, OSError for network failures; the
    caller turns those into its own errors.
    """
    import http.client
    import socket
    import ssl
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    left = deadline - time.monotonic()
    if left <= 0:
        raise DeadlineExceeded("deadline exceeded before the call")
    try:
        sock = socket.create_connection((host, port), timeout=min(connect_timeout, left))
    except TimeoutError as exc:
        raise DeadlineExceeded("connect timed out") from exc
    try:
        if parts.scheme == "https":
            context = tls_context(ca_file)
            if not verify_tls:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            sock = context.wrap_socket(sock, server_hostname=host)
        conn = http.client.HTTPConnection(host, port)
        conn.sock = _DeadlineSocket(sock, deadline)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        conn.request(method, path, body=body, headers=dict(headers or {}))
        response = conn.getresponse()
        length = response.getheader("Content-Length")
        if length and length.isdigit() and int(length) > MAX_BODY:
            raise OSError(f"answer of {int(length)} bytes is larger than {MAX_BODY}")
        data = response.read(MAX_BODY + 1)
        if len(data) > MAX_BODY:
            raise OSError(f"answer larger than {MAX_BODY} bytes")
        return HttpAnswer(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
    except socket.timeout as exc:
        raise DeadlineExceeded("deadline exceeded") from exc
    finally:
        sock.close()
