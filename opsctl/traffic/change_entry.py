"""One entry of the change record (opsctl/traffic/record.py): an applied change as it is stored
with the split, typed once where the record is read (`ChangeEntry.parse`) and written back as read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opsctl.model import Model, field

if TYPE_CHECKING:
    from opsctl.traffic.split import Split


# An entry's keys as written, in order, with the type each holds; `term` and `shortfall` only when set.
_ENTRY_KEYS: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("id", str), ("time", str), ("ts", (int, float)), ("operation", str), ("action", str), ("outcome", str),
    ("actor", str), ("reason", str), ("incident", str), ("emergency", bool), ("overrides", list),
    ("before", dict), ("after", dict), ("term", str), ("shortfall", dict),
)


class ChangeEntry(Model):
    """One applied change in the record, typed once where the record is read (`parse`).

    Written as it always was (`to_dict`): version 1 is the format every opsctl so far wrote, and
    is written without a `version` key; a later format writes its number. `extra` keeps what the
    entry holds beyond these fields (a drill's audit fields, keys a newer writer added, a known key
    whose value has another type), so reading and writing back loses nothing; an older entry that
    lacks one of the fields (one written before `operation` existed) gains it, with its default,
    when the record is next written."""

    version: int = 1
    id: str = ""
    time: str = ""
    ts: float = 0.0
    operation: str = ""
    action: str = ""
    outcome: str = "applied"
    actor: str = ""
    reason: str = ""
    incident: str | None = None
    emergency: bool = False
    overrides: tuple[str, ...] = ()
    before: dict[str, Any] | None = None  # Split.to_dict form
    after: dict[str, Any] | None = None
    term: str | None = None  # the leader's term it was written under (None: a person)
    shortfall: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def before_split(self) -> "Split | None":
        return split_of(self.before)

    @property
    def after_split(self) -> "Split | None":
        return split_of(self.after)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> "ChangeEntry":
        """An entry as stored, old or new; never fails (a value of another type stays in `extra`)."""
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        kinds = dict(_ENTRY_KEYS)
        for key, value in raw.items():
            kind = kinds.get(key)
            if key == "version" and type(value) is int:
                values["version"] = value
            elif kind is None or value is None and key not in ("incident", "before", "after", "term"):
                extra[key] = value
            elif value is None:
                values[key] = None
            elif key == "overrides":
                if isinstance(value, list) and all(isinstance(o, str) for o in value):
                    values[key] = tuple(value)
                else:
                    extra[key] = value
            elif isinstance(value, kind) and not (kind is not bool and isinstance(value, bool)):
                values[key] = value  # an int `ts` stays an int: written back as it was read
            else:
                extra[key] = value
        return cls(**values, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        """The entry as stored and as `traffic history -o json` shows it."""
        out: dict[str, Any] = {}
        for key, _kind in _ENTRY_KEYS:
            value = getattr(self, key)
            if key in ("term", "shortfall") and not value:
                continue
            out[key] = list(value) if key == "overrides" else value
        if self.version != 1:
            out["version"] = self.version
        out.update(self.extra)
        return out


def split_of(stored: dict[str, Any] | None) -> "Split | None":
    """A split as an entry stores it (Split.to_dict form), typed; None when unset or not a split."""
    from opsctl.traffic.split import Split

    if not stored:
        return None
    try:
        return Split.of(stored.get("weights") or {}, stored.get("shadow") or {})
    except (AttributeError, TypeError, ValueError):  # not a mapping of whole numbers: nothing to show
        return None
