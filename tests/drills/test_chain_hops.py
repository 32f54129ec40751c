"""Chain drill hops decided without waiting: an alert no policy matches ends the chain at the policy
hop, naming it; the paged verdict reads the incident's title for the scenario's `mentions`; a
quality scenario is refused with the reason instead of waiting out its timeout."""

from __future__ import annotations

import pytest

from tests.conftest import REPO
from tests.fakes.loopback import LoopbackServer, Response

LATENCY_PAGE = {"alertname": "SloBurnRatePage", "slo": "llm-inference-databricks-latency-1s",
                "backend": "databricks", "severity": "page", "category": "latency", "long_window": "1h",
                "short_window": "5m"}
AVAILABILITY_PAGE = {**LATENCY_PAGE, "slo": "llm-inference-databricks-availability", "category": "availability"}


class ServeMetricsEndpoint(LoopbackServer):
    """serve's /metrics as opsctl's own ServeMetrics renders it."""

    def __init__(self, accepted: int, no_policy: int):
        super().__init__()
        from opsctl.automation.metrics import ServeMetrics

        metrics = ServeMetrics(lambda: 0, 10)
        for _ in range(accepted):
            metrics.delivery("alertmanager", "accepted")
        metrics.events.labels("no_policy").inc(no_policy)
        self.body = metrics.render()[0]

    def handle(self, request):
        return Response(200, self.body, {"Content-Type": "text/plain"})


def collector_for(serve_url: str, log, policies):
    from opsctl.drills.chain.collector import Collector
    from opsctl.drills.chain.hops import Targets

    targets = Targets(prometheus="", alertmanager="", serve=serve_url, serve_log=log, backend="databricks",
                      expect_failover=True, ticket_vendor="databricks", ticket_category="inference",
                      policies=policies)
    return Collector(targets, sink=None, desks=lambda vendor: None, audit=None, say=lambda *a: None)


def availability_only():
    """One policy for the 1h/5m and 6h/30m pages of availability SLOs only (not the fast tier's)."""
    from opsctl.automation.policy import CompiledPolicy
    from opsctl.config import AutomationPolicy
    from opsctl.model import build

    return (CompiledPolicy.of(build(AutomationPolicy, {
        "name": "availability-only", "match": {"alertname": "SloBurnRatePage", "severity": "page"},
        "match_re": {"slo": ".+-availability"}, "actions": {"failover": {}, "ticket": {"category": "inference"}}},
        "test policy")),)


def test_a_page_no_policy_matches_fails_the_policy_hop_at_once_and_the_hops_after_it(tmp_path):
    log = tmp_path / "serve.log"
    log.write_text("")
    with ServeMetricsEndpoint(accepted=1, no_policy=1) as serve:
        collector = collector_for(serve.url, log, availability_only())
        collector.hops["rule-firing"].reach(100.0, "Prometheus: latency page firing")
        collector.firing_labels = [dict(LATENCY_PAGE)]
        assert not collector.settled()
        collector._serve()
    policy = collector.hops["policy"]
    assert policy.at is None and policy.failed.startswith(
        "no policy matched alertname=SloBurnRatePage, slo=llm-inference-databricks-latency-1s, backend=databricks")
    assert "availability-only" in policy.failed
    assert collector.hops["actuator"].failed.startswith("cannot happen: the hop policy failed")
    assert collector.hops["ticket"].failed.startswith("cannot happen")
    # Only the acknowledgement is left to wait for: the chain does not wait out its timeout.
    open_hops = [k for k, h in collector.hops.items() if h.required and h.at is None and h.failed is None]
    assert "policy" not in open_hops and "actuator" not in open_hops and "ticket" not in open_hops


def test_a_fast_tier_page_no_policy_matches_waits_for_the_slower_page_a_policy_does_match(tmp_path):
    """The fast-burn tier fires first and no policy takes it; the 1h/5m page a policy matches comes a
    minute later: the policy hop can still happen, so the chain waits for it."""
    log = tmp_path / "serve.log"
    log.write_text("")
    fast = {**AVAILABILITY_PAGE, "alertname": "SloFastBurnPage", "long_window": "5m", "short_window": "1m"}
    with ServeMetricsEndpoint(accepted=1, no_policy=1) as serve:
        collector = collector_for(serve.url, log, availability_only())
        collector.hops["rule-firing"].reach(100.0, "Prometheus: fast-burn page firing")
        collector.firing_labels = [fast]
        collector.page_rules = [fast, {k: v for k, v in AVAILABILITY_PAGE.items() if k not in ("long_window",
                                                                                               "short_window")}]
        collector._serve()
    assert collector.hops["policy"].failed is None and collector.hops["actuator"].failed is None


def _scenario(mentions):
    import yaml

    from opsctl.drills.scenario.parse import parse_scenario

    data = yaml.safe_load((REPO / "chaos" / "auth-throttling.yaml").read_text())
    for e in data["expectations"]:
        if e["expect"] == "paged":
            e["mentions"] = mentions
    return parse_scenario(data, "auth-throttling.yaml")


@pytest.mark.parametrize("title, passed", [
    ("llm-inference-databricks-availability: error budget burning 84.00x over 1h", False),
    ("llm-inference-databricks-availability: auth failures (401/403) at 84x", True),
])
def test_the_chains_paged_verdict_checks_the_title_names_the_cause(title, passed):
    from opsctl.drills.chain.observed import judge
    from opsctl.drills.expectations import Observations, PageSeen

    obs = Observations(t0=100.0, method_done=True, pages=[PageSeen("k1", 160.0, title)], paged_at=160.0,
                       page_title=title)
    judged = judge(_scenario(["auth"]), obs, lambda name: f"llm-inference-{name}", 400.0)
    [paged] = [v for v in judged if v.expect == "paged"]
    assert paged.passed is passed
    assert title in paged.detail
    if not passed:
        assert paged.reason == "the page does not name auth"


def test_a_quality_scenario_is_refused_by_the_chain_with_the_reason(drill_env):
    result = drill_env.run("drill", "run", str(REPO / "chaos" / "quality-regression.yaml"), "--chain",
                           "--routing", str(REPO / "deploy" / "alertmanager.yml"), "-o", "json")
    assert result.exit_code == 2, result.output
    assert "a chain drill does not run quality scenarios yet" in result.stderr
    assert "compare with 1d earlier" in result.stderr and "run it embedded" in result.stderr
    assert not drill_env.runs(), "nothing started"
    assert "Traceback" not in result.output


class TextMetricsEndpoint(LoopbackServer):
    def __init__(self, body: str):
        super().__init__()
        self.body = body

    def handle(self, request):
        return Response(200, self.body.encode(), {"Content-Type": "text/plain"})


def test_a_live_serve_action_series_without_a_status_label_is_counted_by_the_live_collector(tmp_path):
    """serve's action counter keyed (policy, action, status): a series lacking a label counts under ""
    (it was keyed None, and the baseline's '|'.join raised TypeError on the first poll)."""
    from opsctl.drills.chain.hops import Targets
    from opsctl.drills.chain.live import LiveCollector

    def body(n: int) -> str:
        return (f'opsctl_webhook_deliveries_total{{source="alertmanager",result="accepted"}} {n}\n'
                f'opsctl_automation_actions_total{{policy="availability-only",action="failover"}} {n}\n')

    with TextMetricsEndpoint(body(1)) as serve:
        targets = Targets(prometheus="", alertmanager="", serve=serve.url, serve_log=tmp_path / "serve.log",
                          backend="databricks", expect_failover=False, ticket_vendor=None, ticket_category=None)
        collector = LiveCollector(targets, None, lambda vendor: None, None, lambda *a: None, cfg=None, t0=0.0,
                                  original=None)
        collector._serve()  # the baseline: what serve counted before the drill
        assert collector.baseline == {"accepted": 1.0, "availability-only|failover|": 1.0}
        serve.body = body(3)
        collector._serve()
    policy = collector.hops["policy"]
    assert policy.at is not None
    assert policy.evidence == "opsctl serve /metrics: policy availability-only: failover "
    assert collector.hops["serve"].evidence.startswith("opsctl serve accepted 2 new Alertmanager delivery(ies)")


class RulesEndpoint(LoopbackServer):
    """Prometheus' /api/v1/rules?type=alert (its JSON shape) with two page rules firing for databricks:
    the first in the API's order turned firing later than the second."""

    def __init__(self):
        super().__init__()
        fast = {**AVAILABILITY_PAGE, "alertname": "SloFastBurnPage", "long_window": "5m", "short_window": "1m"}
        self.body = {"status": "success", "data": {"groups": [{
            "name": "opsctl-slo", "interval": 1.0, "rules": [
                {"name": "SloFastBurnPage", "type": "alerting", "health": "ok", "duration": 0.0,
                 "labels": {"severity": "page"}, "lastEvaluation": "2026-12-07T10:00:40Z",
                 "alerts": [{"labels": fast, "state": "firing", "activeAt": "2026-12-07T10:00:35Z", "value": "320"}]},
                {"name": "SloBurnRatePage", "type": "alerting", "health": "ok", "duration": 2.0,
                 "labels": {"severity": "page"}, "lastEvaluation": "2026-12-07T10:00:40Z",
                 "alerts": [{"labels": AVAILABILITY_PAGE, "state": "firing", "activeAt": "2026-12-07T10:00:30Z",
                             "value": "25"}]},
            ]}]}}

    def handle(self, request):
        import json

        return Response(200, json.dumps(self.body).encode(), {"Content-Type": "application/json"})


def test_one_poll_finding_two_page_alerts_firing_takes_the_earliest_instant_not_the_first_listed(tmp_path):
    """A slow poll (a loaded machine) can find two of the backend's page alerts firing at once: the
    rule-firing hop is the earlier one's evaluation (10:00:30 pending + for: 2s at a 1 s interval =
    10:00:32), not the first rule the API lists (10:00:35), so it can never come after the page it
    caused."""
    import calendar
    import dataclasses

    log = tmp_path / "serve.log"
    log.write_text("")
    with RulesEndpoint() as rules:
        collector = collector_for("", log, availability_only())
        collector.targets = dataclasses.replace(collector.targets, prometheus=rules.url)
        collector._prometheus()
    base = calendar.timegm((2026, 12, 7, 10, 0, 0, 0, 0, 0))
    assert collector.hops["rule-pending"].at == base + 30
    assert collector.hops["rule-firing"].at == base + 32
    assert "SloBurnRatePage" in collector.hops["rule-firing"].evidence


class ResetAlertEndpoint(RulesEndpoint):
    """Prometheus after the fast tier's alert fired (10:00:20, `for: 0`), paged, and went inactive
    before the collector's first poll: the rules API shows only the 1h/5m alert (pending 10:00:30,
    for: 2s), while the ALERTS series still holds the fast alert's firing sample."""

    def __init__(self):
        super().__init__()
        self.body["data"]["groups"][0]["rules"][0]["alerts"] = []
        self.ranges: list[str] = []

    def handle(self, request):
        import json
        from urllib.parse import parse_qs, urlsplit

        url = urlsplit(request.path)
        if url.path == "/api/v1/query_range":
            self.ranges.append(parse_qs(url.query)["query"][0])
            fast = {"__name__": "ALERTS", "alertstate": "firing", **AVAILABILITY_PAGE, "alertname": "SloFastBurnPage",
                    "long_window": "5m", "short_window": "1m"}
            firing = '{alertstate="firing"' in self.ranges[-1]
            result = [{"metric": fast, "values": [[1796637625.0, "1796637620"], [1796637630.0, "1796637620"]]}] \
                if firing else []
            return Response(200, json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})
                            .encode(), {"Content-Type": "application/json"})
        return super().handle(request)


def test_an_alert_that_fired_and_reset_before_the_first_poll_is_read_from_prometheus_history(tmp_path):
    """stop 42's CI and session 13's: rule-firing came 2.9 s and 6.4 s after the page it caused. A
    late poll no longer sees the alert that fired first; its ALERTS series does: the hop is that
    evaluation (10:00:20), not the 1h/5m alert's firing (10:00:32), and pending is no later."""
    import calendar
    import dataclasses

    base = calendar.timegm((2026, 12, 7, 10, 0, 0, 0, 0, 0))
    assert base + 20 == 1796637620  # the sample the fake holds, written by hand above
    log = tmp_path / "serve.log"
    log.write_text("")
    with ResetAlertEndpoint() as prometheus:
        collector = collector_for("", log, availability_only())
        collector.targets = dataclasses.replace(collector.targets, prometheus=prometheus.url)
        collector.hops["fault"].reach(base + 10, "fault switched on")
        collector._prometheus()
        collector._prometheus()  # reached: Prometheus' history is not asked again
    assert collector.hops["rule-firing"].at == base + 20
    assert collector.hops["rule-pending"].at == base + 20
    assert "SloFastBurnPage" in collector.hops["rule-firing"].evidence
    assert "ALERTS series" in collector.hops["rule-firing"].evidence
    assert len(prometheus.ranges) == 2  # one per state, first poll only
    assert all('severity="page",backend=~"databricks"' in q for q in prometheus.ranges)
