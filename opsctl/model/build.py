"""The builder: raw data (parsed YAML or JSON) -> typed models, every problem reported at once.

`build` walks the annotations of a `Model` or a plain dataclass itself, so one bad key never hides
the next: each problem names the file and the key path (`metrics.prometheus.timeout`). It checks
types, reports missing required keys and unknown keys, runs the checks a field carries
(`Annotated[str, Text(nonempty=True)]`, opsctl.model.checks), then the model's own
`__post_init__`; a `ValueError` there becomes a problem at that section's path.

What a model class may say about its input (class attributes, none of them fields):
- `unknown_keys = "ignore"`: tolerate keys it does not define (a sender's newer fields); the
  default refuses them, listing the known keys.
- `redact_input = True` (a secret reference): a value of the wrong shape is described by its type
  only, never echoed; `to_dict` shows only the fields given (where the secret lives).
A field may take its value from a key spelled otherwise: `field(metadata={"alias": "groupKey"})`.
A class with `from_text(text)` (Duration, an RFC 3339 instant) is a typed scalar written as text.
"""

from __future__ import annotations

import builtins
import dataclasses
import keyword
import sys
import types
import typing
from typing import Any, Literal, TypeVar

from opsctl.errors import ConfigError


class Words:
    """How problems are worded: a config file speaks of keys and mappings (the default)."""

    body = "(top level)"
    mapping = "a mapping"
    missing = "required key is missing"

    def show(self, value: Any) -> str:
        return f"{type(value).__name__} {repr(value)[:60]}"

    def choices(self, allowed: tuple[Any, ...], value: Any) -> str:
        return f"must be one of {', '.join(repr(a) for a in allowed)}, got {self.show(value)}"


class JsonWords(Words):
    """A JSON body (webhook payloads) speaks of fields and objects, and never echoes a wrong value."""

    body = "body"
    mapping = "a JSON object"
    missing = "required field is missing"

    def show(self, value: Any) -> str:
        return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
            type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__)

    def choices(self, allowed: tuple[Any, ...], value: Any) -> str:
        if isinstance(value, str) or not all(isinstance(a, str) for a in allowed):
            shown = repr(value[:40]) if isinstance(value, str) else repr(value)[:40]
            return f"must be one of {', '.join(map(str, allowed))}, got {shown}"
        return f"expected a string, got {self.show(value)}"


CONFIG = Words()
JSON = JsonWords()

T = TypeVar("T")


def build(cls: type[T], data: Any, filename: str) -> T:
    """Build model (or dataclass) `cls` from raw data, collecting every problem before failing."""
    problems: list[str] = []
    result = build_into(cls, data, "", problems)
    if problems:
        raise ConfigError(f"{filename}: invalid configuration", problems=[f"{filename}: {p}" for p in problems])
    return typing.cast(T, result)


def build_into(tp: Any, value: Any, path: str, problems: list[str], words: Words = CONFIG) -> Any:
    """Build `value` as type `tp` at key path `path`, appending problems (no raise)."""
    if tp is str and type(value) is str:  # the common case, first
        return value
    where = path or words.body
    shape = _SHAPES.get(tp)
    if shape is None:
        shape = _SHAPES[tp] = (typing.get_origin(tp), typing.get_args(tp))
    origin, args = shape
    if tp is Any:
        return value
    if origin is typing.Annotated:
        before = len(problems)
        built = build_into(args[0], value, path, problems, words)
        if len(problems) > before or (built is None and _optional(args[0])):
            return built
        for check in args[1:]:
            try:
                built = check(built)
            except ValueError as exc:
                problems.append(f"{where}: {exc}")
                return None
        return built
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return build_into(options[0], value, path, problems, words)
        for option in options:
            trial: list[str] = []
            built = build_into(option, value, path, trial, words)
            if not trial:
                return built
        problems.append(f"{where}: expected {' or '.join(_name(o) for o in options)}, got {words.show(value)}")
        return None
    if origin is Literal:
        if value not in args:
            problems.append(f"{where}: {words.choices(args, value)}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, list):
            problems.append(f"{where}: expected {'an array' if words is JSON else 'a list'}, got {words.show(value)}")
            return []
        item_tp = args[0] if args else Any
        items = [build_into(item_tp, v, f"{path}[{i}]", problems, words) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            problems.append(f"{where}: expected {words.mapping}, got {words.show(value)}")
            return {}
        key_tp, val_tp = args if args else (Any, Any)
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                problems.append(f"{where}: keys must be strings, got {k!r}")
                continue
            out[k] = build_into(val_tp, v, f"{path}.{k}" if path else k, problems, words)
        return out
    from_text = getattr(tp, "from_text", None)
    if from_text is not None:  # a typed scalar written as text (Duration, an instant)
        if not isinstance(value, str):
            problems.append(f"{where}: expected a string, got {words.show(value)}")
            return None
        try:
            return from_text(value)
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
            return None
    if dataclasses.is_dataclass(tp):
        return _build_model(typing.cast(type, tp), value, path, problems, words)
    if tp is bool:
        if not isinstance(value, bool):
            problems.append(f"{where}: expected true or false, got {words.show(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(f"{where}: expected an integer, got {words.show(value)}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"{where}: expected a number, got {words.show(value)}")
            return value
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            problems.append(f"{where}: expected a string, got {words.show(value)}")
        return value
    raise TypeError(f"unsupported type in model: {tp!r}")


def _build_model(cls: type, value: Any, path: str, problems: list[str], words: Words) -> Any:
    where = path or words.body
    if value is None and words is CONFIG:
        value = {}  # an empty section in YAML (`paging:`) is the section's defaults
    if not isinstance(value, dict):
        if getattr(cls, "redact_input", False):  # an inline secret: say so without echoing it
            problems.append(f"{where}: expected a mapping {{env: NAME}} or {{file: PATH}}, got a "
                            f"{type(value).__name__} (secret values do not belong in the config; not shown)")
        else:
            problems.append(f"{where}: expected {words.mapping}, got {words.show(value)}")
        return None
    hints = _hints(cls)
    keys = _KEYS.get(cls)
    if keys is None:
        keys = _KEYS[cls] = {f.metadata.get("alias", f.name): f for f in dataclasses.fields(cls)}
    if getattr(cls, "unknown_keys", "refuse") != "ignore":
        public = {k for k, f in keys.items() if not f.metadata.get("internal")}
        for key in value:
            # Internal fields (where the root config came from) are set by the loader, at the top only.
            if key not in keys or (key not in public and path != ""):
                known = ", ".join(sorted(public))
                problems.append(f"{path + '.' if path else ''}{key}: unknown key (known keys: {known})")
    kwargs = {}
    before = len(problems)
    for key, f in keys.items():
        sub = f"{path}.{key}" if path else key
        if key in value:
            kwargs[f.name] = build_into(hints[f.name], value[key], sub, problems, words)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            problems.append(f"{sub}: {words.missing}")
    if len(problems) > before:
        return None
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:
        problems.append(f"{where}: {exc}")
        return None


_HINTS: dict[type, dict[str, Any]] = {}
_SHAPES: dict[Any, tuple[Any, tuple[Any, ...]]] = {}  # type -> (origin, args), computed once per type
_KEYS: dict[type, dict[str, dataclasses.Field[Any]]] = {}  # model -> {input key: field}


_CODE: dict[str, Any] = {}  # annotation text -> its compiled expression


def _hints(cls: type) -> dict[str, Any]:
    """Resolved annotations, once per class (resolving is most of a build's cost)."""
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = _type_hints(cls)
    return hints


def _type_hints(cls: type) -> dict[str, Any]:
    """`typing.get_type_hints(cls, include_extras=True)`, evaluated the same way (each class of the
    MRO in its module, class attributes after module names) but compiling each annotation text
    once per process, and resolving each class's own annotations once for all its subclasses (every
    model shares `Model`'s): get_type_hints compiles every string afresh, about half of building the
    embedded default. Texts holding a quoted forward reference go to get_type_hints itself."""
    hints: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        own = _OWN.get(base)
        if own is None:
            own = _OWN[base] = _own_hints(base)
        if own is _UNRESOLVED:
            return typing.get_type_hints(cls, include_extras=True)
        hints.update(own)
    return hints


_OWN: dict[type, dict[str, Any]] = {}  # class -> its own annotations resolved (or _UNRESOLVED)
_UNRESOLVED: dict[str, Any] = {}


def _own_hints(base: type) -> dict[str, Any]:
    """The annotations `base` itself declares, resolved in its module and class namespaces."""
    annotations = base.__dict__.get("__annotations__", {})
    if not isinstance(annotations, dict) or not annotations:
        return {}
    hints: dict[str, Any] = {}
    module_ns = getattr(sys.modules.get(base.__module__), "__dict__", {})
    class_ns = dict(vars(base))
    for name, value in annotations.items():
        if isinstance(value, str):
            if value.isidentifier() and not keyword.iskeyword(value):  # a name: looked up as eval would
                value = _lookup(value, module_ns, class_ns)
            else:
                code = _CODE.get(value)
                if code is None:
                    code = _CODE[value] = compile(value, "<annotation>", "eval")
                value = eval(code, class_ns, module_ns)  # noqa: S307 (annotation text of opsctl's own classes)
        if _unresolved(value):
            return _UNRESOLVED
        hints[name] = type(None) if value is None else value
    return hints


def _lookup(name: str, module_ns: dict[str, Any], class_ns: dict[str, Any]) -> Any:
    """What `eval(name, class_ns, module_ns)` gives without compiling: the module's name, else the
    class attribute, else the builtin (NameError as eval raises it)."""
    for ns in (module_ns, class_ns, vars(builtins)):
        if name in ns:
            return ns[name]
    raise NameError(f"name {name!r} is not defined")


def _unresolved(tp: Any) -> bool:
    """Does `tp` still hold a forward reference (a string naming a type) for get_type_hints to resolve?"""
    if tp is None or type(tp) is type:  # a plain class (list[int] passes isinstance(.., type))
        return False
    if isinstance(tp, (str, typing.ForwardRef)):
        return True
    if isinstance(tp, (list, tuple)):  # Callable's argument list
        return any(_unresolved(a) for a in tp)
    origin = typing.get_origin(tp)
    if origin is Literal:
        return False
    if origin is typing.Annotated:
        return _unresolved(tp.__origin__)
    return any(_unresolved(a) for a in typing.get_args(tp))


def _optional(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp)


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def to_dict(obj: Any) -> Any:
    """Model -> plain data (for `config show`); internal fields left out, secrets shown by reference."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if getattr(obj, "redact_input", False):  # a secret reference: only the reference given
            return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if getattr(obj, f.name) is not None}
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
