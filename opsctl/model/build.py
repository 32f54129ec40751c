"""The builder: raw data (parsed YAML or JSON) -> typed models, every problem reported at once.

`build` walks the annotations of a `Model` or a plain dataclass itself, so one bad key never hides
the next: each problem names the file and the key path (`metrics.prometheus.timeout`). It checks
types, refuses unknown keys, reports missing required keys, then runs the model's own
`__post_init__` checks; a `ValueError` there becomes a problem at that section's path.

A model class may set `redact_input = True` (a secret reference): a value of the wrong shape is
then described by its type only, never echoed.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal

from opsctl.errors import ConfigError


def build(cls: type, data: Any, filename: str):
    """Build model (or dataclass) `cls` from raw data, collecting every problem before failing."""
    problems: list[str] = []
    result = build_into(cls, data, "", problems)
    if problems:
        raise ConfigError(f"{filename}: invalid configuration", problems=[f"{filename}: {p}" for p in problems])
    return result


def build_into(tp: Any, value: Any, path: str, problems: list[str]) -> Any:
    """Build `value` as type `tp` at key path `path`, appending problems (no raise)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return build_into(options[0], value, path, problems)
        for option in options:
            trial: list[str] = []
            built = build_into(option, value, path, trial)
            if not trial:
                return built
        problems.append(f"{_where(path)}: expected {' or '.join(_name(o) for o in options)}, got {_show(value)}")
        return None
    if origin is Literal:
        if value not in args:
            allowed = ", ".join(repr(a) for a in args)
            problems.append(f"{_where(path)}: must be one of {allowed}, got {_show(value)}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, list):
            problems.append(f"{_where(path)}: expected a list, got {_show(value)}")
            return []
        item_tp = args[0] if args else Any
        items = [build_into(item_tp, v, f"{path}[{i}]", problems) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            problems.append(f"{_where(path)}: expected a mapping, got {_show(value)}")
            return {}
        key_tp, val_tp = args if args else (Any, Any)
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                problems.append(f"{_where(path)}: keys must be strings, got {k!r}")
                continue
            out[k] = build_into(val_tp, v, f"{path}.{k}" if path else k, problems)
        return out
    if dataclasses.is_dataclass(tp):
        return _build_model(tp, value, path, problems)
    if tp is bool:
        if not isinstance(value, bool):
            problems.append(f"{_where(path)}: expected true or false, got {_show(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(f"{_where(path)}: expected an integer, got {_show(value)}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"{_where(path)}: expected a number, got {_show(value)}")
            return value
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            problems.append(f"{_where(path)}: expected a string, got {_show(value)}")
        return value
    if isinstance(tp, type) and issubclass(tp, str):  # a typed scalar written as text (Duration)
        if not isinstance(value, str):
            problems.append(f"{_where(path)}: expected a string, got {_show(value)}")
            return value
        try:
            return tp(value)
        except ValueError as exc:
            problems.append(f"{_where(path)}: {exc}")
            return value
    raise TypeError(f"unsupported type in model: {tp!r}")


def _build_model(cls: type, value: Any, path: str, problems: list[str]) -> Any:
    if value is None:
        value = {}
    if not isinstance(value, dict):
        if getattr(cls, "redact_input", False):  # an inline secret: say so without echoing it
            problems.append(f"{_where(path)}: expected a mapping {{env: NAME}} or {{file: PATH}}, got a "
                            f"{type(value).__name__} (secret values do not belong in the config; not shown)")
        else:
            problems.append(f"{_where(path)}: expected a mapping, got {_show(value)}")
        return None
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    public = {n for n, f in fields.items() if not f.metadata.get("internal")}
    for key in value:
        # Internal fields (where the root config came from) are set by the loader, at the top only.
        if key not in fields or (key not in public and path != ""):
            known = ", ".join(sorted(public))
            problems.append(f"{path + '.' if path else ''}{key}: unknown key (known keys: {known})")
    kwargs = {}
    before = len(problems)
    for name, f in fields.items():
        sub = f"{path}.{name}" if path else name
        if name in value:
            kwargs[name] = build_into(hints[name], value[name], sub, problems)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            problems.append(f"{sub}: required key is missing")
    if len(problems) > before:
        return None
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:
        problems.append(f"{_where(path)}: {exc}")
        return None


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """Resolved annotations, once per class (resolving is most of a build's cost)."""
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def _where(path: str) -> str:
    return path or "(top level)"


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _show(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}"


def to_dict(obj: Any) -> Any:
    """Model -> plain data (for `config show`); internal fields left out, secrets shown by reference."""
    to_data = getattr(obj, "to_data", None)
    if to_data is not None and dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_data()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            f.name: to_dict(getattr(obj, f.name))
            for f in dataclasses.fields(obj)
            if not f.metadata.get("internal")
        }
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, str) and type(obj) is not str:  # a typed scalar (Duration): the text written
        return str(obj)
    return obj
