"""bench/RESULTS.md: each benchmark owns one `## ` section and replaces only that one."""

from __future__ import annotations

import re
import resource
import subprocess
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def write_section(heading: str, text: str, path: Path = RESULTS) -> None:
    """Replace the section that starts with `heading` (a `## ` line) by `text`, keeping the others."""
    existing = path.read_text() if path.exists() else "# Benchmark results\n"
    kept = re.sub(rf"(?ms)^{re.escape(heading)}[ \t]*$.*?(?=^## |\Z)", "", existing).rstrip()  # that heading only
    path.write_text(kept + "\n\n" + text.strip() + "\n")


def timed(cmd: list[str], env: dict, cwd: Path) -> tuple[float, float]:
    """Run one command: (wall ms, CPU ms of the child: user + system, which a busy machine disturbs
    less). A failing command ends the benchmark with its stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr}")
    return elapsed, (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
