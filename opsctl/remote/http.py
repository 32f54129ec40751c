"""One HTTP(S) call under an overall deadline, through the proxy the environment names."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Mapping

from opsctl.errors import UsageError
from opsctl.remote.proxy import Proxy, ProxyError, proxy_for
from opsctl.remote.redact import short
from opsctl.remote.tls import tls_context


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
