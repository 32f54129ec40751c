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
from typing import Any, Callable, Iterable, Mapping

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
    refused = bool(names & {"ConnectError", "ConnectTimeout", "ConnectionRefusedError", "PoolTimeout", "ProxyError"})
    return RemoteUnavailable(f"{service}: {what}: cannot reach {url}: {type(cause).__name__}: {text}",
                             maybe_sent=not refused)


CA_BUNDLE_VARS = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")


def tls_context(ca_file=None, env: Mapping[str, str] | None = None):
    """The system's trusted CAs (OpenSSL's default paths, so `SSL_CERT_FILE` / `SSL_CERT_DIR` as
    set), plus the bundle named by `REQUESTS_CA_BUNDLE` (else `CURL_CA_BUNDLE`) and `ca_file` when
    set (a TLS-inspecting proxy, a private CA). Bundles are added to the system's, never replace it."""
    import os
    import ssl

    env = os.environ if env is None else env
    context = ssl.create_default_context()
    bundles: list[tuple[str, str]] = []
    named = next((name for name in CA_BUNDLE_VARS if env.get(name)), None)
    if named:
        bundles.append((named, env[named]))
    if ca_file:
        bundles.append(("ca_file", str(ca_file)))
    default = ssl.get_default_verify_paths().cafile  # already loaded (SSL_CERT_FILE when set)
    for where, path in bundles:
        if default and os.path.realpath(path) == os.path.realpath(default):
            continue  # the common REQUESTS_CA_BUNDLE=<the system bundle>: loaded once, not twice
        try:
            context.load_verify_locations(cafile=path)
        except (OSError, ssl.SSLError) as exc:
            raise UsageError(f"{where} {path}: cannot load it as a CA bundle: {exc}") from exc
    return context


# -- proxies, as curl reads them from the environment ---------------------------------------------

class ProxyError(OSError):
    """The proxy refused or broke the tunnel or the request (its message names no credential)."""


@dataclasses.dataclass(frozen=True)
class Proxy:
    host: str
    port: int
    authorization: str | None  # "Basic ..." from user:password in the proxy URL; never shown

    @property
    def shown(self) -> str:
        """The proxy as it may be printed: no user, no password."""
        return f"http://{self.host}:{self.port}"


def _no_proxy_match(host: str, port: int, no_proxy: str) -> bool:
    """Whether `host` is exempt by a NO_PROXY list, as curl reads one.

    Entries are separated by commas or spaces; `*` exempts every host; a name exempts itself and
    every host under it (`example.com` and `.example.com` both cover `api.example.com`, never
    `badexample.com`); an IP address matches exactly and a CIDR (`10.0.0.0/8`, `::1/128`) by
    network; `host:port` exempts that port only. Names compare case-insensitively; `localhost`
    and `127.0.0.1` are exempt only when listed (as in curl).
    """
    import ipaddress

    host = host.strip("[]").lower().rstrip(".")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for raw in no_proxy.replace(",", " ").split():
        entry = raw.strip().lower()
        if entry == "*":
            return True
        want_port = None
        if entry.startswith("["):  # [::1] or [::1]:8080
            inner, _, rest = entry[1:].partition("]")
            entry = inner
            if rest.startswith(":") and rest[1:].isdigit():
                want_port = int(rest[1:])
        elif entry.count(":") == 1:
            name, _, tail = entry.partition(":")
            if tail.isdigit():
                entry, want_port = name, int(tail)
        if want_port is not None and want_port != port:
            continue
        if "/" in entry:
            try:
                network = ipaddress.ip_network(entry, strict=False)
            except ValueError:
                continue
            if address is not None and address.version == network.version and address in network:
                return True
            continue
        try:
            entry_address = ipaddress.ip_address(entry)
        except ValueError:
            entry_address = None
        if entry_address is not None or address is not None:
            if entry_address is not None and address is not None and entry_address == address:
                return True
            continue
        entry = entry.lstrip(".").rstrip(".")
        if entry and (host == entry or host.endswith("." + entry)):
            return True
    return False


def proxy_for(url: str, env: Mapping[str, str] | None = None) -> Proxy | None:
    """The proxy for `url` from the environment, or None for a direct connection.

    `https_proxy`/`HTTPS_PROXY` for https URLs, `http_proxy`/`HTTP_PROXY` for http, else
    `all_proxy`/`ALL_PROXY` (the lower-case name wins, as in curl); `no_proxy`/`NO_PROXY` exempts
    hosts (`_no_proxy_match`). A proxy is reached over plain HTTP (`http://`, or no scheme); an
    `https://` or SOCKS proxy is refused (exit 2) rather than silently bypassed.
    """
    import base64
    import os
    from urllib.parse import unquote, urlsplit

    env = os.environ if env is None else env
    parts = urlsplit(url)
    scheme = parts.scheme.lower()

    def first(*names: str) -> str:
        return next((env[n] for n in names if env.get(n, "").strip()), "").strip()

    value = first(f"{scheme}_proxy", f"{scheme.upper()}_PROXY", "all_proxy", "ALL_PROXY")
    if not value:
        return None
    host = parts.hostname or ""
    port = parts.port or (443 if scheme == "https" else 80)
    if _no_proxy_match(host, port, first("no_proxy", "NO_PROXY")):
        return None
    proxied = urlsplit(value if "://" in value else "http://" + value)
    try:
        proxy_port = proxied.port or 1080
    except ValueError:
        proxy_port = -1
    if proxied.scheme.lower() != "http" or not proxied.hostname or proxy_port < 0:
        shown = f"{proxied.scheme}://{proxied.hostname or ''}"
        raise UsageError(f"proxy {shown} for {scheme} URLs: only http:// proxies are supported",
                         hint="set HTTPS_PROXY / HTTP_PROXY to http://host:port (a CONNECT tunnel carries https)")
    authorization = None
    if proxied.username is not None:
        pair = f"{unquote(proxied.username)}:{unquote(proxied.password or '')}".encode()
        authorization = "Basic " + base64.b64encode(pair).decode()
    return Proxy(proxied.hostname, proxy_port, authorization)


def _open_tunnel(sock: "_DeadlineSocket", proxy: Proxy, host: str, port: int) -> None:
    """CONNECT host:port through `proxy` on `sock`, every write and read under the call's deadline."""
    import http.client

    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}"]
    if proxy.authorization:
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    response = http.client.HTTPResponse(sock, method="CONNECT")  # type: ignore[arg-type]
    try:
        response.begin()
    except http.client.HTTPException as exc:
        raise ProxyError(f"proxy {proxy.shown}: broken answer to CONNECT {target}: {type(exc).__name__}") from None
    if response.status == 407:
        raise UsageError(f"proxy {proxy.shown} requires authentication for CONNECT {target} (HTTP 407)",
                         hint="put user:password in the proxy URL (HTTPS_PROXY=http://user:password@host:port)"
                              if not proxy.authorization else "check the user and password in the proxy URL")
    if response.status != 200:
        raise ProxyError(f"proxy {proxy.shown} refused CONNECT {target}: HTTP {response.status} {short(response.reason, 80)}")


# -- one HTTP call under an overall deadline ------------------------------------------------------

class DeadlineExceeded(TimeoutError):
    """The whole call (connect, send, headers and body) ran past its deadline."""


class ConnectTimeout(DeadlineExceeded):
    """The deadline passed before a connection was open: surely nothing was sent."""


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


Connector = Callable[[tuple[str, int], float], Any]


def http_call(method: str, url: str, *, headers: Mapping[str, str] | None = None, body: bytes | None = None,
              deadline: float, connect_timeout: float = 10.0, ca_file: str | None = None,
              verify_tls: bool = True, env: Mapping[str, str] | None = None,
              connect: Connector | None = None) -> HttpAnswer:
    """One HTTP(S) request that returns or raises by `deadline` (a time.monotonic() instant).

    Proxies and CA bundles come from `env` (default `os.environ`) as users set them for curl:
    an https URL goes through a CONNECT tunnel, an http URL is sent to the proxy in absolute form
    (`proxy_for`, `tls_context`). The CONNECT exchange, the TLS handshake and every send and read
    after it are bounded by what is left of the deadline.

    `connect((host, port), timeout)` opens the TCP connection (default `socket.create_connection`):
    the transport seam, so a test can count or redirect connections without a second HTTP stack.

    Raises DeadlineExceeded when the deadline passes, OSError (ProxyError for a proxy's refusal)
    for network failures, UsageError for a configuration the call cannot use (a bad CA bundle or
    proxy URL, a proxy demanding credentials); the caller turns the first two into its own errors.
    """
    import http.client
    import socket
    import ssl
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    https = parts.scheme == "https"
    host, port = parts.hostname or "", parts.port or (443 if https else 80)
    proxy = proxy_for(url, env)
    left = deadline - time.monotonic()
    if left <= 0:
        raise ConnectTimeout("deadline exceeded before the call")
    opener: Connector = connect or socket.create_connection
    context = tls_context(ca_file, env) if https else None  # a bad bundle fails before any connection
    try:
        sock = opener((proxy.host, proxy.port) if proxy else (host, port), min(connect_timeout, left))
    except TimeoutError as exc:
        raise ConnectTimeout("connect timed out") from exc
    try:
        if proxy and https:
            _open_tunnel(_DeadlineSocket(sock, deadline), proxy, host, port)
        if context is not None:
            if not verify_tls:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            left = deadline - time.monotonic()
            if left <= 0:
                raise DeadlineExceeded("deadline exceeded before the TLS handshake")
            sock.settimeout(left)  # the handshake as a whole is bounded by one socket timeout
            sock = context.wrap_socket(sock, server_hostname=host)
        conn = http.client.HTTPConnection(host, port)
        conn.sock = _DeadlineSocket(sock, deadline)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        sent = dict(headers or {})
        if proxy and not https:
            path = f"http://{parts.netloc.rpartition('@')[2]}{path}"  # absolute form, no userinfo
            if proxy.authorization:
                sent["Proxy-Authorization"] = proxy.authorization
        conn.request(method, path, body=body, headers=sent)
        response = conn.getresponse()
        if proxy and not https and response.status == 407:
            raise UsageError(f"proxy {proxy.shown} requires authentication for {parts.scheme}://{host}:{port} (HTTP 407)",
                             hint="put user:password in the proxy URL (HTTP_PROXY=http://user:password@host:port)")
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
