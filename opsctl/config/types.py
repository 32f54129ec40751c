"""Shared types and checks of the config sections: secrets, severities, URL, share and duration checks."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from opsctl.model import Duration, Model

class SecretRef(Model):
    """Where a secret lives: an environment variable or a file. The value is never in the config."""

    env: str | None = None
    file: str | None = None
    redact_input = True  # a value of the wrong shape (an inline secret) is never echoed

    def __post_init__(self) -> None:
        if bool(self.env) == bool(self.file):
            raise ValueError("give exactly one of 'env' or 'file'")

    def resolve(self) -> str:
        from opsctl.errors import UsageError

        if self.env:
            value = os.environ.get(self.env)
            if not value:
                raise UsageError(f"secret environment variable {self.env} is not set")
            return value.strip()
        try:
            return Path(self.file or "").read_text().strip()  # __post_init__: env or file is set
        except OSError as exc:
            raise UsageError(f"cannot read secret file {self.file}: {exc.strerror}") from exc

    def describe(self) -> str:
        return f"env:{self.env}" if self.env else f"file:{self.file}"

def _https_url(name: str, value: str) -> None:
    # The pagerduty client refuses plain http (UrlError); vendor APIs carry credentials: https only.
    if not value.startswith("https://"):
        raise ValueError(f"{name} must be an https:// URL (got {value!r})")

SEVERITIES = ("Sev1", "Sev2", "Sev3", "Sev4")  # opsctl's ticket severities, Sev1 = service down

def _check_url(what: str, url: str) -> None:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{what} must start with http:// or https:// (got {url!r})")

def _check_share(name: str, value: float | None) -> None:
    if value is not None and not 0 <= value <= 1:
        raise ValueError(f"{name} must be between 0 and 1 (a share, e.g. 0.94)")


def _check_duration(value: Duration, what: str, *, minimum: int = 0) -> int:
    seconds = Duration(value).seconds
    if seconds < minimum:
        raise ValueError(f"{what} must be at least {minimum}s")
    return seconds

TicketSeverity = Literal["Sev1", "Sev2", "Sev3", "Sev4"]

def _check_bind(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"bind must be HOST:PORT, e.g. 127.0.0.1:9095 or 0.0.0.0:9095 (got {value!r})")
    return host.strip("[]"), int(port)

def _check_automation_duration(value: Duration, what: str, maximum: int = 7 * 86400) -> int:
    seconds = Duration(value).seconds
    if not 0 <= seconds <= maximum:
        raise ValueError(f"{what} must be between 0s and {maximum // 86400}d")
    return seconds
