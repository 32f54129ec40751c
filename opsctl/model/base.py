"""The typed-model engine's class base: frozen, dataclass-compatible models defined without `exec`.

`@dataclass` writes and compiles `__init__`, `__repr__`, `__eq__`, `__hash__` and `__setattr__`
for every class: about 1 ms a class, most of what importing the config cost (bench/RESULTS.md,
"Config model engine"). `Model` sets the same `__dataclass_fields__` from the class body and
shares one generic implementation of those methods, so `dataclasses.fields`, `replace`, `asdict`
and `is_dataclass` work on models as on dataclasses, and `build` treats both alike.

    class Backend(Model):
        kind: Literal["internal", "vendor"]
        description: str = ""
        auth: Auth = field(default_factory=Auth)

Fields without a default come first (as with dataclasses); `__post_init__` runs after assignment.
"""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING, Field, FrozenInstanceError, field
from typing import Any, dataclass_transform

__all__ = ["Model", "field"]

# Annotation name -> the type a plain value of that field is turned into on construction, so a
# model built by hand or by dataclasses.replace holds the same typed values as one from `build`.
COERCE: dict[str, type] = {}


@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
class Model:
    """Base of frozen typed models; subclasses declare fields as annotations, as a dataclass does."""

    __dataclass_fields__: dict[str, Field[Any]] = {}
    __coerce__: dict[str, type] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields: dict[str, Field[Any]] = {}
        for base in reversed(cls.__mro__[1:]):
            fields.update(getattr(base, "__dataclass_fields__", {}))
        seen_default = False
        for name, annotation in cls.__dict__.get("__annotations__", {}).items():
            if isinstance(annotation, str) and annotation.startswith(("ClassVar", "typing.ClassVar")):
                continue
            value = cls.__dict__.get(name, MISSING)
            f: Field[Any] = value if isinstance(value, Field) else field(default=value)
            f.name, f.type = name, annotation
            f._field_type = dataclasses._FIELD  # type: ignore[attr-defined]
            if f.default is not MISSING:
                setattr(cls, name, f.default)  # the class attribute a dataclass leaves behind
            elif isinstance(value, Field):
                delattr(cls, name)
            if isinstance(f.default, (list, dict, set)):
                raise ValueError(f"{cls.__name__}.{name}: mutable default; use field(default_factory=...)")
            has_default = f.default is not MISSING or f.default_factory is not MISSING
            if seen_default and not has_default:
                raise TypeError(f"{cls.__name__}.{name}: a field without a default follows one with a default")
            seen_default = seen_default or has_default
            fields[name] = f
        cls.__dataclass_fields__ = fields
        coerce: dict[str, type] = {}
        for name, f in fields.items():
            head = f.type.split("|")[0].strip() if isinstance(f.type, str) else getattr(f.type, "__name__", "")
            if head in COERCE:
                coerce[name] = kind = COERCE[head]
                if isinstance(f.default, str) and not isinstance(f.default, kind):
                    f.default = kind(f.default)  # a bad default fails at import, in tests
                    setattr(cls, name, f.default)
        cls.__coerce__ = coerce
        setattr(cls, "__match_args__", tuple(fields))  # not declared on type

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        fields = self.__dataclass_fields__
        names = list(fields)
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__}() takes {len(names)} positional arguments but {len(args)} were given")
        for name, value in zip(names, args):
            if name in kwargs:
                raise TypeError(f"{type(self).__name__}() got multiple values for argument {name!r}")
            kwargs[name] = value
        setter = object.__setattr__
        coerce = self.__coerce__
        for name, f in fields.items():
            if name in kwargs:
                value = kwargs.pop(name)
                if name in coerce and value is not None and not isinstance(value, coerce[name]):
                    value = coerce[name](value)
                setter(self, name, value)
            elif f.default is not MISSING:
                setter(self, name, f.default)
            elif f.default_factory is not MISSING:
                setter(self, name, f.default_factory())
            else:
                raise TypeError(f"{type(self).__name__}() missing 1 required argument: {name!r}")
        if kwargs:
            raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument {next(iter(kwargs))!r}")
        post = getattr(self, "__post_init__", None)
        if post is not None:
            post()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__dataclass_fields__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__ and isinstance(other, Model):
            return self._values() == other._values()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__dataclass_fields__)
        return f"{type(self).__qualname__}({inner})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")
