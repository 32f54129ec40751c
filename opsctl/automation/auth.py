"""Who may call the webhooks: a shared token for Alertmanager, HMAC signatures for PagerDuty.

Alertmanager sends `Authorization: Bearer <token>` (http_config.authorization) or basic auth
(http_config.basic_auth, the token as the password). PagerDuty signs each webhook v3 body with
HMAC-SHA256 under the subscription's secret and sends `X-PagerDuty-Signature: v1=<hex>[,v1=<hex>...]`,
one entry per active secret while a secret rotates; any entry that matches any configured secret
passes. Every comparison is constant time (`hmac.compare_digest`), and every candidate is checked
even after a match, so timing says nothing about which secret or entry matched.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass
from enum import Enum

MAX_SIGNATURE_ENTRIES = 16


class Verdict(Enum):
    OK = "ok"
    MISSING = "missing"  # no credentials: 401
    INVALID = "invalid"  # credentials that do not verify: 403


@dataclass(frozen=True)
class TokenAuth:
    """Bearer token or basic auth (username + the token as password) for /v1/alertmanager."""

    token: bytes
    username: bytes = b"alertmanager"

    def __post_init__(self) -> None:
        if len(self.token) < 16:
            raise ValueError("the webhook token must be at least 16 characters")

    @classmethod
    def of(cls, token: str, username: str = "alertmanager") -> "TokenAuth":
        return cls(token.encode(), username.encode())

    def check(self, authorization: str | None) -> Verdict:
        if not authorization:
            return Verdict.MISSING
        scheme, _, credentials = authorization.strip().partition(" ")
        scheme = scheme.lower()
        given = credentials.strip().encode("latin-1", "replace")
        if scheme == "bearer":
            return Verdict.OK if hmac.compare_digest(given, self.token) else Verdict.INVALID
        if scheme == "basic":
            try:
                decoded = base64.b64decode(given, validate=True)
            except (binascii.Error, ValueError):
                return Verdict.INVALID
            user, sep, password = decoded.partition(b":")
            # Both comparisons always run: no early exit on a wrong user name.
            user_ok = hmac.compare_digest(user, self.username)
            password_ok = hmac.compare_digest(password, self.token)
            return Verdict.OK if sep and user_ok & password_ok else Verdict.INVALID
        return Verdict.MISSING


def pagerduty_signature(secret: bytes, body: bytes) -> str:
    """The `v1=<hex>` entry PagerDuty sends for `body` under `secret`."""
    return "v1=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class PagerDutySignatures:
    """Verifies X-PagerDuty-Signature against one or more secrets (old and new during a rotation)."""

    secrets: tuple[bytes, ...]

    def __post_init__(self) -> None:
        if not self.secrets:
            raise ValueError("at least one PagerDuty webhook secret is needed")

    @classmethod
    def of(cls, secrets: list[str]) -> "PagerDutySignatures":
        return cls(tuple(s.encode() for s in secrets))

    def check(self, header: str | None, body: bytes) -> Verdict:
        if not header or not header.strip():
            return Verdict.MISSING
        entries = [e.strip() for e in header.split(",")][:MAX_SIGNATURE_ENTRIES]
        offered = [e[3:].encode("ascii", "replace") for e in entries if e.startswith("v1=")]
        if not offered:
            return Verdict.INVALID
        expected = [hmac.new(secret, body, hashlib.sha256).hexdigest().encode() for secret in self.secrets]
        matched = False
        for candidate in offered:
            for digest in expected:
                matched |= hmac.compare_digest(candidate.lower(), digest)
        return Verdict.OK if matched else Verdict.INVALID
