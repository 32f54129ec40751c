"""The StateStore protocol: small JSON documents that every actor (laptops, `opsctl serve` replicas,
drills) reads and writes with compare-and-swap, so concurrent writers never lose each other's changes.

`put(version=None)` creates and fails with ConflictError (exit 5) when the document exists;
`put(version=V)` replaces only if the document is still at V. `update()` is the read-modify-write
loop on top, retried on conflict. Versions are opaque: a file's counter, an object's resourceVersion.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Protocol

from opsctl.errors import UsageError
from opsctl.model import Model

# A ConfigMap holds at most 1 MiB (etcd's object limit); keep every document well under it so the
# object's metadata and a growing record never push a write over the edge.
MAX_DOCUMENT_BYTES = 512 * 1024
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


class Document(Model):
    name: str
    data: dict[str, Any]  # JSON-serialisable
    version: str  # opaque compare-and-swap token


class StateStore(Protocol):
    backend: str  # "local" | "kubernetes"
    where: str  # human description, e.g. "ConfigMaps in namespace ops"

    def get(self, name: str) -> Document | None: ...

    def put(self, name: str, data: dict[str, Any], *, version: str | None, encoded: str | None = None,
            owned: bool = False) -> Document:
        """version=None creates (ConflictError if it exists); otherwise CAS (ConflictError, exit 5, if moved).
        `encoded`: encode(name, data), when the caller has it already (the document is not encoded
        twice). `owned`: `data` is plain JSON (dicts with text keys, lists, text, numbers, booleans,
        None) handed over, never changed after; the Document returned holds it as it is, instead of
        a parse of what the store answered (the same values: the store keeps the text as sent)."""
        ...

    def update(self, name: str, change: Callable[[dict[str, Any] | None], dict[str, Any] | None], *, attempts: int = 5) -> Document | None:
        """Read-modify-write with CAS, retried on conflict; change returning None leaves it unchanged."""
        ...

    def now(self) -> float:
        """The time every writer of this store shares: the API server's for `kubernetes`."""
        ...


def check_name(name: str) -> str:
    """Document names become file and object names: DNS labels only (no paths, no surprises)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise UsageError(f"invalid state document name {name!r} (lowercase letters, digits and '-', at most 63)")
    return name


def encode(name: str, data: dict[str, Any]) -> str:
    import json

    if not isinstance(data, dict):
        raise UsageError(f"state document {name}: data must be a JSON object")
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    if len(text.encode()) > MAX_DOCUMENT_BYTES:
        raise UsageError(
            f"state document {name} would be {len(text.encode())} bytes, over the {MAX_DOCUMENT_BYTES} byte bound",
            hint="a ConfigMap holds at most 1 MiB; whoever writes this document must cap what it keeps",
        )
    return text


def update_loop(store: StateStore, name: str, change: Callable[[dict[str, Any] | None], dict[str, Any] | None],
                attempts: int) -> Document | None:
    """The shared read-modify-write loop: re-read and re-run `change` whenever the write meets a
    concurrent one, up to `attempts` times in all."""
    import copy

    from opsctl.errors import ConflictError

    import random
    import time

    last: ConflictError | None = None
    for attempt in range(max(1, attempts)):
        if attempt >= 2:  # writers meeting again and again: spread them out (capped, jittered)
            time.sleep(random.random() * min(0.5, 0.02 * 2 ** attempt))
        doc = store.get(name)
        new = change(copy.deepcopy(doc.data) if doc else None)
        if new is None:
            return doc
        try:
            return store.put(name, new, version=doc.version if doc else None)
        except ConflictError as exc:
            last = exc
    raise ConflictError(
        f"state document {name}: gave up after {attempts} attempts, each met a concurrent change ({last.message if last is not None else 'no attempt'})",
        hint="another opsctl keeps changing it; run again",
    )
