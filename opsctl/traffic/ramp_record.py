"""A ramp's stored document (state document `ramp`, opsctl/traffic/rampstate.py), typed: read once
where it is loaded (`RampDocument.parse`) and written back as it was read (`stored`).

Version 1 is the format every opsctl so far wrote; it is written without a `version` key, and a later
format writes its number. A key is written when the document read held it or a change set it
(`changed`), so a document an older opsctl wrote (without `soak`, or without `message` until the ramp
ends) is written back with the keys it had; `summary()` shows an absent key as null, as it always
did. What the document holds beyond these fields (keys a newer writer added, a known key whose value
has another type) stays in `extra` and is written back as read. The splits stay in the form they are
stored in (`Split.to_dict`, as the change record's entries keep theirs); `RampState.split` types them
against the config's backends.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from opsctl.model import Model, field

# The document's keys in the order the ramp writes them, with the types each may hold (None: null).
_KEYS: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("id", (str, type(None))), ("action", (str,)), ("status", (str,)), ("start", (dict,)), ("target", (dict,)),
    ("steps", (list,)), ("step", (int,)), ("interval", (int,)), ("done", (int,)), ("pending", (int, type(None))),
    ("reason", (str, type(None))), ("incident", (str, type(None))), ("emergency", (bool,)), ("actor", (str,)),
    ("soak", (dict, type(None))), ("started_at", (str,)), ("owner", (dict, type(None))), ("pid", (int,)),
    ("host", (str,)), ("updated_at", (str,)), ("heartbeat", (int, float)), ("message", (str, type(None))),
)
_KINDS = dict(_KEYS)
# What `summary()` shows (`traffic status`, a ramp's `-o json`), in its order.
SUMMARY_KEYS = ("id", "action", "status", "done", "pending", "interval", "step", "incident", "reason", "actor",
                "started_at", "updated_at", "message", "pid", "host", "owner", "soak")


def _fits(value: Any, kinds: tuple[type, ...]) -> bool:
    """`value` is of one of `kinds`, a bool counting only where bool is named (JSON's true is no count)."""
    if isinstance(value, bool):
        return bool in kinds
    return isinstance(value, kinds)


class RampOwner(Model):
    """Who runs the ramp: its process (pid, host) and actor. `keys` is the order its keys were
    written in (the store reads them back sorted), so it is shown as it was stored."""

    pid: int | None = None
    host: str | None = None
    actor: str | None = None
    keys: tuple[str, ...] = ("pid", "host", "actor")
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> "RampOwner":
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        keys: list[str] = []
        for key, value in raw.items():
            if key in ("pid", "host", "actor") and _fits(value, (int,) if key == "pid" else (str,)):
                values[key] = value
                keys.append(key)
            else:
                extra[key] = value
        return cls(**values, keys=tuple(keys), extra=extra)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in self.keys:
            out[key] = getattr(self, key)
        out.update(self.extra)
        return out


class RampSoak(Model):
    """The soak of the step being watched: its index and the deadline (on the ramp's clock)."""

    step: int
    until: float
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> "RampSoak | None":
        """None when it lacks a whole `step` or a numeric `until` (the document keeps it in `extra`)."""
        step, until = raw.get("step"), raw.get("until")
        if isinstance(step, bool) or not isinstance(step, int) or isinstance(until, bool) \
                or not isinstance(until, (int, float)):
            return None
        return cls(step, until, {k: v for k, v in raw.items() if k not in ("step", "until")})

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "until": self.until, **self.extra}


class RampDocument(Model):
    """The ramp's plan, progress and owner, as stored in state document `ramp`."""

    version: int = 1
    id: str | None = None
    action: str = ""
    status: str = "running"
    start: dict[str, Any] | None = None  # Split.to_dict form
    target: dict[str, Any] | None = None
    steps: tuple[dict[str, Any], ...] = ()
    step: int = 0
    interval: int = 0
    done: int = 0
    pending: int | None = None  # the step written but not yet recorded as done
    reason: str | None = None
    incident: str | None = None
    emergency: bool = False
    actor: str = ""
    soak: RampSoak | None = None
    started_at: str = ""
    owner: RampOwner | None = None
    pid: int | None = None
    host: str | None = None
    updated_at: str = ""
    heartbeat: float = 0.0
    message: str | None = None
    present: tuple[str, ...] = ()  # the keys stored, in order (a key absent is not written back)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def new(cls, **values: Any) -> "RampDocument":
        """A document holding exactly the keys given."""
        return cls(**values, present=tuple(k for k, _ in _KEYS if k in values))

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> "RampDocument":
        """The document as stored, old or new; never fails (a value of another type stays in `extra`)."""
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        present: list[str] = []
        for key, value in raw.items():
            if key == "version" and type(value) is int:
                values["version"] = value
                continue
            kinds = _KINDS.get(key)
            if kinds is None or not _fits(value, kinds):
                extra[key] = value
                continue
            if key == "owner" and value is not None:
                value = RampOwner.parse(value)
            elif key == "soak" and value is not None:
                value = RampSoak.parse(value)
                if value is None:
                    extra[key] = raw[key]
                    continue
            elif key == "steps":
                if not all(isinstance(s, dict) for s in value):
                    extra[key] = value
                    continue
                value = tuple(value)
            values[key] = value
            present.append(key)
        return cls(**values, present=tuple(present), extra=extra)

    def changed(self, **changes: Any) -> "RampDocument":
        """A copy with `changes` set; a key set here is written from now on."""
        unknown = set(changes) - set(_KINDS)
        if unknown:
            raise TypeError(f"RampDocument has no field {sorted(unknown)[0]!r}")
        present = self.present + tuple(k for k, _ in _KEYS if k in changes and k not in self.present)
        return replace(self, **changes, present=present,
                       extra={k: v for k, v in self.extra.items() if k not in changes})

    def _value(self, key: str) -> Any:
        value = getattr(self, key)
        if isinstance(value, (RampOwner, RampSoak)):
            return value.to_dict()
        return list(value) if key == "steps" else value

    def stored(self) -> dict[str, Any]:
        """The document as written: the keys it holds, in the ramp's order, then `extra`."""
        out: dict[str, Any] = {key: self._value(key) for key, _ in _KEYS if key in self.present}
        if self.version != 1:
            out["version"] = self.version
        out.update(self.extra)
        return out

    def summary(self) -> dict[str, Any]:
        """What `traffic status` and a ramp's `-o json` show: a key the document lacks is null."""
        out = {k: self._value(k) if k in self.present else None for k in SUMMARY_KEYS}
        out["total"] = len(self.steps)
        out["start"] = self.start if "start" in self.present else None
        out["target"] = self.target if "target" in self.present else None
        return out
