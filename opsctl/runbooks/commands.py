"""The shell commands a runbook quotes: the `$NAME` placeholders they may use, each word quoted for
a POSIX shell, and the opsctl commands built with the config's names. Split from opsctl.runbooks.facts, which re-exports it."""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Mapping, Sequence

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.runbooks.escalation import TicketRoute

# Shell variables a runbook's commands use; each runbook says how to set the ones it uses.
PLACEHOLDERS: dict[str, str] = {
    "INCIDENT": "the incident's id, e.g. the PagerDuty incident number or INC-123",
    "ACCEPTED_A": "sessions with a suggestion accepted before the vendor release (arm A)",
    "SESSIONS_A": "sessions before the vendor release (arm A)",
    "ACCEPTED_B": "sessions with a suggestion accepted since the vendor release (arm B)",
    "SESSIONS_B": "sessions since the vendor release (arm B)",
}
INCIDENT = "$INCIDENT"


_SAFE = re.compile(r"[A-Za-z0-9_./:=@%+,-]+")
_VAR = re.compile(r"\$([A-Z][A-Z0-9_]*)")


class PlaceholderError(ValueError):
    """A `$NAME` in a runbook command that is none of PLACEHOLDERS: the caller names the file."""

    def __init__(self, name: str, word: str):
        self.name, self.word = name, word
        super().__init__(f"unknown placeholder ${name} in {word!r} (known: {', '.join('$' + p for p in PLACEHOLDERS)})")


def sh(word: str) -> str:
    """Quote one word for a POSIX shell; `$NAME` placeholders stay expandable (double quotes)."""
    word = str(word)
    if _SAFE.fullmatch(word):
        return word
    names = _VAR.findall(word)
    if names:
        unknown = sorted(set(names) - set(PLACEHOLDERS))
        if unknown:
            raise PlaceholderError(unknown[0], word)
        escaped = re.sub(r'([\\"`])', r"\\\1", word)
        escaped = re.sub(r"\$(?![A-Z][A-Z0-9_]*)", r"\\$", escaped)
        return f'"{escaped}"'
    return shlex.quote(word)


def command(*words: str) -> str:
    """`opsctl` and its words, each quoted for the shell."""
    return " ".join(["opsctl", *(sh(w) for w in words if w is not None)])


class Commands:
    """The opsctl commands a runbook quotes, built from the config's backend and vendor names."""

    def __init__(self, cfg: "Config"):
        self.cfg = cfg

    def failover(self, source: str, *, reason: str = "", dry_run: bool = False) -> str:
        return command("traffic", "failover", "--from", source, "--incident", INCIDENT,
                       *(("--reason", reason) if reason else ()), *(("--dry-run",) if dry_run else ()))

    def ramp(self, weights: Mapping[str, int], *, reason: str = "", emergency: bool = False,
             dry_run: bool = False) -> str:
        to = [f"{b}={pct_}" for b, pct_ in weights.items()]
        return command("traffic", "ramp", *to, "--incident", INCIDENT, *(("--reason", reason) if reason else ()),
                       *(("--emergency",) if emergency else ()), *(("--dry-run",) if dry_run else ()))

    def set(self, weights: Mapping[str, int], *, shadow: Mapping[str, int] | None = None, reason: str = "",
            emergency: bool = False, dry_run: bool = False) -> str:
        words = [f"{b}={w}" for b, w in weights.items()]
        for b, w in (shadow or {}).items():
            words += ["--shadow", f"{b}={w}"]
        return command("traffic", "set", *words, "--incident", INCIDENT, *(("--reason", reason) if reason else ()),
                       *(("--emergency",) if emergency else ()), *(("--dry-run",) if dry_run else ()))

    def restore(self, *, emergency: bool = False, dry_run: bool = False) -> str:
        return command("traffic", "restore", "--incident", INCIDENT, *(("--emergency",) if emergency else ()),
                       *(("--dry-run",) if dry_run else ()))

    def abort_ramp(self, reason: str) -> str:
        return command("traffic", "ramp", "--abort", "--reason", reason)

    def history(self) -> str:
        return command("traffic", "history", "--incident", INCIDENT)

    def ticket(self, route: TicketRoute, situation: str, subject: str, body: str, *, dry_run: bool = False) -> str:
        return command("ticket", "file", "--vendor", route.vendor, "--category", route.category,
                       "--severity", route.sev(situation), "--subject", subject, "--body", body,
                       *(("--dry-run",) if dry_run else ()))

    def page(self, summary: str, component: str | None = None) -> str:
        return command("page", "trigger", "-s", summary, *(("--component", component) if component else ()),
                       "--detail", f"incident={INCIDENT}")

    def probe(self, backends: Sequence[str]) -> str:
        words = [w for b in backends for w in ("--backend", b)]
        return command("probe", "consistency", "--golden", self.cfg.runbooks.golden, *words)

    def probe_repeat(self, backends: Sequence[str], repeat: int) -> str:
        words = [w for b in backends for w in ("--backend", b)]
        return command("probe", "consistency", "--golden", self.cfg.runbooks.golden, *words, "--repeat", str(repeat))

    def shadow_report(self, backend: str, primary: Sequence[str], share: float | None = None) -> str:
        words = [w for b in primary for w in ("--primary", b)]
        return command("shadow", "report", "--backend", backend, *words,
                       *(("--share", f"{share:g}") if share is not None else ()))

    def ab(self, margin: float) -> str:
        return command("ab", "equivalence", "--successes-a", "$ACCEPTED_A", "--trials-a", "$SESSIONS_A",
                       "--successes-b", "$ACCEPTED_B", "--trials-b", "$SESSIONS_B", "--margin", f"{margin:g}")

    def plain(self, *words: str) -> str:
        return command(*words)
