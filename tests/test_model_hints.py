"""The typed-model engine resolves annotations as typing.get_type_hints does (it compiles each
annotation text once per process instead of on every class)."""

from __future__ import annotations

import dataclasses
import sys
import typing

import pytest

import opsctl.config as config
from opsctl.model import Model
from opsctl.traffic import change, controller

build_module = sys.modules["opsctl.model.build"]


def models() -> list[type]:
    found = {obj for obj in vars(config).values() if isinstance(obj, type) and issubclass(obj, Model)}
    found |= {obj for module in (controller, change) for obj in vars(module).values()
              if isinstance(obj, type) and dataclasses.is_dataclass(obj)}
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")


@pytest.mark.parametrize("cls", models(), ids=lambda c: c.__qualname__)
def test_hints_equal_typing_get_type_hints(cls):
    try:
        expected = typing.get_type_hints(cls, include_extras=True)
    except NameError:  # a name imported only for type checkers: unresolvable either way
        with pytest.raises(NameError):
            build_module._type_hints(cls)
        return
    assert build_module._type_hints(cls) == expected


def test_a_forward_reference_inside_a_callable_is_resolved():
    """`Callable[["ChangeResult"], bool]` leaves a ForwardRef in the evaluated text: resolved too."""
    hints = build_module._type_hints(change.ChangeRequest)
    assert typing.get_args(typing.get_args(hints["confirm"])[0])[0] == [change.ChangeResult]


@pytest.mark.parametrize("tp, unresolved", [
    (int, False), (None, False), (list[int], False), (typing.Literal["a"], False),
    (typing.Annotated[int, "a note"], False), (list["Backend"], True), (typing.Optional["Backend"], True),
    (typing.Callable[["Backend"], bool], True), (typing.Annotated["Backend", "a note"], True),
])
def test_what_counts_as_an_unresolved_forward_reference(tp, unresolved):
    assert build_module._unresolved(tp) is unresolved
