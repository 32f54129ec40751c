"""How a drill report's records read and write themselves (`Part`, the base of every part of
`report_model.DrillReport`): typed fields, read from a stored report with every value's type
checked (a wrong one is `ReportUnreadable`, naming its key path), and written back with the keys in
the order they were read (`shape`) and whatever they held beyond their fields (`extra`), so a
stored report re-encodes to its own bytes. Numbers are `int | float`: an integer stays an integer.
"""

from __future__ import annotations

import types
import typing
import dataclasses
from typing import Any, ClassVar, Self, TypeVar

from opsctl.errors import NoDataError
from opsctl.model import Model, field

Number = int | float
P = TypeVar("P", bound="Part")


class ReportUnreadable(NoDataError):
    """A stored report.json that is not a drill report this opsctl reads (exit 3: the run's report
    is unknown, as when it has none)."""


class Part(Model):
    """A record of the report: typed fields, plus the key order it is written in (`shape`, None: the
    fields in their order, those in `OPTIONAL` only when set) and what it holds beyond its fields."""

    OPTIONAL: ClassVar[frozenset[str]] = frozenset()
    shape: tuple[str, ...] | None = None  # the keys as written, in order (None: the fields)
    extra: dict[str, Any] = field(default_factory=dict)  # keys beyond the fields, kept as read

    @classmethod
    def parse(cls: type[P], raw: Any, where: str = "") -> P:
        """A part as stored; a value of the wrong type raises ReportUnreadable naming its key path."""
        problems: list[str] = []
        built = _part(cls, raw, where, problems)
        if problems or built is None:
            raise ReportUnreadable(problems[0] if problems else f"{where or 'report'}: not a JSON object")
        return built

    def keys(self) -> tuple[str, ...]:
        if self.shape is not None:
            return self.shape
        return tuple(n for n in _fields(type(self)) if n not in self.OPTIONAL or getattr(self, n) is not None)

    def to_dict(self) -> dict[str, Any]:
        fields = _fields(type(self))
        return {k: _plain(getattr(self, k) if k in fields else self.extra.get(k)) for k in self.keys()}

    def update(self, **changes: Any) -> Self:
        """A copy with `changes`, each new key written after the ones it has (as `dict.update` does)."""
        keys = self.keys()
        return dataclasses.replace(self, **changes, shape=keys + tuple(k for k in changes if k not in keys))

    def written_as(self, *keys: str) -> Self:
        """A copy written with exactly `keys`, in that order (a part built as a dict of them was)."""
        return dataclasses.replace(self, shape=keys)

    def without(self, *keys: str) -> Self:
        """A copy that does not write `keys`."""
        return dataclasses.replace(self, shape=tuple(k for k in self.keys() if k not in keys))

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The part's fields, in their order."""
        return _fields(cls)


def _fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(n for n in getattr(cls, "__dataclass_fields__") if n not in ("shape", "extra"))
    return names


_FIELDS: dict[type, tuple[str, ...]] = {}
_HINTS: dict[type, dict[str, Any]] = {}


def _plain(value: Any) -> Any:
    if isinstance(value, Part):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _part(cls: type[P], raw: Any, path: str, problems: list[str]) -> P | None:
    if not isinstance(raw, dict):
        problems.append(f"{path or 'report'}: expected a JSON object, got {type(raw).__name__}")
        return None
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    names = _fields(cls)
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in raw.items():
        if key in names:
            values[key] = _value(hints[key], value, f"{path}.{key}" if path else key, problems)
        else:
            extra[key] = value
    return cls(**values, shape=tuple(raw), extra=extra)


def _value(tp: Any, value: Any, path: str, problems: list[str]) -> Any:
    from opsctl.model.build import JSON, build_into

    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        if value is None:
            return None
        rest = [a for a in args if a is not type(None)]
        tp = rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]
        origin, args = typing.get_origin(tp), typing.get_args(tp)
    if isinstance(tp, type) and issubclass(tp, Part):
        return _part(tp, value, path, problems)
    if origin is tuple:
        if not isinstance(value, list):
            problems.append(f"{path}: expected an array, got {type(value).__name__}")
            return ()
        return tuple(_value(args[0], v, f"{path}[{i}]", problems) for i, v in enumerate(value))
    return build_into(tp, value, path, problems, JSON)
