"""Talking to remote services safely, one concern per module:

    remote.errors   HTTP status and network failures -> opsctl errors (exit codes), Retry-After
    remote.redact   secret redaction and `--dry-run` request rendering
    remote.tls      the trusted CAs (system + REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE + ca_file)
    remote.proxy    the proxy for a URL, from the environment as curl reads it
    remote.http     `http_call`: one request under an overall deadline (CONNECT tunnel, TLS)

Callers import from `opsctl.remote`; the names below are the package's whole surface.
"""

from opsctl.remote.errors import (
    REASONS, RemoteAuthError, RemoteConflict, RemoteNotFound, RemoteRejected, RemoteUnavailable, error_for_status,
    network_error, parse_retry_after,
)
from opsctl.remote.http import MAX_BODY, ConnectTimeout, Connector, DeadlineExceeded, HttpAnswer, http_call
from opsctl.remote.proxy import Proxy, ProxyError, _no_proxy_match, proxy_for
from opsctl.remote.redact import SENSITIVE_HEADERS, Redactor, render_request, short
from opsctl.remote.tls import CA_BUNDLE_VARS, tls_context

__all__ = [
    "CA_BUNDLE_VARS", "MAX_BODY", "REASONS", "SENSITIVE_HEADERS", "ConnectTimeout", "Connector", "DeadlineExceeded",
    "HttpAnswer", "Proxy", "ProxyError", "Redactor", "RemoteAuthError", "RemoteConflict", "RemoteNotFound",
    "RemoteRejected", "RemoteUnavailable", "_no_proxy_match", "error_for_status", "http_call", "network_error",
    "parse_retry_after", "proxy_for", "render_request", "short", "tls_context",
]
