"""bench/RESULTS.md: each benchmark owns one `## ` section and replaces only that one."""

from __future__ import annotations

import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def write_section(heading: str, text: str, path: Path = RESULTS) -> None:
    """Replace the section that starts with `heading` (a `## ` line) by `text`, keeping the others."""
    existing = path.read_text() if path.exists() else "# Benchmark results\n"
    kept = re.sub(rf"(?ms)^{re.escape(heading)}\b.*?(?=^## |\Z)", "", existing).rstrip()
    path.write_text(kept + "\n\n" + text.strip() + "\n")
