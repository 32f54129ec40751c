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
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results import timed, write_section  # noqa: E402
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


def measure(runs: int, env: dict, root: Path, config: Path,
            against: dict[str, str] | None = None) -> dict[str, list[tuple[float, float]]]:
    """`against`: label -> PYTHONPATH of another tree whose commands run in the same loop."""
    opsctl = [sys.executable, "-m", "opsctl", "--config", str(config), "traffic"]
    trees = {"": env["PYTHONPATH"], **(against or {})}
    commands = {"python -c pass": (lambda i: [sys.executable, "-c", "pass"], env["PYTHONPATH"])}
    for k, (label, path) in enumerate(trees.items()):
        suffix = f" ({label})" if label else ""
        # Each tree moves the split to its own values, so every set is a real change.
        commands[f"opsctl traffic status{suffix}"] = (lambda i: opsctl + ["status"], path)
        commands[f"opsctl traffic set{suffix}"] = (
            lambda i, k=k: opsctl + ["set", f"internal={20 + 10 * k + 5 * (i % 2)}",
                                     f"databricks={80 - 10 * k - 5 * (i % 2)}", "--reason", "bench", "--yes"], path)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for i in range(runs):
        for name, (build, path) in commands.items():
            times[name].append(timed(build(i + 1), {**env, "PYTHONPATH": path}, root))
    return times


def summary(times: dict[str, list[tuple[float, float]]]) -> list[dict]:
    base = statistics.median(w for w, _ in times["python -c pass"])
    rows = []
    for name, pairs in times.items():
        values = sorted(w for w, _ in pairs)
        median = statistics.median(values)
        rows.append({"command": name, "median": median, "p90": values[int(0.9 * (len(values) - 1))],
                     "min": values[0], "over_python": median - base, "cpu": statistics.median(c for _, c in pairs)})
    return rows


def render(rows: list[dict]) -> str:
    lines = ["| command | median ms | p90 ms | min ms | CPU ms | over `python -c pass` |", "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        over = "-" if r["command"] == "python -c pass" else f"+{r['over_python']:.0f} ms"
        lines.append(f"| `{r['command']}` | {r['median']:.0f} | {r['p90']:.0f} | {r['min']:.0f} | {r['cpu']:.0f} | {over} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--against", metavar="LABEL=DIR", action="append", default=[],
                        help="Also measure the opsctl package under DIR (e.g. an export of an earlier commit),"
                             " interleaved in the cached run, labelled LABEL.")
    args = parser.parse_args()
    against = dict(a.split("=", 1) for a in args.against)
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
        measure(1, base_env, root, config, against)  # warm-up: writes the .pyc files an install would have
        warm = summary(measure(args.runs, base_env, root, config, against))
    load = os.getloadavg()[0]
    verdict = ", ".join(
        f"`{r['command'].split()[-1]}` {'meets' if r['median'] < TARGET_MS else 'MISSES'} the {TARGET_MS:.0f} ms target"
        for r in warm if r["command"] != "python -c pass" and "(" not in r["command"])
    section = "\n".join([
        "## traffic",
        "",
        f"`python bench/bench_traffic.py --runs {args.runs}` on {platform.node()} ({os.cpu_count()} CPUs, Python"
        f" {platform.python_version()}, load average {load:.2f} when done), {time.strftime('%Y-%m-%d')}. Each command"
        " is a fresh process; the three run interleaved in the same loop. `set` changes the split every time"
        " (20 <-> 25 internal), so it runs every guard (bounds, freeze, rate, error budget over an embedded store"
        f" holding {DAYS} days of 10-second steps for both backends,"
        " capacity from the current request rate), writes the split atomically, appends an fsynced audit entry and"
        " records the pager change event (the local pager's ledger, fsynced). CPU ms is the child's user + system time,"
        " which a busy machine disturbs less than wall time.",
        "",
        *([f"Rows marked ({label}) run the package in `{path}` in the same loop: a before/after under one"
           " machine state (the machine is shared; absolute figures move with its load, the comparison does not)."
           for label, path in against.items()] + [""] if against else []),
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
