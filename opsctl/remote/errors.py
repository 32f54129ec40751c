"""HTTP status and network failures as opsctl errors (each carries its exit code).

    RemoteUnavailable (1)   429, 5xx, network: worth retrying; `maybe_sent` tells whether the
                            server may have acted on the request (5xx, timeout) or surely did not (429)
    RemoteAuthError (2)     401/403: names the credential (where it lives, never its value) and the
                            permission that is missing
    RemoteRejected (2)      other 4xx: the request (usually the config mapping) is wrong
    RemoteNotFound (3)      404
    RemoteConflict (5)      409
"""

from __future__ import annotations

import email.utils
import time
from typing import TYPE_CHECKING

from opsctl.errors import ConflictError, NoDataError, OpsctlError, UsageError
from opsctl.remote.redact import short

if TYPE_CHECKING:
    from opsctl.remote.redact import Redactor


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
    refused = bool(names & {"ConnectError", "ConnectTimeout", "ConnectionRefusedError", "PoolTimeout", "ProxyError"})
    return RemoteUnavailable(f"{service}: {what}: cannot reach {url}: {type(cause).__name__}: {text}",
                             maybe_sent=not refused)
