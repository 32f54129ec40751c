"""Parsed YAML files kept as JSON, so a run whose files are unchanged neither imports yaml (about
10 to 15 ms of start-up: yaml.reader compiles a large Unicode regex at import) nor parses.

An entry is keyed by the file's resolved path, st_mtime_ns, st_size and st_ino, and also holds the
file's text: a hit needs all of them equal, so a rewrite within one timestamp tick is still seen.
Only data JSON carries exactly is stored (mappings with string keys, lists, strings, ints, finite
floats, booleans, None); a file holding dates or other keys is parsed every time. An entry is
written after a successful parse (duplicate keys are refused there), so a hit is of an accepted
file; validation of the data runs on every load all the same. Entries are written atomically
(opsctl.statefile) under `$XDG_CACHE_HOME/opsctl/parsed/` (default `~/.cache`); any problem
reading the cache means parsing the file, and a cache that cannot be written is skipped.
`OPSCTL_PARSE_CACHE=off` turns it off; deleting the directory clears it.
"""

from __future__ import annotations

import json
import math
import os
import zlib
from pathlib import Path
from typing import Any, Callable

from opsctl import __version__

FORMAT = 1


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "opsctl" / "parsed"


def cached_parse(path: Path, kind: str, read: Callable[[], str], parse: Callable[[str], Any]) -> Any:
    """`parse(read())`, or the data cached for the same text of `path` under `kind`.

    `read` and `parse` raise the caller's errors (file and line); nothing is cached then.
    """
    if os.environ.get("OPSCTL_PARSE_CACHE", "").strip().lower() in ("off", "0", "no", "false"):
        return parse(read())
    try:
        resolved = Path(path).resolve()
        st = os.stat(resolved)
    except (OSError, RuntimeError, ValueError):
        return parse(read())
    key = {"format": FORMAT, "opsctl": __version__, "kind": kind, "path": str(resolved),
           "mtime_ns": st.st_mtime_ns, "size": st.st_size, "ino": st.st_ino}
    entry_path = cache_dir() / f"{kind}-{zlib.crc32(str(resolved).encode()):08x}.json"
    entry = _read_entry(entry_path)
    text = read()
    if entry is not None and entry.get("key") == key and entry.get("text") == text and "data" in entry:
        return entry["data"]
    data = parse(text)
    if _json_exact(data):
        try:
            from opsctl.statefile import write_text_atomic

            write_text_atomic(entry_path, json.dumps({"key": key, "text": text, "data": data}, allow_nan=False))
        except (OSError, ValueError, RecursionError):
            pass  # a cache that cannot be written only costs the next run a parse
    return data


def _read_entry(path: Path) -> dict[str, Any] | None:
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return entry if isinstance(entry, dict) else None


def _json_exact(value: Any, depth: int = 0) -> bool:
    """True when `json.loads(json.dumps(value)) == value` with the same types throughout."""
    if depth > 200:
        return False
    if value is None or type(value) in (str, bool, int):
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is list:
        return all(_json_exact(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _json_exact(v, depth + 1) for k, v in value.items())
    return False
