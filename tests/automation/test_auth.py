"""Webhook credentials: bearer token and basic auth for Alertmanager, signatures with rotation for PagerDuty."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from opsctl.automation.auth import PagerDutySignatures, TokenAuth, Verdict

TOKEN = "s3cret-token-0123456789"


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize("header, verdict", [
    (None, Verdict.MISSING),
    ("", Verdict.MISSING),
    (f"Bearer {TOKEN}", Verdict.OK),
    (f"bearer {TOKEN}", Verdict.OK),
    (f"Bearer {TOKEN}x", Verdict.INVALID),
    (f"Bearer {TOKEN[:-1]}", Verdict.INVALID),
    ("Bearer ", Verdict.INVALID),
    (_basic("alertmanager", TOKEN), Verdict.OK),
    (_basic("someone", TOKEN), Verdict.INVALID),
    (_basic("alertmanager", "wrong"), Verdict.INVALID),
    ("Basic !!!not-base64", Verdict.INVALID),
    ("Basic " + base64.b64encode(TOKEN.encode()).decode(), Verdict.INVALID),  # no user:password form
    (f"Token {TOKEN}", Verdict.MISSING),  # an unknown scheme is no credential at all
], ids=["none", "empty", "bearer", "lower-case scheme", "longer token", "shorter token", "empty bearer",
        "basic", "basic wrong user", "basic wrong password", "basic garbage", "basic without colon", "other scheme"])
def test_token_auth_verdicts(header, verdict):
    assert TokenAuth.of(TOKEN).check(header) is verdict


def test_a_short_token_is_refused_at_start():
    with pytest.raises(ValueError):
        TokenAuth.of("short")


def _sig(secret: str, body: bytes) -> str:
    return "v1=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


BODY = b'{"event": {"id": "x"}}'


def test_a_signature_under_the_configured_secret_verifies():
    assert PagerDutySignatures.of(["old"]).check(_sig("old", BODY), BODY) is Verdict.OK


def test_during_rotation_any_entry_matching_any_secret_verifies():
    header = f"{_sig('other', BODY)},{_sig('new', BODY)}"
    assert PagerDutySignatures.of(["old", "new"]).check(header, BODY) is Verdict.OK
    assert PagerDutySignatures.of(["new"]).check(f"{_sig('old', BODY)}, {_sig('new', BODY)}", BODY) is Verdict.OK


def test_a_signature_over_another_body_or_secret_does_not_verify():
    checker = PagerDutySignatures.of(["old", "new"])
    assert checker.check(_sig("old", BODY + b" "), BODY) is Verdict.INVALID
    assert checker.check(_sig("retired", BODY), BODY) is Verdict.INVALID
    assert checker.check("v2=" + _sig("old", BODY)[3:], BODY) is Verdict.INVALID
    assert checker.check(None, BODY) is Verdict.MISSING
