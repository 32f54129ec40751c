"""How an entry stored in a shared document is read back typed: the checks of a stored value (the
JSON types each key may have), the reader that splits an entry into its known values and the keys
beyond them (`extra`, a newer writer's), the maker that builds a record from checked values without
the generic constructor (the document is read whole, on every read), and the error a stored episode
that does not read raises (`MalformedEpisode`, one line, exit 3). The episodes document's records
and the delivery pieces' entries (`delivery_record.py`, whose reader raises `MalformedDelivery`)
are checked by the same reader.
"""

from __future__ import annotations

from dataclasses import MISSING
from typing import Any, ClassVar, Mapping, Self, TypeVar

from opsctl.errors import NoDataError
from opsctl.model import Model


class MalformedEpisode(NoDataError):
    """A stored episode (or an entry beside it) that does not read as its record: one line, exit 3."""


# -- the typed checks of a stored value (one home, so every record reads alike) -----------------------
# A key's check is the set of JSON types its value may have (by exact type: a bool is no number);
# the whole document is read on every read of it, so this stays a set lookup per key.

Spec = tuple[frozenset[type], str]
TEXT: Spec = (frozenset((str,)), "a string")
NUMBER: Spec = (frozenset((int, float)), "a number")
OPT_TEXT: Spec = (frozenset((str, type(None))), "a string or null")
OPT_NUMBER: Spec = (frozenset((int, float, type(None))), "a number or null")
INTEGER: Spec = (frozenset((int,)), "an integer")
BOOL: Spec = (frozenset((bool,)), "true or false")
OBJECT: Spec = (frozenset((dict,)), "an object")
OPT_OBJECT: Spec = (frozenset((dict, type(None))), "an object or null")
ARRAY: Spec = (frozenset((list,)), "an array")


def _read(raw: Any, what: str, keys: Mapping[str, Spec], required: frozenset[str],
          error: type[NoDataError] = MalformedEpisode) -> tuple[dict[str, Any], dict[str, Any]]:
    """(known values, extra keys) of one stored entry; `error` (one line) otherwise."""
    if type(raw) is not dict:
        raise error(f"{what}: expected an object, got {type(raw).__name__}")
    if raw.keys() == keys.keys():  # as this code writes it: every key known, none missing
        for key, value in raw.items():
            if type(value) not in keys[key][0]:
                raise error(f"{what}: {key}: expected {keys[key][1]}, got {type(value).__name__}")
        return dict(raw), {}
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in raw.items():
        spec = keys.get(key)
        if spec is None:
            if key == "version":
                if type(value) is not int:
                    raise error(f"{what}: version: expected an integer, got {type(value).__name__}")
                values["version"] = value
            else:
                extra[key] = value
        elif type(value) in spec[0]:
            values[key] = value
        else:
            raise error(f"{what}: {key}: expected {spec[1]}, got {type(value).__name__}")
    if not required.issubset(values):
        missing = [k for k in keys if k in required and k not in values]
        raise error(f"{what}: {', '.join(missing)}: required, missing")
    return values, extra


R = TypeVar("R", bound=Model)


def _made(cls: type[R], values: dict[str, Any]) -> R:
    """A record from values `_read` checked, without Model.__init__'s generic loop over the fields
    (the document is read whole, on every read): the defaults, then the values (these records
    have no coercion and no __post_init__; a field with a default factory is given, or made here)."""
    record = object.__new__(cls)
    state = record.__dict__
    defaults = _DEFAULTS.get(cls)
    if defaults is None:
        defaults = _DEFAULTS[cls] = {n: f.default for n, f in cls.__dataclass_fields__.items()
                                     if f.default is not MISSING}
    state.update(defaults)
    state.update(values)
    if len(state) < len(cls.__dataclass_fields__):
        for name, f in cls.__dataclass_fields__.items():
            if name not in state:
                if f.default_factory is MISSING:
                    raise TypeError(f"{cls.__name__}: {name} is required")
                state[name] = f.default_factory()
    return record


_DEFAULTS: dict[type, dict[str, Any]] = {}


class StoredEntry(Model):
    """A small record of the shared document, stored as one object: its `KEYS` in the order they are
    written (each with its check; `REQUIRED` of them must be there), then `version` when it is not
    1, then `extra` (the keys beyond these a newer writer added, kept as they were). A subclass
    declares the fields `KEYS` names and `version: int = 1`, `extra: dict[str, Any]` after them."""

    KEYS: ClassVar[Mapping[str, Spec]]
    REQUIRED: ClassVar[frozenset[str]]
    WHAT: ClassVar[str]  # what a problem names the entry when the caller does not say

    @classmethod
    def from_stored(cls, raw: Any, what: str | None = None) -> Self:
        """The entry as stored; MalformedEpisode (one line) when it does not read."""
        values, extra = _read(raw, cls.WHAT if what is None else what, cls.KEYS, cls.REQUIRED)
        values["extra"] = extra
        return _made(cls, values)

    def stored(self) -> dict[str, Any]:
        """The entry as the shared document keeps it."""
        out: dict[str, Any] = {k: getattr(self, k) for k in self.KEYS}
        version: int = getattr(self, "version")
        if version != 1:
            out["version"] = version
        out.update(getattr(self, "extra"))
        return out


__all__ = ["ARRAY", "BOOL", "INTEGER", "NUMBER", "OBJECT", "OPT_NUMBER", "OPT_TEXT", "TEXT", "MalformedEpisode", "Spec",
           "StoredEntry"]
