"""Typed scalars the builder produces from text, parsed once where the input is read.

A `Duration` is the text as written ('5m', '1h30m') and carries its `.seconds`: messages and
rendered config show what the user wrote, arithmetic uses the number, nothing parses it again.
"""

from __future__ import annotations

from typing import Any

from opsctl.clock import parse_duration
from opsctl.model.base import COERCE


class Duration(str):
    """'5m' -> a str equal to '5m' with `.seconds == 300`; a bad text raises ValueError."""

    seconds: int

    def __new__(cls, text: str) -> "Duration":
        if isinstance(text, Duration):
            return text
        if not isinstance(text, str):
            raise TypeError(f"a duration is text such as 5m, got {type(text).__name__}")
        seconds = parse_duration(text)
        self = super().__new__(cls, text)
        self.seconds = seconds
        return self

    @classmethod
    def from_text(cls, text: str) -> "Duration":
        return cls(text)

    def __reduce__(self) -> tuple[type[Duration], tuple[str]]:
        return (Duration, (str(self),))


COERCE["Duration"] = Duration


def yaml_safe(dumper_cls: Any) -> None:
    """Let a PyYAML dumper write typed scalars as the plain text they came from."""
    dumper_cls.add_representer(Duration, dumper_cls.represent_str)
