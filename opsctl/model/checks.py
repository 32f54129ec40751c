"""Checks a field carries in its annotation: `Annotated[str, Text(nonempty=True)]`.

A check is called with the value the builder produced (already of the annotated type) and returns
the value to keep, or raises ValueError with the problem; the builder prefixes the key path.
"""

from __future__ import annotations

import re
from typing import Any

# Identifiers (label values, event and incident ids) end up in ids, records and log lines: no CR, LF
# or other control character. Free text may hold newlines.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
NO_CONTROL = "must not contain control characters (CR, LF, ...)"


class Text:
    """A bounded string: at most `max_len` characters, non-empty if asked, an identifier (no control
    characters) if asked, matching `pattern` (fully) if given, described as `expected`."""

    def __init__(self, *, max_len: int = 8192, nonempty: bool = False, ident: bool = False,
                 pattern: re.Pattern[str] | None = None, expected: str = ""):
        self.max_len, self.nonempty, self.ident = max_len, nonempty, ident
        self.pattern, self.expected = pattern, expected

    def __call__(self, value: str) -> str:
        if len(value) > self.max_len:
            raise ValueError(f"longer than {self.max_len} characters")
        if self.nonempty and not value:
            raise ValueError("must not be empty")
        if self.ident and CONTROL.search(value):
            raise ValueError(NO_CONTROL)
        if self.pattern is not None and value and not self.pattern.fullmatch(value):
            raise ValueError(f"expected {self.expected}, got {value[:40]!r}")
        return value


class Labels:
    """An object of strings (labels, annotations): bounded count and sizes, optionally identifiers."""

    def __init__(self, *, max_entries: int = 128, max_len: int = 8192, max_key: int = 256,
                 nonempty: bool = False, idents: bool = False):
        self.max_entries, self.max_len, self.max_key = max_entries, max_len, max_key
        self.nonempty, self.idents = nonempty, idents

    def __call__(self, value: Any) -> dict[str, str]:
        if not isinstance(value, dict):
            from opsctl.model.build import JSON

            raise ValueError(f"expected an object of strings, got {JSON.show(value)}")
        if len(value) > self.max_entries:
            raise ValueError(f"more than {self.max_entries} entries")
        bad = [k for k, v in value.items() if not isinstance(v, str) or len(v) > self.max_len or len(k) > self.max_key]
        if bad:
            raise ValueError(f"values must be strings ({', '.join(map(repr, bad[:5]))})")
        if self.idents:
            bad = [k for k, v in value.items() if CONTROL.search(k) or CONTROL.search(v)]
            if bad:
                raise ValueError(f"{NO_CONTROL} ({', '.join(repr(k)[:40] for k in bad[:5])})")
        if self.nonempty and not value:
            raise ValueError("must not be empty")
        return dict(value)


class Count:
    """A whole number >= 0; absent or null is 0."""

    def __call__(self, value: Any) -> int:
        if value is None:
            return 0
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            from opsctl.model.build import JSON

            raise ValueError(f"expected a whole number >= 0, got {JSON.show(value)}")
        return value


class NonEmpty:
    """A list that must hold something; `what` names an item ("must hold at least one alert")."""

    def __init__(self, what: str):
        self.what = what

    def __call__(self, value: Any) -> Any:
        if not value:
            raise ValueError(f"must hold at least one {self.what}")
        return value
