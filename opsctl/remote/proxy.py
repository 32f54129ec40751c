"""Proxies, as curl reads them from the environment (HTTP(S)_PROXY, ALL_PROXY, NO_PROXY)."""

from __future__ import annotations

import dataclasses
from typing import Mapping

from opsctl.errors import UsageError


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
