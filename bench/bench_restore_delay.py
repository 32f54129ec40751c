"""Benchmark: how long after the vendor recovers its traffic is back, in an embedded drill.

The shipped vendor outage (chaos/vendor-outage.yaml: 10% 5xx on Databricks at 80%), with the fault
ending by itself after `--outage` minutes and the drill kept running (the vendor answers its ticket
late, so the drill does not settle before the restore). Run twice on the shipped opsctl.yaml: as
shipped (automation.restore: the canary restore) and with automation.restore removed (the hold-down
restore: every matching alert resolved, then automation.hold_down). The delay is from the fault's end
to the automation's move that puts the split back at internal 20 / databricks 80.

    python bench/bench_restore_delay.py [--outage 10 30] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results import write_section  # noqa: E402

BACK = "-> internal 20 / databricks 80"


def scenario(outage_min: int) -> dict:
    doc = yaml.safe_load((REPO / "chaos" / "vendor-outage.yaml").read_text())
    doc["method"][0]["fault"]["duration"] = f"{outage_min}m"
    doc["method"][0]["fault"].pop("live", None)
    doc["responders"]["vendor"]["respond-after"] = "100m"
    doc["max-duration"] = "2h"
    doc["expectations"] = [e for e in doc["expectations"] if e["expect"] != "vendor-responded"] + [
        {"name": "vendor responds late (keeps the drill running)", "expect": "vendor-responded", "vendor": "databricks",
         "category": "inference", "within": "110m"}]
    return doc


def run(work: Path, outage_min: int, canary: bool) -> dict:
    cfg = (REPO / "opsctl.yaml").read_text()
    if not canary:
        cfg = "\n".join(line for line in cfg.splitlines() if not line.startswith("  restore:")) + "\n"
    where = work / ("canary" if canary else "hold-down") / f"{outage_min}m"
    where.mkdir(parents=True)
    (where / "opsctl.yaml").write_text(cfg)
    shutil.copytree(REPO / "slos", where / "slos")
    (where / "outage.yaml").write_text(yaml.safe_dump(scenario(outage_min), sort_keys=False))
    out = subprocess.run([sys.executable, "-m", "opsctl", "--config", str(where / "opsctl.yaml"), "drill", "run",
                          str(where / "outage.yaml"), "-o", "json"], cwd=where, capture_output=True, text=True,
                         timeout=900, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    report = json.loads(out.stdout)
    moves = [e for e in report["timeline"] if e["kind"] in ("failover", "restore")]
    # The last move back (a hold-down restore may return into the outage, and fail over again).
    back = next((e["offset"] for e in reversed(moves) if e["kind"] == "restore" and BACK in e["message"]), None)
    into = sum(1 for e in moves if e["kind"] == "restore" and BACK in e["message"] and e["offset"] < outage_min * 60)
    recovered = outage_min * 60.0
    return {"outage_min": outage_min, "restore": "canary" if canary else "hold-down",
            "delay_s": None if back is None else back - recovered,
            "canaries": sum("restore-canary" in e["message"] for e in moves),
            "failbacks": sum("restore-failback" in e["message"] for e in moves),
            "moves": len(moves), "into_outage": into, "spent": {s["slo"]: s.get("spent") for s in report.get("budget", {}).get("slos", [])
                                          if isinstance(s, dict) and "slo" in s}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outage", type=int, nargs="+", default=[10, 30])
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for outage in args.outage:
            for canary in (False, True):
                rows.append(run(Path(tmp), outage, canary))
                print(json.dumps(rows[-1]))
    lines = ["## Restore delay after recovery (s9-canary-restore)", "",
             "`python bench/bench_restore_delay.py`: chaos/vendor-outage.yaml (10% 5xx on Databricks at 80%,"
             " 200 rps peak, seed 7, embedded, 60 s drill ticks) with the fault ending by itself after the outage,"
             " on the shipped opsctl.yaml with and without `automation.restore`. Delay: from the fault's end to the"
             " automation's move back to internal 20 / databricks 80; spent: the Databricks availability SLO's"
             " share of its 28-day budget over the drill.", "",
             "| outage | restore | back after recovery | full restores into the outage | canaries | fail-backs | traffic moves |"
             " databricks budget spent |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        delay = "never (drill ended)" if r["delay_s"] is None else f"{r['delay_s'] / 60:.1f} min"
        spent = r["spent"].get("llm-inference-databricks-availability")
        shown = "-" if spent is None else f"{spent * 100:.1f}%"
        lines.append(f"| {r['outage_min']}m | {r['restore']} | {delay} | {r['into_outage']} | {r['canaries']} | {r['failbacks']} |"
                     f" {r['moves']} | {shown} |")
    print("\n".join(lines))
    if not args.no_write:
        write_section("## Restore delay after recovery (s9-canary-restore)", "\n".join(lines))


if __name__ == "__main__":
    main()
