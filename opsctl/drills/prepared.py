"""`Prepared`: an attribute a drill's phase sets after construction (the environment, the run
state, the chain's exporter and PagerDuty endpoint). Read before it is set, it raises a clear
error rather than handing out None; `obj._name` reads the raw value (None until set), for the
few places (cleanup, rollbacks) that must work whether or not the phase got that far."""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class Prepared(Generic[T]):
    def __init__(self, missing: str):
        self.missing = missing  # the error's text: what has not happened yet
        self.slot = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> "Prepared[T]": ...

    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> T: ...

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        value = getattr(obj, self.slot, None)
        if value is None:
            raise RuntimeError(self.missing)
        return value

    def __set__(self, obj: object, value: T) -> None:
        setattr(obj, self.slot, value)
