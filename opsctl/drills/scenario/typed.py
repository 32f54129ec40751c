"""Scenario sections through the toolkit's typed-model builder (`opsctl.config.build`).

A section is a dataclass; `read(cls, raw, path, problems)` builds one from a YAML mapping at a key
path. Keys are hyphenated as in Chaos Toolkit (`max-duration` is the field `max_duration`; a field's
metadata `key` names any other spelling, e.g. `from`). Before the builder runs, each field's check
(checks.py) turns its value into the typed one, and keys no field has are reported; the builder then
checks what is required, the shapes and the types, and constructs the dataclass. Problems are
collected, never raised, so a scenario reports all of them at once, each with its key path.

`read_tagged` reads a list of tagged variants (actions, probes, expectations, ...): it dispatches on
the tag key, then reads the variant's class at `list[i]`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from opsctl.drills.scenario.checks import Bad, show, text
from opsctl.errors import ConfigError

T = TypeVar("T")

_MARK = "\x00scenario"


def key_of(f: dataclasses.Field) -> str:
    return f.metadata.get("key") or f.name.replace("_", "-")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _section_type(tp: Any) -> type | None:
    """The dataclass a field holds (also when optional), else None."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        tp = options[0] if len(options) == 1 else None
    return tp if isinstance(tp, type) and dataclasses.is_dataclass(tp) else None


def _prepare(cls: type, raw: dict, path: str, problems: list[str], names: dict[str, str]) -> dict:
    """Raw YAML keys -> field names, checked values converted; unknown keys reported."""
    hints = typing.get_type_hints(cls)
    fields = {key_of(f): f for f in dataclasses.fields(cls)}
    names.update({f.name: key for key, f in fields.items()})
    out: dict[str, Any] = {}
    for key, value in raw.items():
        where = _join(path, str(key))
        f = fields.get(key)
        if f is None:
            problems.append(f"{where}: unknown key (known keys here: {', '.join(sorted(fields))})")
            continue
        if value is None:  # `key:` with no value reads as absent, as YAML authors expect
            continue
        check = f.metadata.get("check")
        section = _section_type(hints[f.name])
        if check is not None:
            try:
                value = check.convert(value)
            except Bad as exc:
                problems.append(f"{where}: {exc}")
                value = check.fallback
        elif section is not None and isinstance(value, dict):
            value = _prepare(section, value, where, problems, names)
        out[f.name] = value
    return out


def _translate(problem: str, path: str, names: dict[str, str]) -> str:
    """A builder problem (`on_call.acknowledge_after: ...`) at `path` with the YAML's keys."""
    where, _, message = problem.partition(": ")
    if where == "(top level)":
        return f"{path or '(top level)'}: {message}"
    parts = []
    for part in where.split("."):
        name, bracket, index = part.partition("[")
        parts.append(names.get(name, name) + bracket + index)
    return f"{_join(path, '.'.join(parts))}: {message}"


def read(cls: type[T], raw: Any, path: str, problems: list[str], *, partial: bool = False):
    """`cls` built from the mapping `raw` found at `path`, or None (its problems appended).
    `partial`: also when some values were bad (their checks' fallbacks stand in) or keys unknown,
    for checks across sections that should still see the rest."""
    from opsctl.config import build

    if not isinstance(raw, dict):
        problems.append(f"{path or '(top level)'}: expected a mapping, got {show(raw)}")
        return None
    names: dict[str, str] = {}
    before = len(problems)
    prepared = _prepare(cls, raw, path, problems, names)
    try:
        built = build(cls, prepared, _MARK)
    except ConfigError as exc:
        problems.extend(_translate(p.removeprefix(f"{_MARK}: "), path, names) for p in exc.problems)
        return None
    return built if partial or len(problems) == before else None


def read_tagged(items: Any, path: str, tag: str, classes: Mapping[str, type], problems: list[str]) -> list:
    """[(index, tag, variant or None)] for a list of mappings tagged by `tag` (e.g. `action`); items
    without a valid tag are left out. A list that is not one is left to its section's own check."""
    if not isinstance(items, list):
        return []
    out = []
    for i, item in enumerate(items):
        kind = tag_of(item, f"{path}[{i}]", tag, classes, problems)
        if kind is not None:
            out.append((i, kind, read(classes[kind], item, f"{path}[{i}]", problems)))
    return out


def tag_of(item: Any, where: str, tag: str, classes: Mapping[str, type], problems: list[str]) -> str | None:
    """The variant a mapping names by its `tag` key, or None (the problem appended)."""
    if not isinstance(item, dict):
        problems.append(f"{where}: expected a mapping, got {show(item)}")
        return None
    if item.get(tag) is None:
        problems.append(f"{where}.{tag}: required key is missing")
        return None
    try:
        return text(*classes).convert(item[tag])
    except Bad as exc:
        problems.append(f"{where}.{tag}: {exc}")
        return None


def read_variant(item: Any, where: str, tag: str, classes: Mapping[str, type], problems: list[str]):
    """One tagged mapping (a fault by its `kind`) read as its variant's class, or None."""
    kind = tag_of(item, where, tag, classes, problems)
    return None if kind is None else read(classes[kind], item, where, problems)
