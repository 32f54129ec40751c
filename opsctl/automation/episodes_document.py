"""The shared `serve-episodes` document, typed (`EpisodesDocument`): its episodes (episode_record.py),
the alerts' states (`AlertState`) and the external actions' intents (`Intent`) beside them, and its
term. Typed once where it is read (`parse`) and encoded where it is written (`encode`): an entry a
write leaves unchanged is written back as the very object it was read as, so a write encodes only
what it changed; an entry that does not read is kept as stored (`rejected`) and never acted on.
"""

from __future__ import annotations

from typing import Any, Callable

from opsctl.automation.episode_record import Episode
from opsctl.automation.stored_entry import NUMBER, OPT_TEXT, TEXT, MalformedEpisode, Spec, StoredEntry
from opsctl.model import Model, field


# -- what the shared document holds beside the episodes --------------------------------------------------


_ALERT_KEYS: dict[str, Spec] = {"policy": TEXT, "target": TEXT, "starts_at": TEXT, "status": TEXT, "updated_at": NUMBER}
_ALERT_REQUIRED = frozenset(_ALERT_KEYS)


class AlertState(StoredEntry):
    """An alert's state per policy and fingerprint (`alerts["policy/fingerprint"]`), with its startsAt,
    so a late or replayed copy of an earlier firing never reopens or resolves a later one."""

    KEYS = _ALERT_KEYS
    REQUIRED = _ALERT_REQUIRED
    WHAT = "alert"

    policy: str
    target: str
    starts_at: str  # canonical RFC 3339, nanoseconds: sorts as text
    status: str  # firing | resolved
    updated_at: float
    version: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


_INTENT_KEYS: dict[str, Spec] = {"action": TEXT, "term": OPT_TEXT, "at": NUMBER, "by": TEXT, "detail": TEXT}
_INTENT_REQUIRED = frozenset(("action", "at", "by", "detail"))


class Intent(StoredEntry):
    """An external action's intent (page, ticket, note), written under the term before it happens."""

    KEYS = _INTENT_KEYS
    REQUIRED = _INTENT_REQUIRED
    WHAT = "intent"

    action: str
    at: float
    by: str
    detail: str
    term: str | None = None
    version: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


# -- the document -------------------------------------------------------------------------------------------

_SECTIONS = ("alerts", "episodes", "intents")
_READERS: dict[str, Callable[[str, Any], Any]] = {
    "alerts": lambda k, raw: AlertState.from_stored(raw, f"alert {k}"),
    "episodes": Episode.from_stored,
    "intents": lambda k, raw: Intent.from_stored(raw, f"intent {k}"),
}


class EpisodesDocument(Model):
    """`serve-episodes`, typed once where it is read (`parse`) and encoded where it is written
    (`encode`). A write works on a `draft()` (its own section dicts, the same records) and sets the
    records it changes; `encode` writes back every other entry as the object it was read as.

    `rejected` keeps, per section, the entries that did not read (as stored; `problems` says why,
    one line each): they are never acted on and are written back unchanged. `unset` names the
    top-level keys the stored document did not hold (`intents` before the first intent, `term`
    unfenced)."""

    alerts: dict[str, AlertState] = field(default_factory=dict)
    episodes: dict[str, Episode] = field(default_factory=dict)
    intents: dict[str, Intent] = field(default_factory=dict)
    term: str | None = None  # the newest leader term that wrote it
    version: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    rejected: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    unset: frozenset[str] = frozenset(("intents", "term"))
    # section -> {name: (record, what it was read or written as)}: an unchanged entry is written as it was.
    encoded: dict[str, dict[str, tuple[Any, Any]]] = field(default_factory=dict)

    @classmethod
    def parse(cls, data: dict[str, Any] | None, name: str = "serve-episodes") -> "EpisodesDocument":
        """The document as stored (None: not written yet). An entry that does not read is rejected
        (kept as stored, with its problem); a section that is not an object refuses the document
        (MalformedEpisode): nothing would be safe to write over it."""
        if not data:
            return cls()
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        rejected: dict[str, dict[str, Any]] = {}
        problems: list[str] = []
        encoded: dict[str, dict[str, tuple[Any, Any]]] = {}
        for key, raw in data.items():
            reader = _READERS.get(key)
            if reader is None:
                if key == "term" and type(raw) in OPT_TEXT[0]:
                    values["term"] = raw
                elif key == "version" and type(raw) is int:
                    values["version"] = raw
                elif key in ("term", "version"):
                    raise MalformedEpisode(f"{name}: {key}: expected {'a string' if key == 'term' else 'an integer'},"
                                           f" got {type(raw).__name__}")
                else:
                    extra[key] = raw
                continue
            if type(raw) is not dict:
                raise MalformedEpisode(f"{name}: {key}: expected an object, got {type(raw).__name__}")
            records: dict[str, Any] = {}
            kept: dict[str, tuple[Any, Any]] = {}
            for ident, entry in raw.items():
                try:
                    record = reader(ident, entry)
                except MalformedEpisode as exc:
                    rejected.setdefault(key, {})[ident] = entry
                    problems.append(f"{name}: {exc.message}")
                    continue
                records[ident] = record
                kept[ident] = (record, entry)
            values[key] = records
            encoded[key] = kept
        unset = frozenset(k for k in ("alerts", "episodes", "intents", "term") if k not in data)
        return cls(**values, extra=extra, rejected=rejected, problems=tuple(problems), unset=unset, encoded=encoded)

    def draft(self) -> "EpisodesDocument":
        """A copy whose sections a write may change (the records themselves are frozen and shared)."""
        return EpisodesDocument(alerts=dict(self.alerts), episodes=dict(self.episodes), intents=dict(self.intents),
                                term=self.term, version=self.version, extra=self.extra, rejected=self.rejected,
                                problems=self.problems, unset=self.unset, encoded=self.encoded)

    def changed_term(self, term: str) -> "EpisodesDocument":
        """This draft stamped with the term of the write (its sections the same dicts)."""
        from dataclasses import replace

        return replace(self, term=term)

    def encode(self) -> dict[str, Any]:
        """The document as written: `alerts` and `episodes` always, `intents` once it has any,
        `term` when set (or stored), each unchanged entry the object it was read as."""
        out: dict[str, Any] = {}
        for section in _SECTIONS:
            records: dict[str, Any] = getattr(self, section)
            if section == "intents" and not records and "intents" in self.unset and not self.rejected.get(section):
                continue
            known = self.encoded.get(section, {})
            entries: dict[str, Any] = {}
            for ident, record in records.items():
                pair = known.get(ident)
                entries[ident] = pair[1] if pair is not None and pair[0] is record else record.stored()
            entries.update(self.rejected.get(section, {}))
            out[section] = entries
        if self.term is not None or "term" not in self.unset:
            out["term"] = self.term
        if self.version != 1:
            out["version"] = self.version
        out.update(self.extra)
        return out

    def written(self, data: dict[str, Any]) -> "EpisodesDocument":
        """This document as it stands once `data` (its `encode()`) was written: the next write
        starts from it without reading or parsing the echo."""
        encoded = {section: {ident: (record, data[section][ident]) for ident, record in getattr(self, section).items()}
                   for section in _SECTIONS if section in data}
        unset = frozenset(k for k in ("alerts", "episodes", "intents", "term") if k not in data)
        return EpisodesDocument(alerts=self.alerts, episodes=self.episodes, intents=self.intents, term=self.term,
                                version=self.version, extra=self.extra, rejected=self.rejected,
                                problems=self.problems, unset=unset, encoded=encoded)

    def open_episode(self, policy: str, target: str) -> Episode | None:
        for e in self.episodes.values():
            if e.policy == policy and e.target == target and e.state != "closed":
                return e
        return None

    def unreadable_open(self, policy: str, target: str) -> tuple[str, str] | None:
        """(id, problem) of a stored episode of `policy` and `target` that does not read and whose
        state is not "closed" (so it may be open), else None. An entry whose policy or target does
        not read names no policy: it blocks nothing (its problem is logged as any other)."""
        for ident, raw in self.rejected.get("episodes", {}).items():
            if (type(raw) is dict and raw.get("policy") == policy and raw.get("target") == target
                    and raw.get("state") != "closed"):
                problem = next((p.split(f" episode {ident}: ", 1)[1] for p in self.problems
                                if f" episode {ident}: " in p), "does not read")
                return ident, problem
        return None


__all__ = ["AlertState", "EpisodesDocument", "Intent"]
