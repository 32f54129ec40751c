"""`opsctl slo report --all-services` at fleet scale: the recorded series of every service's SLOs in
one real Prometheus, read grouped (one query per recorded series and window for the whole fleet,
each series keyed by its `service` and `slo` labels).

The recorded series are synthesized at a coarse step (the rules' evaluation interval set to 1h, so
the base window is 1h and each event is recorded once), with the labels the generated rules give
them and values drawn here; the expected figures are computed from those values in this file.
`write_fleet` is shared with bench/bench_slo_report.py (50 services x 9 SLOs)."""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO, run_opsctl

AT = 1_795_000_000 - 1_795_000_000 % 3600  # on the hour: every sample below sits on the 1h grid
PERIOD = 28 * 86400
HOUR = 3600
SAMPLES = 700  # 29 days of hourly samples: the 28-day window must leave the oldest out
SHORT = {"5m": 300, "30m": 1800, "1h": 3600, "2h": 7200, "6h": 21600}
TEMPLATES = sorted((REPO / "examples" / "catalog" / "slos" / "chat").glob("*.yaml"))


def slo_files(service: str, out: Path, templates=TEMPLATES, prefixed: bool = True) -> list[tuple[str, str, float]]:
    """The service's SLO files from templates naming `chat` (or the shipped ones, service
    `llm-inference`): (name, backend, goal) of each."""
    out.mkdir(parents=True)
    made = []
    for path in templates:
        text = path.read_text()
        for old in ("chat", "llm-inference"):
            text = text.replace(f"service_name: {old}", f"service_name: {service}")
        text = text.replace('service="chat"', f'service="{service}"')
        text = re.sub(r"(llm_proxy_[a-z_]+)\{", lambda m: f'{m.group(1)}{{service="{service}",', text)
        text = text.replace(f'service="{service}",service="{service}",', f'service="{service}",')
        text = text.replace("'llm_proxy_request_duration_seconds_count'",
                            f"'llm_proxy_request_duration_seconds_count{{service=\"{service}\"}}'")
        name = re.search(r"^  name: (\S+)", text, re.M).group(1)
        if not prefixed:  # every service's SLOs named alike: the (service, slo) key keeps them apart
            new = re.sub(r"^(chat|llm-inference)-", "", name)
        else:
            new = f"{service}-" + re.sub(r"^(chat|llm-inference)-", "", name)
        text = text.replace(f"  name: {name}", f"  name: {new}")
        (out / path.name).write_text(text)
        backend = re.search(r"^    backend: (\S+)", text, re.M)
        goal = float(re.search(r"^  goal: (\S+)", text, re.M).group(1))
        made.append((new, backend.group(1) if backend else "all", goal))
    return made


def write_fleet(root: Path, services: list[str], url: str, *, seed: int = 7, templates=TEMPLATES,
                prefixed: bool = True, families: dict | None = None) -> tuple[Path, dict, dict]:
    """A catalog of `services` (root/services), their SLO files, and every recorded series the
    rules would record for them, as OpenMetrics lines per family (added to `families` when given:
    `write_openmetrics` writes them). Returns (catalog, families, expected figures per (service, slo))."""
    services_dir = root / "services"
    services_dir.mkdir(parents=True)
    (services_dir / "_defaults.yaml").write_text(
        "backends:\n"
        "  internal: {kind: internal}\n"
        "  databricks: {kind: vendor, vendor: databricks}\n"
        "metrics:\n"
        "  source: prometheus\n"
        f"  prometheus: {{url: \"{url}\", step: 1h, timeout: 20, report_deadline: 60}}\n"
        "slos: {dir: ../slos, period: 28d}\n"
        "alerting: {evaluation_interval: 1h}\n"
        "runbooks: {dir: ../runbooks}\n"
        "state_dir: ../state\n"
        "traffic: {default_split: {internal: 20, databricks: 80}}\n")
    rng = random.Random(seed)
    families = {} if families is None else families  # OpenMetrics: a family's samples together, oldest first
    expected = {}
    for service in services:
        (services_dir / f"{service}.yaml").write_text(f"service: {service}\n")
        for name, backend, goal in slo_files(service, root / "slos" / service, templates, prefixed):
            labels = f'backend="{backend}",service="{service}",slo="{name}"'
            valid = [rng.randint(100_000, 1_000_000) for _ in range(SAMPLES)]  # index i: AT - i hours
            bad = [round(v * rng.choice((0.0, 1e-4, 5e-4, 2e-3))) for v in valid]
            for i in reversed(range(SAMPLES)):
                t = AT - i * HOUR
                families.setdefault("valid", []).append(f"slo:sli_valid:increase1h{{{labels}}} {valid[i]} {t}")
                families.setdefault("good", []).append(f"slo:sli_good:increase1h{{{labels}}} {valid[i] - bad[i]} {t}")
            burn, ratios = {}, {}
            for window in SHORT:
                r = rng.choice((0.0, 3e-4, 4e-3, math.nan))
                ratios[window] = r
                family = families.setdefault(window, [])
                family.append(f"slo:sli_error:ratio_rate{window}{{{labels}}} {rng.random()} {AT - 2 * HOUR}")
                family.append(f"slo:sli_error:ratio_rate{window}{{{labels}}} {'NaN' if math.isnan(r) else r} {AT}")
                burn[window] = None if math.isnan(r) else r / (1 - goal)
            for window, hours in (("1d", 24), ("3d", 72)):
                burn[window] = sum(bad[:hours]) / sum(valid[:hours]) / (1 - goal)
            period_bad, period_valid = sum(bad[:672]), sum(valid[:672])
            expected[(service, name)] = {
                "sli": 1 - period_bad / period_valid, "burn_rate": burn, "events": period_valid,
                "bad_events": period_bad, "error_budget_remaining": 1 - period_bad / period_valid / (1 - goal)}
    return services_dir, families, expected


def write_openmetrics(path: Path, families: dict) -> Path:
    path.write_text("".join(line + "\n" for family in families.values() for line in family) + "# EOF\n")
    return path


def backfilled_prometheus(workdir: Path, om: Path):
    """A real Prometheus over `om`, backfilled in blocks of up to 31 days (promtool's default of 2h
    blocks makes hundreds for a month, slow to open)."""
    from tests.conftest import PrometheusServer, require_binary

    data = workdir / "prom-data"
    data.mkdir(parents=True)
    subprocess.run([require_binary("promtool"), "tsdb", "create-blocks-from", "openmetrics",
                    "--max-block-duration=744h", str(om), str(data)], check=True, capture_output=True, timeout=600)
    return PrometheusServer(workdir)


def query_requests(url: str) -> int:
    """Prometheus' own count of instant-query requests it answered (from its /metrics)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(int(float(m.group(1))) for m in
               re.finditer(r'^prometheus_http_requests_total\{[^}]*handler="/api/v1/query"[^}]*\} (\S+)$', text, re.M))


def report(catalog: Path, *args: str, service: str | None = None) -> list[dict]:
    from opsctl.clock import format_rfc3339

    chosen = ("--service", service) if service else ()
    result = run_opsctl("--catalog", catalog, *chosen, "slo", "report", "--at", format_rfc3339(AT), "-o", "json",
                        *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


SERVICES = ["chat", "code", "search"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet-report")
    # The URL is known only once the server runs: write the catalog with a placeholder, then fix it.
    families: dict = {}
    catalog, _, expected = write_fleet(root / "fleet", SERVICES, "http://127.0.0.1:1", families=families)
    same, _, expected_same = write_fleet(root / "same", ["east", "west"], "http://127.0.0.1:1", seed=11,
                                         prefixed=False, families=families)
    both = write_openmetrics(root / "recorded.om", families)
    server = backfilled_prometheus(root / "prom", both)
    for defaults in (catalog / "_defaults.yaml", same / "_defaults.yaml"):
        defaults.write_text(defaults.read_text().replace("http://127.0.0.1:1", server.url))
    yield server, catalog, expected, same, expected_same
    server.stop()


def _assert_figures(rows: list[dict], expected: dict) -> None:
    assert {(r["service"], r["name"]) for r in rows} == set(expected)
    for row in rows:
        want = expected[(row["service"], row["name"])]
        assert row["long_windows"] == "recorded", row["notes"]
        assert row["sli"] == pytest.approx(want["sli"], rel=1e-12, abs=1e-15)
        assert row["error_budget_remaining"] == pytest.approx(want["error_budget_remaining"], rel=1e-9, abs=1e-12)
        assert row["events"] == want["events"] and row["bad_events"] == want["bad_events"]
        assert set(row["burn_rate"]) == set(want["burn_rate"])
        for window, burn in want["burn_rate"].items():
            if burn is None:
                assert row["burn_rate"][window] is None, (row["name"], window)
            else:
                assert row["burn_rate"][window] == pytest.approx(burn, rel=1e-9, abs=1e-12), (row["name"], window)


@pytest.mark.prometheus
def test_the_fleet_report_reads_every_window_of_every_slo_from_the_recorded_series(fleet):
    server, catalog, expected, _same, _ = fleet
    rows = report(catalog, "--all-services")
    _assert_figures(rows, expected)
    assert not any(n for r in rows for n in r["notes"] if "period have data" in n)  # the records span it


@pytest.mark.prometheus
def test_the_fleet_report_equals_each_services_own_report(fleet):
    server, catalog, expected, _same, _ = fleet
    rows = report(catalog, "--all-services")
    for service in SERVICES:
        own = report(catalog, service=service)
        assert [r for r in rows if r["service"] == service] == [{"service": service, **r} for r in own]


@pytest.mark.prometheus
def test_the_fleet_asks_prometheus_as_often_as_one_service_does(fleet):
    """Requests grow with the windows, not with SLOs x windows: the three services' 9 SLOs cost the
    same two instant-query requests as one service's 3 (the recorded samples counted, then every
    window's sums and ratios), the answers shared between the services."""
    server, catalog, _expected, _same, _ = fleet
    before = query_requests(server.url)
    report(catalog, service="chat")
    one = query_requests(server.url) - before
    before = query_requests(server.url)
    report(catalog, "--all-services")
    every = query_requests(server.url) - before
    assert one == 2 and every == 2


@pytest.mark.prometheus
def test_two_services_with_slos_of_one_name_keep_their_own_figures(fleet):
    """The recorded series are read by (service, slo): SLOs named alike in two services never mix."""
    server, _catalog, _expected, same, expected_same = fleet
    names = {name for _service, name in expected_same}
    assert len(names) * 2 == len(expected_same)  # every name in both services
    rows = report(same, "--all-services")
    _assert_figures(rows, expected_same)
    east = {r["name"]: r["sli"] for r in rows if r["service"] == "east"}
    west = {r["name"]: r["sli"] for r in rows if r["service"] == "west"}
    assert any(east[n] != west[n] for n in names)
