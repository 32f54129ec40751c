"""slo-generator as a library, with an injected client that answers from memory.

opsctl fetches every count of a report at one instant first (see report.py); slo-generator then
computes each window from those answers. That avoids its pitfalls: its own Prometheus client
ignores the timestamp, has no timeout, runs good and valid queries at different instants and
configures itself through environment variables; it `sys.exit(0)`s on an unknown backend or
policy name. Its burn rate is rounded to 0.1 and its SLI to 6 decimals, so opsctl keeps the
exact counts for its own math and cross-checks the SLI against slo-generator's.

It builds slo-generator's own `SLOReport` per window, the object `compute()` builds, rather than
calling `compute()`: compute() pretty-prints every report into a debug log even when debug is
off, about 14 ms per SLO, which dominated a report of hundreds of SLOs.

Only `opsctl slo report --cross-check` and `--export` come here: importing slo-generator costs
about 140 ms (its utils pull prometheus-http-client, requests and a consul exporter), so the
everyday report and the traffic guards never import it. Its reports are what its exporters
publish (opsctl/slo/export.py).
"""

from __future__ import annotations

import json
import logging

from typing import Any

from opsctl.errors import OpsctlError
from opsctl.slo.model import SloDefinition

# An opsctl.slo.report.SloResult; not imported, even for type checking: report imports this module.
SloResult = Any

SLI_TOLERANCE = 1e-6  # slo-generator rounds its SLI to 6 decimals


class MemoClient:
    """The `client` slo-generator's Prometheus backend calls: `.query(metric=PROMQL) -> JSON str`."""

    def __init__(self, answers: dict[str, float | None], at: float):
        self.answers = answers
        self.at = at

    def query(self, metric: str) -> str:
        if metric not in self.answers:
            raise OpsctlError(f"internal error: slo-generator asked for a query opsctl did not plan: {metric}")
        value = self.answers[metric]
        result = [] if value is None else [{"metric": {}, "value": [self.at, repr(float(value))]}]
        return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


def _shared_config(windows: dict[str, int]) -> dict[str, Any]:
    steps = [
        {
            "name": name,
            "window": seconds,
            "burn_rate_threshold": 1,
            "alert": False,
            "message_alert": "burning",
            "message_ok": "ok",
        }
        for name, seconds in windows.items()
    ]
    return {
        "backends": {"prometheus": {}},
        "exporters": {},
        "error_budget_policies": {"default": {"steps": steps}},
    }


def compute_windows(slo: SloDefinition, windows: dict[str, int], client: MemoClient) -> dict[str, dict[str, Any]]:
    """Run slo-generator over every window; returns its JSON report per window name."""
    from slo_generator import utils
    from slo_generator.report import SLOReport

    logging.getLogger("slo_generator").setLevel(logging.CRITICAL)
    document = slo.slo_generator_config()
    document["spec"]["error_budget_policy"] = "default"
    document["spec"]["exporters"] = []
    shared = _shared_config(windows)
    try:
        backend = utils.get_backend(shared, document["spec"])
        policy = utils.get_error_budget_policy(shared, document["spec"])
    except SystemExit as exc:  # slo-generator exits on unknown backends and policies
        raise OpsctlError(f"slo-generator refused {slo.file}: unknown backend or error budget policy") from exc
    reports = {}
    for step in policy["steps"]:
        report = SLOReport(config=document, backend=backend, step=step, timestamp=client.at, client=client)
        reports[step["name"]] = report.to_json()
    return reports


def generator_reports(result: SloResult, windows: dict[str, int]) -> dict[str, dict[str, Any]]:
    """slo-generator's own report (its JSON) per window that has data, computed from opsctl's counts.
    Its queries are answered with opsctl's count for the same role (see SloDefinition)."""
    slo, counts = result.slo, result.counts
    computable = {n: s for n, s in windows.items() if counts[n].has_data and counts[n].valid > 0}
    if not computable:
        return {}
    memo: dict[str, float | None] = {}
    for name, seconds in computable.items():
        c = counts[name]
        by_role = {"good": c.good, "valid": c.valid, "bad": c.valid - c.good, "sli": c.good}
        for role, query in slo.generator_queries(seconds).items():
            memo[query] = by_role[role]
    reports = compute_windows(slo, computable, MemoClient(memo, result.at))
    for name in computable:
        report = reports.get(name)
        if report is None or not report.get("valid"):
            errors = "; ".join(report.get("errors", [])) if report else "no report"
            raise OpsctlError(f"slo-generator could not compute {slo.name} over {name}: {errors}")
    return reports


def check_sli(result: SloResult, reports: dict[str, dict[str, Any]]) -> None:
    """slo-generator computed the same windows from the same counts: its SLI must agree with ours."""
    from opsctl.slo import budget

    for name, report in reports.items():
        ratio = budget.error_ratio(result.counts[name])
        if ratio is None:  # generator_reports computes only windows with valid events
            raise OpsctlError(f"internal error: no error ratio for {result.slo.name} over {name} to check")
        ours = 1.0 - ratio
        if abs(report["sli_measurement"] - round(ours, 6)) > SLI_TOLERANCE:
            raise OpsctlError(
                f"internal error: slo-generator's SLI {report['sli_measurement']} for {result.slo.name} over {name}"
                f" disagrees with opsctl's {ours:.6f}"
            )
