"""Secrets kept out of what opsctl shows: known values scrubbed, sensitive headers redacted."""

from __future__ import annotations

import json
from typing import Iterable, Mapping


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
