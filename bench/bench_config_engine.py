"""What defining opsctl's config model costs under each candidate engine, measured side by side.

The candidates define the *same* classes: the config model's class bodies are taken from a source
file (by default the pre-package `opsctl/config.py` at git revision BASE, else the package's own
modules) and re-emitted under each engine, then each variant is executed in a fresh interpreter so
that nothing is cached between them:

- dataclass: `@dataclass(frozen=True)` on every class (the model before this change)
- dataclass-lean: `@dataclass(frozen=True, eq=False, repr=False, ...)`: fewer generated methods
- msgspec: `class X(msgspec.Struct, frozen=True, kw_only=True)`
- model: `class X(Model)`, opsctl.config.model's exec-free, dataclass-compatible base
- baseline: the same class bodies as plain classes (the floor: Python's own class creation)
- empty: the header's imports alone (subtracted from every figure)

Run: python3 -m bench.bench_config_engine [--rounds 7]; `--payloads` times parsing one webhook payload
with the hand-written reader at --rev against the payload models on the engine.
Figures are medians of per-round wall times; the definitions' cost is reported as a ratio to the
frozen dataclasses (the engine before this change), measured in the same run.
"""

from __future__ import annotations

import argparse
import ast
import statistics
import subprocess
import sys
import textwrap

HEADER = textwrap.dedent("""
    from __future__ import annotations
    import time
    _t0 = time.perf_counter()
    import dataclasses, os
    from dataclasses import dataclass, field
    from typing import Any, Literal
    {extra}
""")
# The engine chosen here: opsctl's own Model base (exec-free, dataclass-compatible).
MODEL_IMPORT = "from opsctl.model import Model, field"
FOOTER = "\nprint((time.perf_counter() - _t0) * 1000)\n"


def class_sources(source: str) -> list[str]:
    tree = ast.parse(source)
    out = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(
            isinstance(d, ast.Call) and getattr(d.func, "id", "") == "dataclass" for d in node.decorator_list
        ):
            node.decorator_list = []
            out.append(node)
    return out


def render(nodes: list[ast.ClassDef], engine: str) -> str:
    body = []
    for node in nodes:
        node = ast.parse(ast.unparse(node)).body[0]  # a copy
        if engine == "msgspec":
            node.bases = [ast.parse("msgspec.Struct").body[0].value]
            node.keywords = [ast.keyword("frozen", ast.Constant(True)), ast.keyword("kw_only", ast.Constant(True))]
            text = ast.unparse(node).replace("field(default_factory=", "msgspec.field(default_factory=")
            text = text.replace(", metadata={'internal': True})", ")")
            text = text.replace("field(default=", "msgspec.field(default=")
        elif engine == "dataclass":
            text = "@dataclass(frozen=True)\n" + ast.unparse(node)
        elif engine == "dataclass-lean":
            text = "@dataclass(frozen=True, eq=False, repr=False, match_args=False)\n" + ast.unparse(node)
        elif engine == "model":
            node.bases = [ast.Name("Model")]
            text = ast.unparse(node)
        else:
            text = ast.unparse(node)
        body.append(text)
    extra = {"msgspec": "import msgspec", "model": MODEL_IMPORT}.get(engine, "")
    if engine == "empty":
        body = []
    return HEADER.format(extra=extra) + "\n\n".join(body) + FOOTER


def time_once(code: str) -> float:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


PAYLOAD_TIMER = """
import importlib.util, json, sys, time
sys.path.insert(0, {tree!r})
from tests.property.test_payloads import ALERTMANAGER, PAGERDUTY
spec = importlib.util.spec_from_file_location("payloads_under_test", {path!r})
mod = importlib.util.module_from_spec(spec); sys.modules[spec.name] = mod; spec.loader.exec_module(mod)
doc = json.loads(json.dumps(ALERTMANAGER)); pd = json.loads(json.dumps(PAGERDUTY))
for _ in range(200): mod.AlertmanagerMessage.parse(doc); mod.PagerDutyEvent.parse(pd)
n = 2000
t = time.perf_counter()
for _ in range(n): mod.AlertmanagerMessage.parse(doc)
am = (time.perf_counter() - t) / n * 1e6
t = time.perf_counter()
for _ in range(n): mod.PagerDutyEvent.parse(pd)
print(am, (time.perf_counter() - t) / n * 1e6)
"""


def payloads(rev: str, rounds: int) -> None:
    """Parse time of one webhook payload: the hand-written reader at `rev` vs the engine's models."""
    import os
    import tempfile

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    old = subprocess.run(["git", "-C", repo, "show", f"{rev}:opsctl/automation/payloads.py"], capture_output=True,
                         text=True, check=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(old)
    paths = {"hand-written (before)": f.name, "engine (after)": os.path.join(repo, "opsctl/automation/payloads.py")}
    out: dict[str, list[tuple[float, float]]] = {k: [] for k in paths}
    for _ in range(rounds):
        for name, path in paths.items():
            res = subprocess.run([sys.executable, "-c", PAYLOAD_TIMER.format(tree=repo, path=path)],
                                 capture_output=True, text=True, check=True, cwd=repo)
            am, pd = map(float, res.stdout.split())
            out[name].append((am, pd))
    os.unlink(f.name)
    base = statistics.median(a for a, _ in out["hand-written (before)"])
    print(f"webhook payload parse, {rounds} rounds x 2000 parses, median us per payload:")
    for name, values in out.items():
        am = statistics.median(a for a, _ in values)
        pd = statistics.median(p for _, p in values)
        print(f"  {name:22s} Alertmanager v4 (1 alert) {am:6.1f} us ({am / base:4.2f}x)   PagerDuty v3 {pd:6.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--payloads", action="store_true", help="time webhook payload parsing instead")
    parser.add_argument("--source", default=None, help="a file holding the class definitions")
    parser.add_argument("--rev", default="5bf619b", help="git revision of the one-file opsctl/config.py")
    args = parser.parse_args()
    if args.payloads:
        payloads(args.rev, args.rounds)
        return
    if args.source:
        source = open(args.source).read()
    else:
        source = subprocess.run(["git", "show", f"{args.rev}:opsctl/config.py"], capture_output=True,
                                text=True, check=True).stdout
    nodes = class_sources(source)
    engines = ["empty", "baseline", "dataclass", "dataclass-lean", "msgspec", "model"]
    codes = {e: render(nodes, e) for e in engines}
    times: dict[str, list[float]] = {e: [] for e in engines}
    for _ in range(args.rounds):
        for e in engines:  # interleaved, so load on the machine hits every engine alike
            times[e].append(time_once(codes[e]))
    empty = statistics.median(times["empty"])
    base = statistics.median(times["dataclass"]) - empty
    print(f"{len(nodes)} classes, {args.rounds} rounds; median ms of the imports and definitions, then the")
    print(f"definitions alone (minus the header's imports, {empty:.1f} ms) as a ratio to frozen dataclasses:")
    for e in engines[1:]:
        med = statistics.median(times[e])
        print(f"  {e:15s} {med:7.1f} ms  defs {med - empty:6.1f} ms  {(med - empty) / base:5.2f}x")


if __name__ == "__main__":
    main()
