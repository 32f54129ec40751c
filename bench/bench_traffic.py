"""Benchmark: `opsctl traffic status` and `opsctl traffic set` on the file actuator, against `python -c pass`.

Builds a throwaway environment (the file actuator, static capacity, 28 days of healthy client-side
metrics in the embedded store, no freeze), then runs the three commands interleaved, N times each,
as separate processes, and reports wall times. Every `set` is a real change (it alternates between
two splits), so it runs every guard: bounds, freeze, rate, error budget (the receiving backend's SLOs
over the embedded store) and capacity (the current request rate), then writes, fsyncs and audits.

Bytecode: the environment here sets PYTHONDONTWRITEBYTECODE=1, so a process may recompile opsctl
from source. An installed package has its .pyc files, so the benchmark removes that variable and runs
each command once first (warm-up) to write them; it also reports cold figures, compiled from source
in every process.

    python bench/bench_traffic.py [--runs 21] [--no-write]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results import write_section  # noqa: E402
from opsctl.metrics.embedded import EmbeddedStore  # noqa: E402
from tests.slo import data as d  # noqa: E402

END = 1_795_000_000
DAYS = 28  # a full SLO period of 10-second steps, as `opsctl sim generate --days 28` leaves it
TARGET_MS = 200.0


def environment(root: Path) -> Path:
    state = root / "state"
    state.mkdir()
    store = EmbeddedStore.open(state / "metrics.sqlite", create=True)
    steps = DAYS * 8640
    d.write(store, {"databricks": d.make_traffic(END, steps, 8000), "internal": d.make_traffic(END, steps, 2000)})
    store.close()
    config = root / "opsctl.yaml"
    config.write_text(textwrap.dedent(f"""\
        service: llm-inference
        backends:
          internal: {{kind: internal}}
          databricks: {{kind: vendor, vendor: databricks}}
        metrics: {{source: embedded, max_data_age: 3650d}}  # the simulated days end at a fixed past instant
        slos: {{dir: "{REPO / 'slos'}", period: 28d}}
        state_dir: "{state}"
        traffic:
          actuator: file
          default_split: {{databricks: 80, internal: 20}}
          rate_limit: {{max_changes: 1000, window: 1h}}
        capacity: {{backend: internal, source: static, replicas: 10, rps_per_replica: 150, headroom: 0.25, max_replicas: 10}}
        freezes: []
        """))
    return config


def timed(cmd: list[str], env: dict, cwd: Path) -> float:
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = (time.perf_counter() - started) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr}")
    return elapsed


def measure(runs: int, env: dict, root: Path, config: Path) -> dict[str, list[float]]:
    opsctl = [sys.executable, "-m", "opsctl", "--config", str(config), "traffic"]
    commands = {
        "python -c pass": lambda i: [sys.executable, "-c", "pass"],
        "opsctl traffic status": lambda i: opsctl + ["status"],
        "opsctl traffic set": lambda i: opsctl + ["set", f"internal={20 + 5 * (i % 2)}", f"databricks={80 - 5 * (i % 2)}",
                                                  "--reason", "bench", "--yes"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for i in range(runs):
        for name, build in commands.items():
            times[name].append(timed(build(i + 1), env, root))
    return times


def summary(times: dict[str, list[float]]) -> list[dict]:
    base = statistics.median(times["python -c pass"])
    rows = []
    for name, values in times.items():
        values = sorted(values)
        median = statistics.median(values)
        rows.append({"command": name, "median": median, "p90": values[int(0.9 * (len(values) - 1))],
                     "min": values[0], "over_python": median - base})
    return rows


def render(rows: list[dict]) -> str:
    lines = ["| command | median ms | p90 ms | min ms | over `python -c pass` |", "|---|---:|---:|---:|---:|"]
    for r in rows:
        over = "-" if r["command"] == "python -c pass" else f"+{r['over_python']:.0f} ms"
        lines.append(f"| `{r['command']}` | {r['median']:.0f} | {r['p90']:.0f} | {r['min']:.0f} | {over} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        config = environment(root)
        base_env = {k: v for k, v in os.environ.items() if k not in ("OPSCTL_CONFIG", "PYTHONDONTWRITEBYTECODE")}
        base_env["PYTHONPATH"] = str(REPO)
        # Cold: a copy of the package without __pycache__, never written to, so opsctl is compiled
        # from source in every process (the standard library and site-packages keep their .pyc).
        shutil.copytree(REPO / "opsctl", root / "src" / "opsctl", ignore=shutil.ignore_patterns("__pycache__"))
        cold_env = {**base_env, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(root / "src")}
        cold = summary(measure(max(5, args.runs // 3), cold_env, root, config))
        measure(1, base_env, root, config)  # warm-up: writes the .pyc files an install would have
        warm = summary(measure(args.runs, base_env, root, config))
    load = os.getloadavg()[0]
    verdict = ", ".join(
        f"`{r['command'].split()[-1]}` {'meets' if r['median'] < TARGET_MS else 'MISSES'} the {TARGET_MS:.0f} ms target"
        for r in warm if r["command"] != "python -c pass")
    section = "\n".join([
        "## traffic",
        "",
        f"`python bench/bench_traffic.py --runs {args.runs}` on {platform.node()} ({os.cpu_count()} CPUs, Python"
        f" {platform.python_version()}, load average {load:.2f} when done), {time.strftime('%Y-%m-%d')}. Each command"
        " is a fresh process; the three run interleaved in the same loop. `set` changes the split every time"
        " (20 <-> 25 internal), so it runs every guard (bounds, freeze, rate, error budget over an embedded store"
        f" holding {DAYS} days of 10-second steps for both backends,"
        " capacity from the current request rate), writes the split atomically and appends an fsynced audit entry.",
        "",
        "With bytecode cached (as an installed package has it):",
        "",
        render(warm),
        "",
        f"Cold, opsctl compiled from source in every process (no .pyc; {max(5, args.runs // 3)} runs):",
        "",
        render(cold),
        "",
        f"Verdict (median, cached bytecode): {verdict}. Neither path imports kubernetes, slo-generator or"
        " pagerduty; the error-budget guard evaluates SLO status with `build_report(..., cross_check=False)`.",
        "",
    ])
    print(section)
    if not args.no_write:
        write_section("## traffic", section)


if __name__ == "__main__":
    main()
