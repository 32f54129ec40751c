"""The leader's term: the fencing token every record written by `opsctl serve` carries.

A term is the Lease holder and the Lease's `spec.leaseTransitions` as it stood right after that
holder acquired it. Transitions of one Lease only grow, so of two terms the one with the larger
epoch is newer; resourceVersions stay opaque and are never compared for order. A write that finds a
newer term stored than its own is refused (`FencedError`): a leader that was paused and woke up
believing it still leads cannot overwrite what its successor wrote. docs/decisions/0006-leader-term-and-fencing.md.
"""

from __future__ import annotations

from opsctl.errors import ConflictError
from opsctl.model import Model


class FencedError(ConflictError):
    """A write carried a term older than the one already recorded (exit 5, a concurrent change)."""


class Term(Model):
    holder: str
    epoch: int

    def __str__(self) -> str:
        return f"{self.holder}@{self.epoch}"

    @classmethod
    def parse(cls, text: str) -> "Term":
        holder, sep, epoch = str(text).rpartition("@")
        if not sep or not holder or not epoch.isdigit():
            raise ValueError(f"{text!r} is not a term (holder@epoch)")
        return cls(holder=holder, epoch=int(epoch))

    def is_older_than(self, other: "Term | None") -> bool:
        return other is not None and self.epoch < other.epoch

    def check_not_fenced(self, stored: "Term | str | None", what: str) -> None:
        """Raise FencedError when `stored` (the term on the document about to be replaced) is newer."""
        if stored is None:
            return
        current = stored if isinstance(stored, Term) else Term.parse(stored)
        if self.is_older_than(current):
            raise FencedError(f"{what}: written under term {current}, newer than this replica's {self}; "
                              "this replica no longer leads and does not write")


LOCAL_TERM = Term(holder="local", epoch=0)


def parse_stored(value: "Term | str | None") -> "Term | None":
    """A term as stored on a record (text), None when there is none or it is not one."""
    if value is None or isinstance(value, Term):
        return value
    try:
        return Term.parse(value)
    except ValueError:
        return None


def fence(term: "Term | None", stored: "Term | str | None", what: str) -> "str | None":
    """Check a write under `term` against the term stored on the record it replaces, and return the
    term the record keeps: the writer's (it is at least as new), or the stored one for a write from a
    person (no term: only compare-and-swapped, and it must not erase the leader's fence)."""
    current = parse_stored(stored)
    if term is None:
        return str(current) if current is not None else None
    term.check_not_fenced(current, what)
    return str(term)
