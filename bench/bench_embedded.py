"""Benchmark: the embedded store. 28 days of 10-second aggregates for 2 backends, written by
`opsctl sim generate`, and `opsctl slo report` over them; wall times of the real CLI, with
`python -c pass` measured in the same run as the baseline. Appends to bench/RESULTS.md.

    python bench/bench_embedded.py [--no-write]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results import write_section  # noqa: E402

HEADING = "## embedded store: 28 days, 2 backends"


def timed(args, cwd, runs=3):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    best = None
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(args, cwd=cwd, env=env, check=True, capture_output=True)
        elapsed = time.perf_counter() - started
        best = elapsed if best is None else min(best, elapsed)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "opsctl.yaml").write_text((REPO / "opsctl.yaml").read_text().replace("dir: slos", f"dir: {REPO / 'slos'}"))
        baseline = timed([py, "-c", "pass"], cwd, runs=5)
        generate = timed([py, "-m", "opsctl", "sim", "generate", "--days", "28", "--seed", "7"], cwd, runs=2)
        report = timed([py, "-m", "opsctl", "slo", "report", "-o", "json"], cwd, runs=5)
    text = "\n".join([
        HEADING,
        "",
        f"Wall time of the real CLI, best of runs, measured {time.strftime('%Y-%m-%d')} on this 2-core machine.",
        "",
        "| command | seconds | vs `python -c pass` | target |",
        "|---|---|---|---|",
        f"| `python -c pass` (baseline) | {baseline:.3f} | 1.0x | |",
        f"| `opsctl sim generate --days 28` (simulate and write 483,840 steps) | {generate:.2f} | {generate / baseline:.0f}x | < 10 s |",
        f"| `opsctl slo report -o json` (9 SLOs, 8 windows) | {report:.3f} | {report / baseline:.1f}x | < 1 s |",
        "",
    ])
    print(text)
    if not args.no_write:
        write_section(HEADING, text)


if __name__ == "__main__":
    main()
