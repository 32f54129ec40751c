"""Benchmark: opsctl's start-up against a bare Click hello-world measured in the same run.

Five commands run interleaved, each a fresh process, N times: `python -c pass` (the interpreter
and site alone), a Click hello-world (the floor any Click CLI pays: the interpreter, site, click),
`opsctl --help`, `opsctl traffic status` and `opsctl slo report` on the embedded default (no config file: the built-in default, state in
./.opsctl, the file actuator; the store holds 28 days of 10-second steps for both backends,
ending now). Figures are medians and bests (the fastest run: the least disturbed by a busy
machine), and ratios against the hello-world and `python -c pass` of the same run.

Then `python -X importtime` over each opsctl command (median self time per module over a few
runs) says where the rest goes, and the config's own cost (`import opsctl.config` and loading the
embedded default: its parsed YAML read back from the cache, then built) is measured in separate processes. CPU time (user + system of
each child) is recorded beside wall time: it is less disturbed by a busy machine.

Bytecode is cached as an installed package has it (PYTHONDONTWRITEBYTECODE is removed and every
command runs once before timing); so is the parsed-YAML cache (opsctl.config.cache, in a fresh
XDG_CACHE_HOME under the temp dir, filled by that first run), as on any second run of a user.

`--baseline DIR` adds `opsctl traffic status` run from another checkout (its own PYTHONPATH and
parse cache) to the same interleaved loop, so a change is read against the code before it on the
same load, not against a figure from another hour.

    python bench/bench_startup.py [--runs 31] [--no-write] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results import timed, write_section  # noqa: E402

DAYS = 28
TARGETS = {"opsctl --help": 1.1, "opsctl traffic status": 1.6, "opsctl slo report": 3.0}
HELLO = """\
import click


@click.command()
def hello():
    click.echo("hello")


hello()
"""


def environment(root: Path) -> None:
    """The embedded default's state dir (with no config file: $XDG_STATE_HOME/opsctl/<service>, the
    bench sets XDG_STATE_HOME to root/state) with 28 days of healthy traffic ending now."""
    from opsctl.metrics.embedded import EmbeddedStore
    from tests.slo import data as d

    state = root / "state" / "opsctl" / "llm-inference"
    state.mkdir(parents=True)
    end = int(time.time()) // 10 * 10
    store = EmbeddedStore.open(state / "metrics.sqlite", create=True)
    steps = DAYS * 8640
    d.write(store, {"databricks": d.make_traffic(end, steps, 8000), "internal": d.make_traffic(end, steps, 2000)})
    store.close()
    (root / "hello.py").write_text(HELLO)


def commands(root: Path) -> dict[str, list[str]]:
    opsctl = [sys.executable, "-m", "opsctl"]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "click hello-world": [sys.executable, str(root / "hello.py")],
        "opsctl --help": opsctl + ["--help"],
        "opsctl traffic status": opsctl + ["traffic", "status"],
        "opsctl slo report": opsctl + ["slo", "report"],
    }


def measure(runs: int, cmds: dict[str, list[str]], env: dict, root: Path,
            envs: dict[str, dict] | None = None) -> dict[str, list[tuple[float, float]]]:
    """Each command `runs` times, interleaved; `envs` overrides the environment of some."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in cmds}
    for _ in range(runs):
        for name, cmd in cmds.items():
            times[name].append(timed(cmd, (envs or {}).get(name, env), root))
    return times


BASELINE = "baseline: opsctl traffic status"


_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)$")


def import_profile(cmd: list[str], env: dict, cwd: Path, runs: int) -> dict[str, tuple[float, float]]:
    """Module -> (median self ms, median cumulative ms) under `-X importtime`."""
    samples: dict[str, list[tuple[int, int]]] = {}
    for _ in range(runs):
        proc = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], env=env, cwd=cwd,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for line in proc.stderr.splitlines():
            m = _LINE.match(line)
            if m:
                samples.setdefault(m.group(4), []).append((int(m.group(1)), int(m.group(2))))
    return {name: (statistics.median(s for s, _ in v) / 1000, statistics.median(c for _, c in v) / 1000)
            for name, v in samples.items() if len(v) == runs}


CONFIG_COST = """\
import time
t0 = time.perf_counter()
import opsctl.config as c
t1 = time.perf_counter()
c.load_config(None)
t2 = time.perf_counter()
print((t1 - t0) * 1000, (t2 - t1) * 1000)
"""


def config_cost(env: dict, cwd: Path, runs: int) -> tuple[float, float]:
    """Median ms of `import opsctl.config` and of loading the embedded default (the parse cache warm:
    JSON read back, then built): the typed-model engine's share of start-up."""
    imports, builds = [], []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", CONFIG_COST], env=env, cwd=cwd, capture_output=True, text=True,
                             check=True).stdout.split()
        imports.append(float(out[0]))
        builds.append(max(0.0, float(out[1])))
    return statistics.median(imports), statistics.median(builds)


def summary(times: dict[str, list[tuple[float, float]]]) -> dict[str, dict]:
    base = statistics.median(w for w, _ in times["click hello-world"])
    base_best = min(w for w, _ in times["click hello-world"])
    base_cpu = statistics.median(c for _, c in times["click hello-world"])
    python = statistics.median(w for w, _ in times["python -c pass"])
    rows = {}
    for name, pairs in times.items():
        values = sorted(w for w, _ in pairs)
        median = statistics.median(values)
        cpu = statistics.median(c for _, c in pairs)
        rows[name] = {"median": median, "p90": values[int(0.9 * (len(values) - 1))], "min": values[0],
                      "ratio": median / base, "best_ratio": values[0] / base_best, "python_ratio": median / python,
                      "cpu": cpu, "cpu_ratio": cpu / base_cpu}
    return rows


def render(rows: dict[str, dict]) -> str:
    lines = ["| command | median ms | p90 ms | best ms | CPU ms | x hello-world | best x best hello-world"
             " | x python -c pass | CPU x hello-world | target |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in rows.items():
        target = TARGETS.get(name)
        lines.append(
            f"| `{name}` | {r['median']:.0f} | {r['p90']:.0f} | {r['min']:.0f} | {r['cpu']:.0f} | {r['ratio']:.2f}x |"
            f" {r['best_ratio']:.2f}x | {r['python_ratio']:.2f}x | {r['cpu_ratio']:.2f}x |"
            f" {'-' if target is None else f'<= {target}x'} |")
    return "\n".join(lines)


def top_imports(profile: dict[str, tuple[float, float]], limit: int = 8, shared: frozenset[str] = frozenset()) -> str:
    """Self import time summed per opsctl module and per other top-level package, largest first;
    the modules in `shared` (what the hello-world imports too: site's .pth files, click) left out."""
    by: dict[str, float] = {}
    for name, (own, _) in profile.items():
        if name in shared:
            continue
        key = name if name.startswith("opsctl") else name.split(".")[0]
        by[key] = by.get(key, 0.0) + own
    total = sum(by.values())
    top = sorted(by.items(), key=lambda item: -item[1])[:limit]
    without = total - by.get("opsctl.config", 0.0)
    return (f"all imports {total:.0f} ms, {without:.0f} ms without `opsctl.config`'s own; "
            + ", ".join(f"`{n}` {s:.1f}" for n, s in top))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=31)
    parser.add_argument("--profile-runs", type=int, default=7)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--baseline", metavar="DIR", type=Path,
                        help="also run `traffic status` from this checkout in the same loop")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        environment(root)
        env = {k: v for k, v in os.environ.items() if k not in ("OPSCTL_CONFIG", "PYTHONDONTWRITEBYTECODE")}
        env["PYTHONPATH"] = str(REPO)
        env["XDG_CACHE_HOME"] = str(root / "cache")
        env["XDG_STATE_HOME"] = str(root / "state")
        cmds = commands(root)
        envs = {}
        if args.baseline is not None:
            cmds[BASELINE] = cmds["opsctl traffic status"]
            envs[BASELINE] = {**env, "PYTHONPATH": str(args.baseline.resolve()),
                              "XDG_CACHE_HOME": str(root / "cache-baseline")}
        measure(1, cmds, env, root, envs)  # warm-up: writes the .pyc files an install would have
        rows = summary(measure(args.runs, cmds, env, root, envs))
        profiles = {name: import_profile(cmd, env, root, args.profile_runs)
                    for name, cmd in cmds.items() if name.startswith("opsctl")}  # not the baseline
        hello = frozenset(import_profile(cmds["click hello-world"], env, root, args.profile_runs))
        config_import, config_build = config_cost(env, root, args.profile_runs)
    config_ms = config_import + config_build
    load = os.getloadavg()[0]
    verdict = ", ".join(
        f"`{name}` {rows[name]['ratio']:.2f}x {'meets' if rows[name]['ratio'] <= t else 'MISSES'} <= {t}x"
        for name, t in TARGETS.items())
    section = "\n".join([
        "## start-up",
        "",
        f"`python bench/bench_startup.py --runs {args.runs}` on {platform.node()} ({os.cpu_count()} CPUs, Python"
        f" {platform.python_version()}, load average {load:.2f} when done), {time.strftime('%Y-%m-%d')}."
        " Each command is a fresh process; the five run interleaved in the same loop, bytecode cached and"
        " the parse cache warm (both filled by a first run, as on a user's second run)."
        " The opsctl commands run on the embedded default (no config file; the file actuator; an embedded"
        f" store of {DAYS} days of 10-second steps for both backends, ending now; 9 shipped SLOs x 8 windows).",
        "",
        render(rows),
        "",
        *([f"`{BASELINE}` is the same command run from {args.baseline} in the same loop (its own parse cache).",
           ""] if args.baseline is not None else []),
        f"Verdict (median ratio against the hello-world of the same run): {verdict}."
        " Best-run ratios: " + ", ".join(f"`{n}` {rows[n]['best_ratio']:.2f}x" for n in TARGETS) + "."
        " CPU time ratios: " + ", ".join(f"`{n}` {rows[n]['cpu_ratio']:.2f}x" for n in TARGETS) + ".",
        "",
        "Where import time goes under `-X importtime` (median self ms of"
        f" {args.profile_runs} runs, summed per opsctl module and per other top-level package):",
        "",
        *[f"- `{name}`: {top_imports(p)}" for name, p in profiles.items()],
        "",
        "The same without the modules the hello-world imports too (the interpreter's site with its .pth"
        " files, click and what click imports: `zipfile`, `importlib`, `inspect`, `platform` are among them):",
        "",
        *[f"- `{name}`: {top_imports(p, shared=hello)}" for name, p in profiles.items()],
        "",
        f"The config's own share (median of {args.profile_runs} separate processes): `import opsctl.config`"
        f" {config_import:.0f} ms (its typed-model classes), loading the embedded default {config_build:.0f} ms"
        f" (parse cache warm: read back from JSON, then built), {config_ms:.0f} ms in all.",
        "",
    ])
    print(section)
    if not args.no_write:
        write_section("## start-up", section)


if __name__ == "__main__":
    main()
