"""Every selector opsctl generates carries its service (`metrics.service_label`), so services that
share one Prometheus never sum each other's traffic, and their rules load together."""

from __future__ import annotations

import json
import subprocess
import textwrap
import urllib.request
from pathlib import Path

import pytest
import yaml

from opsctl.config.catalog import Catalog
from opsctl.metrics import schema
from opsctl.metrics.promql import format_selector, selectors_in
from tests.conftest import PrometheusServer, backfill_openmetrics, require_binary, run_opsctl

END = 1_763_596_800  # 2026-11-20T00:00:00Z
WINDOW = 3600
PEAKS = {"chat": 20.0, "search": 60.0}
# libyaml's parser and emitter where PyYAML has them: fifty services' rules are about 150,000 YAML
# nodes, read back and written once more here, which in pure Python took over half the fifty-service
# test's CPU. Same documents either way (the tag resolution is PyYAML's own in both).
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def write_catalog(root: Path, services: list[str], extra: str = "") -> Path:
    directory = root / "services"
    directory.mkdir(parents=True)
    (directory / "_defaults.yaml").write_text(textwrap.dedent("""\
        backends:
          internal: {kind: internal}
          databricks: {kind: vendor, vendor: databricks}
        metrics: {source: prometheus, max_data_age: 3650d}
        slos: {dir: ../slos}
        state_dir: ../state
        capacity: {backend: internal, source: static, replicas: 4, rps_per_replica: 100}
        cost:
          backends:
            internal: {gpu: {gpu_hourly_price: 2.0}}
            databricks: {per_token: {input_per_million: 1.0, output_per_million: 3.0}}
        """) + textwrap.dedent(extra))
    for service in services:
        (directory / f"{service}.yaml").write_text(f"service: {service}\n")
        slos = root / "slos" / service
        slos.mkdir(parents=True)
        for backend in ("internal", "databricks"):
            (slos / f"{backend}-availability.yaml").write_text(textwrap.dedent(f"""\
                apiVersion: sre.google.com/v2
                kind: ServiceLevelObjective
                metadata:
                  name: {service}-{backend}-availability
                  labels: {{service_name: {service}, feature_name: {backend}, slo_name: availability, backend: {backend}}}
                spec:
                  description: {service} on {backend}
                  backend: prometheus
                  method: good_bad_ratio
                  exporters: []
                  service_level_indicator:
                    filter_good: 'llm_proxy_requests_total{{service="{service}",backend="{backend}",outcome="ok"}}'
                    filter_valid: 'llm_proxy_requests_total{{service="{service}",backend="{backend}",outcome=~"ok|throttled|server_error|timeout"}}'
                  goal: 0.999
                """))
    return directory


# -- the parser the checks use -----------------------------------------------------------------


def test_selectors_in_finds_every_vector_selector_and_nothing_else():
    expr = ('1 - sum by (backend) (rate(a_total{service="s",le=~"1|1\\\\.0*"}[5m] offset 1h))'
            ' / on(backend) group_left(x) sum without (pod) (b) > bool 0.5 and {__name__="c"}'
            ' or histogram_quantile(0.99, d_bucket[10m:1m]) unless count(e) # comment f')
    assert [format_selector(s) for s in selectors_in(expr)] == [
        'a_total{service="s",le=~"1|1\\\\.0*"}', "b", '{__name__="c"}', "d_bucket", "e"]


# -- the generated queries ---------------------------------------------------------------------


class Recording:
    """The real metric source, with the expressions it was asked kept for inspection."""

    def __init__(self, source):
        self.source, self.asked = source, []

    def query_many(self, exprs, at):
        self.asked.extend(exprs)
        return self.source.query_many(exprs, at)

    def __getattr__(self, name):
        return getattr(self.source, name)


def _series(service: str):
    from opsctl.metrics.simulator import simulate

    return simulate(END - 2 * WINDOW, END, backends={"internal": "internal", "databricks": "vendor"},
                    split={"internal": 40, "databricks": 60}, peak_rps=PEAKS[service], seed=len(service))


def _in_window(series, columns) -> float:
    """What the series hold in (END - WINDOW, END], summed over backends and `columns`."""
    total = 0.0
    for s in series.values():
        inside = (s.timestamps > END - WINDOW) & (s.timestamps <= END)
        total += sum(float(s.columns[c][inside].sum()) for c in columns)
    return total


@pytest.fixture(scope="module")
def shared_prometheus(tmp_path_factory):
    """One real Prometheus holding two services' proxy metrics (chat at a third of search's rate),
    each exported with its service label; the catalog that describes them."""
    from opsctl.metrics.simulator import export_openmetrics

    root = tmp_path_factory.mktemp("shared")
    directory = write_catalog(root, ["chat", "search"])
    work = root / "prom"
    (work / "prom-data").mkdir(parents=True)
    series = {}
    for service in ("chat", "search"):
        series[service] = _series(service)
        path = root / f"{service}.om"
        export_openmetrics(series[service], path, labels={"service": service})
        if service == "chat":  # the second file is the server's own backfill
            backfill_openmetrics(path, work / "prom-data")
    server = PrometheusServer(work, openmetrics=root / "search.om")
    yield directory, server, series
    server.stop()


def _configs(directory: Path, url: str):
    from dataclasses import replace

    out = {}
    for cfg in Catalog(directory).load_all():
        prometheus = replace(cfg.metrics.prometheus, url=url)
        out[cfg.service] = replace(cfg, metrics=replace(cfg.metrics, prometheus=prometheus))
    return out


def _assert_scoped(exprs, service):
    proxy = [s for e in exprs for s in selectors_in(e) if s.metric.startswith("llm_proxy_")]
    assert proxy, exprs
    for selector in proxy:
        assert any(m.label == "service" and m.op == "=" and m.value == service for m in selector.matchers), \
            format_selector(selector)


def test_capacity_shadow_cost_and_quality_ask_only_for_their_own_services_traffic(shared_prometheus):
    from opsctl.metrics.base import open_source
    from opsctl.quality.cost import cost_report
    from opsctl.quality.shadow import shadow_report
    from opsctl.traffic.capacity import Capacity

    directory, server, series = shared_prometheus
    for service, cfg in _configs(directory, server.url).items():
        own = series[service]
        other = series["search" if service == "chat" else "chat"]
        source = Recording(open_source(cfg))

        reading = Capacity(cfg, lambda: source, lambda: END).read()
        window = cfg.capacity.rate_window.seconds
        total_rps = sum(float(s.columns[c][s.timestamps > END - window].sum())
                        for s in own.values() for c in schema.REQUEST_COLUMNS) / window
        assert reading.total_rps == pytest.approx(total_rps, rel=0.01)

        shadow = shadow_report(source, shadow="internal", primary=["databricks"], real=["databricks"], at=END,
                               settings=cfg.quality.shadow, window_seconds=WINDOW, share=1.0,
                               scope=cfg.service_matcher)
        requests = _in_window({"internal": own["internal"]}, schema.REQUEST_COLUMNS)
        assert shadow.figures["shadow"].requests == pytest.approx(requests, rel=0.01)

        cost = cost_report(source, cfg.cost, at=END, window_seconds=WINDOW, scope=cfg.service_matcher)
        tokens = _in_window(own, ("prompt_tokens", "completion_tokens"))
        both = tokens + _in_window(other, ("prompt_tokens", "completion_tokens"))
        assert cost.total_tokens == pytest.approx(tokens, rel=0.01)
        assert abs(cost.total_tokens - both) > 0.2 * both  # the other service's tokens are not in it

        from opsctl.quality.live import QualityEvaluator
        from opsctl.quality.rules import plan_quality

        plan = plan_quality(cfg)
        before = len(source.asked)
        QualityEvaluator(plan, source).suppression(plan.alerts[0], END)  # the in-process quality rules
        assert len(source.asked) > before

        _assert_scoped(source.asked, service)


def test_the_embedded_store_answers_only_its_own_services_matcher(tmp_path):
    from opsctl.metrics.embedded import EmbeddedStore
    from opsctl.metrics.simulator import write_to_store

    store = EmbeddedStore.open(tmp_path / "m.sqlite", create=True, labels={"service": "chat"})
    write_to_store(store, _series("chat"))
    own, other, bare = store.query_many([f'sum(increase({schema.REQUESTS}{{service="{s}"}}[3600s]))' if s else
                                         f"sum(increase({schema.REQUESTS}[3600s]))" for s in ("chat", "search", "")],
                                        END)
    assert own == bare and own == pytest.approx(_in_window(_series("chat"), schema.REQUEST_COLUMNS))
    assert other is None


# -- the rules of many services in one file ----------------------------------------------------


def _fleet_rules(tmp_path: Path, services: list[str], extra: str = "") -> tuple[Path, list[dict]]:
    """`opsctl slo rules` of every service (its SLO groups and its quality group), in one file."""
    directory = write_catalog(tmp_path, services, extra)
    groups = []
    for service in services:
        result = run_opsctl("--catalog", directory, "--service", service, "slo", "rules")
        assert result.exit_code == 0, result.output
        for group in yaml.load(result.stdout, Loader=YAML_LOADER)["groups"]:
            groups.append({**group, "_service": service})
    path = tmp_path / "fleet-rules.yaml"
    path.write_text(yaml.dump({"groups": [{k: v for k, v in g.items() if k != "_service"} for g in groups]},
                              Dumper=YAML_DUMPER))
    return path, groups


def _check_fleet(path: Path, groups: list[dict], services: list[str]) -> None:
    names = [g["name"] for g in groups]
    assert len(names) == len(set(names)), "two services' rule groups share a name"
    checked = subprocess.run([require_binary("promtool"), "check", "rules", str(path)],
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    slos_of = {s: {f"{s}-{b}-availability" for b in ("internal", "databricks")} for s in services}
    quality = [g["_service"] for g in groups if g["name"] == f"opsctl-quality-{g['_service']}"]
    assert sorted(quality) == sorted(services)  # one quality group per service
    for group in groups:
        service = group["_service"]
        assert group["name"] in (f"opsctl-quality-{service}",) or group["name"].startswith(f"opsctl-slo-{service}-")
        for rule in group["rules"]:
            if "alert" in rule or "slo" in rule.get("labels", {}):
                assert rule["labels"]["service"] == service
            else:  # a quality recording rule keeps the service label of the series it sums
                assert rule["expr"].count("sum by (service, backend)") >= 1, rule["expr"]
            for selector in selectors_in(rule["expr"]):
                labels = {m.label: m.value for m in selector.matchers if m.op == "="}
                if selector.metric.startswith(("llm_proxy_", "backend:llm_proxy_")):
                    assert labels.get("service") == service, (group["name"], rule["expr"])
                elif selector.metric.startswith("slo:"):  # a recorded series: one of this service's SLOs
                    assert labels.get("slo") in slos_of[service], (group["name"], rule["expr"])


def test_two_services_rules_pass_promtool_as_one_file_and_load_in_one_prometheus(tmp_path):
    services = ["chat", "search"]
    path, groups = _fleet_rules(tmp_path, services)
    _check_fleet(path, groups, services)
    work = tmp_path / "prom"
    work.mkdir()
    server = PrometheusServer(work, rule_files=[path])
    try:
        with urllib.request.urlopen(f"{server.url}/api/v1/rules", timeout=10) as response:
            loaded = json.load(response)["data"]["groups"]
    finally:
        server.stop()
    assert sorted(g["name"] for g in loaded) == sorted(g["name"] for g in groups)


@pytest.mark.slow
def test_fifty_services_rules_pass_promtool_as_one_file_with_no_clash(tmp_path):
    services = [f"svc-{i:02d}" for i in range(50)]
    path, groups = _fleet_rules(tmp_path, services)
    assert {g["_service"] for g in groups} == set(services)
    _check_fleet(path, groups, services)
