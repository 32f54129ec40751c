"""The embedded default: one JSON file per document under `<state_dir>/state/`, written atomically
under a file lock, with a version counter as the compare-and-swap token. One host only: flock does
not work across hosts or on network volumes, so replicas never share this store."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from opsctl.errors import ConflictError, NoDataError, OpsctlError
from opsctl.state.base import Document, check_name, encode, update_loop
from opsctl.statefile import locked, read_json, write_text_atomic


class LocalStateStore:
    backend = "local"

    def __init__(self, root: Path):
        self.root = Path(root)
        self.where = f"files under {self.root}"

    def _path(self, name: str) -> Path:
        return self.root / f"{check_name(name)}.json"

    def _read(self, name: str) -> Document | None:
        path = self._path(name)
        try:
            raw = read_json(path, None)
        except OpsctlError as exc:
            raise NoDataError(f"state document {name}: {exc.message}", hint=exc.hint) from exc
        if raw is None:
            return None
        if not isinstance(raw, dict) or not isinstance(raw.get("data"), dict):
            raise NoDataError(f"{path}: not a state document (no data object)",
                              hint="move it aside; opsctl starts a new one")
        return Document(name, raw["data"], str(raw.get("version", 0)))

    def get(self, name: str) -> Document | None:
        return self._read(name)

    def put(self, name: str, data: dict[str, Any], *, version: str | None, encoded: str | None = None,
            owned: bool = False) -> Document:
        text = encode(name, data) if encoded is None else encoded
        path = self._path(name)
        with locked(path):
            current = self._read(name)
            if version is None and current is not None:
                raise ConflictError(f"state document {name} already exists (version {current.version})")
            if version is not None and (current is None or current.version != version):
                raise ConflictError(f"state document {name} changed since it was read"
                                    f" (version {version} -> {current.version if current else 'deleted'})")
            new = str(int(current.version) + 1 if current else 1)
            write_text_atomic(path, f'{{"version":{new},"data":{text}}}\n')
        if owned:
            return Document(name, data, new)
        import json

        return Document(name, json.loads(text), new)

    def now(self) -> float:
        from opsctl.clock import wall_now

        return wall_now()  # one host: its own clock is the only one

    def update(self, name: str, change: Callable[[dict[str, Any] | None], dict[str, Any] | None], *, attempts: int = 5) -> Document | None:
        return update_loop(self, name, change, attempts)
