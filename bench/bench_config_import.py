"""What the config costs at start-up, before and after a change, side by side in the same run.

Three commands run in fresh interpreters, interleaved round by round so that load on the machine
hits each alike, for two trees of opsctl (a git revision unpacked to a temporary directory, the
"before", and this working tree, the "after"):

- `import opsctl.config` (and the `-X importtime` cumulative figure of opsctl.config itself)
- `opsctl traffic status` on the built-in embedded config, in an empty working directory
- a bare Click hello-world (the floor any Click CLI pays), the baseline the ratios are taken to
- `load_config()` of the built-in config once imported (read, build, validate), median of 30 in-process

Run: python3 -m bench.bench_config_import [--rev 5bf619b] [--rounds 9]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HELLO = """
import click

@click.command()
def hello():
    click.echo("hello")

hello()
"""
REPO = Path(__file__).resolve().parent.parent


def wall(cmd: list[str], env: dict, cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, capture_output=True)
    return (time.perf_counter() - start) * 1000


def importtime(tree: str, cwd: str) -> float:
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import opsctl.config"], cwd=cwd,
                         env={"PYTHONPATH": tree, "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True)
    for line in out.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| opsctl\.config$", line)
        if m:
            return int(m.group(1)) / 1000
    raise RuntimeError("opsctl.config not in -X importtime output")


LOAD = """
import statistics, time
from opsctl.config import load_config
load_config()  # yaml, the loader and first-use caches
runs = []
for _ in range(30):
    t = time.perf_counter(); load_config(); runs.append((time.perf_counter() - t) * 1000)
print(statistics.median(runs))
"""


def load_time(tree: str, cwd: str) -> float:
    out = subprocess.run([sys.executable, "-c", LOAD], cwd=cwd, env={"PYTHONPATH": tree, "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rev", default="5bf619b", help="the 'before' revision")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before"
        before.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.rev], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
        hello = Path(tmp) / "hello.py"
        hello.write_text(HELLO)
        trees = {"before": str(before), "after": str(REPO)}
        cases = {"hello": None, "import before": None, "import after": None,
                 "status before": None, "status after": None}
        times: dict[str, list[float]] = {k: [] for k in cases}
        imports: dict[str, list[float]] = {"before": [], "after": []}
        loads: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(args.rounds):
            for name in cases:
                cwd = Path(tmp) / f"cwd-{name.replace(' ', '-')}"
                cwd.mkdir(exist_ok=True)
                if name == "hello":
                    cmd, tree = [sys.executable, str(hello)], ""
                else:
                    what, which = name.split()
                    tree = trees[which]
                    cmd = ([sys.executable, "-c", "import opsctl.config"] if what == "import"
                           else [sys.executable, "-m", "opsctl", "traffic", "status"])
                env = {"PYTHONPATH": tree, "PATH": "/usr/bin:/bin", "HOME": tmp}
                times[name].append(wall(cmd, env, str(cwd)))
            for which, tree in trees.items():
                imports[which].append(importtime(tree, tmp))
                loads[which].append(load_time(tree, tmp))
    base = statistics.median(times["hello"])
    print(f"{args.rounds} rounds, median wall ms, ratio to a bare Click hello-world ({base:.0f} ms):")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"  {name:15s} {med:7.0f} ms  {med / base:5.2f}x")
    for which, values in imports.items():
        print(f"  -X importtime opsctl.config cumulative, {which}: {statistics.median(values):.1f} ms")
    for which, values in loads.items():
        print(f"  load_config() of the built-in config, warm, {which}: {statistics.median(values):.2f} ms")


if __name__ == "__main__":
    main()
