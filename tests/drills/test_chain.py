"""Chain drills: the fault sent down the real chain (exporter, Prometheus with the generated rules,
Alertmanager with deploy/alertmanager.yml's routing, the PagerDuty endpoint, opsctl serve, the
actuator, the ticket ledger), and a broken hop failing the drill by name."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
import yaml

from tests.conftest import REPO, require_binary
from tests.drills.conftest import DrillEnv, audit, split_file, tickets


def _need_binaries():
    for name in ("prometheus", "promtool", "prometheus-alertmanager", "amtool"):
        require_binary(name)


def _fast_outage(data: dict) -> None:
    """vendor-outage with half the vendor's requests failing and no pause: the burn-rate pair 1h/5m
    crosses its factor within seconds, so the drill spends its time in the chain, not waiting."""
    step = data["method"][0]
    step["pauses"] = {"before": "0s"}
    step["fault"]["rate"] = 0.5
    data["responders"]["on-call"]["acknowledge-after"] = "5s"


def _routing(tmp_path, edit=None):
    data = yaml.safe_load((REPO / "deploy" / "alertmanager.yml").read_text())
    if edit is not None:
        edit(data)
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _hops(report: dict) -> dict:
    return {h["hop"]: h for h in report["hops"]}


@pytest.mark.slow
@pytest.mark.prometheus
@pytest.mark.alertmanager
def test_a_vendor_outage_travels_every_hop_of_the_chain_and_each_is_measured(tmp_path):
    _need_binaries()
    # The shipped config's internal capacity (6 x 40 requests/s) cannot carry the whole simulated
    # load near the US afternoon peak, so its failover keeps a few points on databricks by the hour
    # the test runs. Capacity is not this test's subject: sized here to carry everything at any hour,
    # the failover moves all of it (the partial move has its own tests).
    config = (REPO / "opsctl.yaml").read_text().replace("  rps_per_replica: 40\n", "  rps_per_replica: 400\n")
    assert "rps_per_replica: 400" in config
    (tmp_path / "drill").mkdir()
    drill_env = DrillEnv(tmp_path / "drill", config)
    scenario = drill_env.scenario("vendor-outage", _fast_outage)
    result = drill_env.run("drill", "run", str(scenario), "--chain", "--routing", str(_routing(tmp_path)),
                           "-o", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    run = drill_env.run_dir()
    assert report["outcome"] == "passed" and report["mode"] == "chain"
    hops = _hops(report)
    assert all(h["passed"] for h in hops.values()), [h for h in hops.values() if not h["passed"]]
    # Causality, from each component's own clock: the rule fires before anyone is paged or acts,
    # the page precedes its acknowledgement by at least the on-call's 5 s.
    t = {k: h["at"] for k, h in hops.items()}
    said = {k: (h["at"], h.get("evidence")) for k, h in hops.items()}  # each hop's own evidence, if one fails
    assert t["fault"] <= t["rule-pending"] <= t["rule-firing"], said
    assert t["rule-firing"] <= t["pagerduty"] and t["rule-firing"] <= t["actuator"], said
    assert t["acknowledged"] - t["pagerduty"] >= 5
    # The measurements are the hops' times from the fault.
    m = report["measurements"]
    assert m["time_to_detect"] == pytest.approx(t["rule-firing"] - t["fault"], abs=0.01)
    assert m["time_to_page"] == pytest.approx(t["pagerduty"] - t["fault"], abs=0.01)
    assert m["time_to_mitigate"] == pytest.approx(t["actuator"] - t["fault"], abs=0.01)
    # What the components left behind, read without opsctl: serve failed over through the actuator
    # (its audit entry and the split file), and filed the ticket in the inference category.
    failovers = [e for e in audit(run) if e.get("kind") == "traffic" and e.get("action") == "failover"
                 and e.get("outcome") == "applied"]
    assert len(failovers) == 1 and failovers[0]["actor"].startswith("opsctl-serve@")
    assert failovers[0]["ts"] == pytest.approx(t["actuator"], abs=0.01)
    assert split_file(run)["weights"]["databricks"] == 0
    [ticket] = tickets(run)
    assert ticket["opsctl_category"] == "inference" and ticket["category"] == "Model Serving"
    # The routing rehearsed is the file's: pages to PagerDuty, every alert to serve.
    routed = yaml.safe_load((run / "alertmanager.yml").read_text())
    deployed = yaml.safe_load((REPO / "deploy" / "alertmanager.yml").read_text())
    assert [r["receiver"] for r in routed["route"]["routes"]] == [r["receiver"] for r in deployed["route"]["routes"]]
    assert "127.0.0.1" in routed["receivers"][0]["pagerduty_configs"][0]["url"]
    # The fault is attributed to the hop it breaks, with what the exporter saw.
    [seen] = report["attribution"]
    assert seen["hop"].startswith("vendor Model Serving endpoint") and "server_error" in seen["seen"]
    assert report["shortened"] and any(s["where"] == "alerting.page.for_duration" for s in report["shortened"])
    for name in ("report.md", "report.html", "serve.log", "prometheus.log", "alertmanager.log"):
        assert (run / name).is_file()
    assert "## What the faults broke" in (run / "report.md").read_text()
    # The prediction from the fault, beside what was measured: 0.5 of databricks failing against a
    # budget of 1e-4 burns 5000x; on a 10 s grid the fast tier (300 x 5m / 5000 = 18 s -> 20 s, for 0)
    # fires before 1h/5m (13.44 x 1h / 5000 = 9.7 s -> 10 s, + for 20 s = 30 s); the page 2 s later
    # (the shortened group_wait). No --chain-timeout: 22 s + the 180 s margin = 202 s.
    pred = report["prediction"]
    assert pred["burn"] == pytest.approx(5000.0)
    assert {(t["long"], t["short"]): t["predicted_seconds"] for t in pred["tiers"]} == \
        {("1h", "5m"): 30, ("6h", "30m"): 50, ("5m", "1m"): 20}
    # Serve gets the fast page after the opsctl fast route's group_wait: deploy/alertmanager.yml's 1 s,
    # under the drill's 2 s cap; the availability policy (cause server_error) fails over and files
    # the ticket as it arrives: both 20 + 1 = 21 s.
    assert {h["hop"]: (h["predicted_seconds"], h["seconds"]) for h in pred["hops"]} == {
        "detect": (20, m["time_to_detect"]), "page": (22, m["time_to_page"]),
        "mitigate": (21, m["time_to_mitigate"]), "ticket": (21, m["time_to_vendor_routing"])}
    assert pred["response"]["policies"] == ["failover-on-availability-page"]
    assert pred["response"]["ticket_category"] == "inference"
    assert any(e["kind"] == "deadline" and "every hop within 202s of the fault (predicted page 22s + margin 180s)"
               in e["message"] for e in report["timeline"])
    assert "| hop | predicted | measured |" in (run / "report.md").read_text()


@pytest.mark.slow
@pytest.mark.prometheus
@pytest.mark.alertmanager
def test_a_route_sending_the_page_nowhere_fails_the_drill_naming_the_pagerduty_hop(drill_env, tmp_path):
    _need_binaries()

    def page_nowhere(data):  # the paging route (every page) to a receiver that notifies serve only, not PagerDuty
        receivers = {r["name"]: r for r in data["receivers"]}
        for route in data["route"]["routes"]:
            if receivers[route["receiver"]].get("pagerduty_configs"):
                data["receivers"].append({"name": "nowhere", "webhook_configs": receivers[route["receiver"]]["webhook_configs"]})
                route["receiver"] = "nowhere"

    scenario = drill_env.scenario("vendor-outage", _fast_outage)
    result = drill_env.run("drill", "run", str(scenario), "--chain", "--routing",
                           str(_routing(tmp_path, page_nowhere)))
    assert result.exit_code == 1, result.output
    report = drill_env.report()
    hops = _hops(report)
    assert report["outcome"] == "failed" and report["broken_hop"] == "pagerduty"
    assert hops["pagerduty"]["at"] is None
    assert "nowhere" in hops["alertmanager"]["evidence"]  # Alertmanager routed the page, to nowhere
    assert "pagerduty sent 0" in hops["pagerduty"]["last_evidence"]
    # The rest of the chain still worked: serve got the alert and failed over.
    assert hops["rule-firing"]["passed"] and hops["serve"]["passed"] and hops["actuator"]["passed"]
    assert "hop pagerduty" in result.stderr and "never happened" in result.stderr
    assert "none of which notifies PagerDuty" in hops["pagerduty"]["failed"]
    # Known at once from Alertmanager's own routing: the drill does not wait out its 4 minutes.
    assert report["wall_seconds"] < 200


def test_a_missing_binary_is_one_clear_line_naming_it(drill_env, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    result = drill_env.run("drill", "run", str(REPO / "chaos" / "vendor-outage.yaml"), "--chain",
                           "--routing", str(REPO / "deploy" / "alertmanager.yml"), env={"PATH": str(empty)})
    assert result.exit_code == 1
    assert "prometheus" in result.stderr and "PATH" in result.stderr
    assert "Traceback" not in result.output
    assert not drill_env.runs()  # nothing started


def test_the_drill_routing_keeps_the_tree_and_points_receivers_at_the_drill(tmp_path):
    amtool = require_binary("amtool")
    import subprocess

    from opsctl.drills.chain.setup import Shortened, drill_routing

    raw = yaml.safe_load((REPO / "deploy" / "alertmanager.yml").read_text())
    shortened = Shortened()
    for name in ("key", "serve", "bridge"):
        (tmp_path / name).write_text("x" * 32)
    am, notes = drill_routing(raw, pagerduty_url="http://127.0.0.1:1/v2/enqueue", routing_key_file=tmp_path / "key",
                              serve_url="http://127.0.0.1:2", serve_token_file=tmp_path / "serve",
                              bridge_url="http://127.0.0.1:3", bridge_token_file=tmp_path / "bridge",
                              shortened=shortened)
    strip = ("group_wait", "group_interval", "repeat_interval")

    def tree(route):
        return {**{k: v for k, v in route.items() if k not in strip and k != "routes"},
                "routes": [tree(r) for r in route.get("routes", [])]}

    assert tree(am["route"]) == tree(raw["route"])
    assert am["inhibit_rules"] == raw["inhibit_rules"]
    receivers = {r["name"]: r for r in am["receivers"]}
    assert receivers["pagerduty-and-opsctl"]["pagerduty_configs"][0]["url"] == "http://127.0.0.1:1/v2/enqueue"
    assert receivers["pagerduty-and-opsctl"]["webhook_configs"][0]["url"] == "http://127.0.0.1:2/v1/alertmanager"
    assert receivers["opsctl"]["webhook_configs"][0]["url"] == "http://127.0.0.1:2/v1/alertmanager"
    assert receivers["ticket-queue"]["webhook_configs"][0]["url"] == "http://127.0.0.1:3/v1/alerts"
    # The root (30s) and the ticket route (5m) wait longer than a drill can: the drill shortens them
    # (the paging route waits 1s as deployed, decisions/0230).
    [slow] = [i for i, r in enumerate(raw["route"]["routes"]) if r["group_wait"] == "5m"]
    assert {s["where"] for s in shortened.items} >= {"alertmanager route.group_wait",
                                                     f"alertmanager route.routes[{slow}].group_wait"}
    path = tmp_path / "am.yml"
    path.write_text(yaml.safe_dump(am))
    done = subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def _post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_pagerduty_endpoint_answers_as_events_api_v2_does():
    from opsctl.drills.chain.pdsink import PagerDutySink

    sink = PagerDutySink("a" * 32)
    url = sink.start()
    try:
        event = {"routing_key": "a" * 32, "event_action": "trigger", "dedup_key": "k1",
                 "payload": {"summary": "burning", "source": "prometheus", "severity": "critical"}}
        assert _post(url, {**event, "routing_key": "b" * 32})[0] == 400
        assert _post(url, {**event, "payload": {"summary": "x", "source": "y", "severity": "loud"}})[0] == 400
        status, reply = _post(url, event)
        assert (status, reply["status"], reply["dedup_key"]) == (202, "success", "k1")
        assert _post(url, event)[0] == 202  # the same dedup key: still one incident
        [incident] = sink.snapshot()[1]
        assert incident["status"] == "triggered"
        assert sink.acknowledge("k1", by="alice")["acknowledged_by"] == "alice"
        assert _post(url, {"routing_key": "a" * 32, "event_action": "resolve", "dedup_key": "k1"})[0] == 202
        assert sink.snapshot()[1][0]["status"] == "resolved"
        assert [e["accepted"] for e in sink.snapshot()[0]] == [False, False, True, True, True]
    finally:
        sink.stop()


def test_the_pagerduty_hop_is_the_faulted_backends_page_not_an_earlier_service_wide_one():
    """The service-wide SLO pages too when the vendor fails, and its incident can open before the vendor's own
    rule fires: the hop must not be credited to it (that would put the page before the rule)."""
    from opsctl.drills.chain.collector import Collector
    from opsctl.drills.chain.hops import Targets
    from opsctl.drills.chain.pdsink import PagerDutySink

    now = [1000.0]
    sink = PagerDutySink("a" * 32, clock=lambda: now[0])

    def page(key: str, backend: str) -> None:
        event = {"routing_key": "a" * 32, "event_action": "trigger", "dedup_key": key,
                 "payload": {"summary": f"{backend} burning", "source": "prometheus", "severity": "critical",
                             "custom_details": {"backend": backend, "slo": f"{backend}-availability"}}}
        assert sink.enqueue(json.dumps(event).encode())[0] == 202

    targets = Targets(prometheus="", alertmanager="", serve="", serve_log=None, backend="databricks",
                      expect_failover=True, ticket_vendor=None, ticket_category=None)
    collector = Collector(targets, sink, desks=lambda vendor: None, audit=None, say=lambda *a: None)
    page("service", "all")
    collector._pagerduty()
    assert collector.hops["pagerduty"].at is None and "other backends" in collector.hops["pagerduty"].last
    now[0] = 1010.0
    page("vendor", "databricks")
    collector._pagerduty()
    assert collector.hops["pagerduty"].at == 1010.0


def test_the_exporter_continues_the_history_and_switches_faults():
    from opsctl.drills.chain.exporter import ProxyExporter
    from opsctl.metrics.simulator import simulate

    now = [1_700_000_000.0]
    backends = {"internal": "internal", "databricks": "vendor"}
    history = simulate(now[0] - 600, now[0], backends=backends, peak_rps=100, seed=3)
    exporter = ProxyExporter(backends, peak_rps=100, seed=4, split=lambda: {"internal": 20.0, "databricks": 80.0},
                             history=history, clock=lambda: now[0])

    def ok_total(text: str, backend: str) -> int:
        line = next(line for line in text.splitlines()
                    if line.startswith(f'llm_proxy_requests_total{{backend="{backend}",outcome="ok"}}'))
        return int(line.rsplit("} ", 1)[1].split(" ")[0])  # the value, before the sample's timestamp

    first = exporter.render()
    assert ok_total(first, "databricks") == int(history["databricks"].columns["req_ok"].sum())
    exporter.fault_on("f1", "vendor-5xx", "databricks", {"rate": 1.0})
    now[0] += 120
    second = exporter.render()
    during = exporter.outcomes_between(now[0] - 120, now[0])["databricks"]
    assert during["ok"] == 0 and during["server_error"] > 0  # every answered request failed
    assert ok_total(second, "databricks") == ok_total(first, "databricks")  # counters never go down
    exporter.fault_off("f1")
    now[0] += 60
    exporter.render()
    after = exporter.outcomes_between(now[0] - 60, now[0])["databricks"]
    assert after["ok"] > 0


def test_the_exporter_counts_answers_slower_than_each_latency_threshold_from_its_own_histogram():
    """A latency tail's symptom is answers slower than 1 s (latency-1s), a uniform slowdown's those
    slower than 500 ms: both counted, each equal to what the exported histogram says (its _count
    minus the bucket at the threshold, the increase between two scrapes)."""
    from opsctl.drills.chain.exporter import ProxyExporter
    from opsctl.drills.chain.faults import symptoms

    now = [1_700_000_000.0]
    backends = {"internal": "internal", "databricks": "vendor"}
    exporter = ProxyExporter(backends, peak_rps=100, seed=4, split=lambda: {"internal": 20.0, "databricks": 80.0},
                             clock=lambda: now[0])

    def histogram(text: str) -> dict[str, int]:
        out = {}
        for line in text.splitlines():
            if line.startswith('llm_proxy_request_duration_seconds_bucket{backend="databricks",le="'):
                out[line.split('le="')[1].split('"')[0]] = int(float(line.rsplit("} ", 1)[1].split(" ")[0]))
            elif line.startswith('llm_proxy_request_duration_seconds_count{backend="databricks"}'):
                out["count"] = int(float(line.rsplit("} ", 1)[1].split(" ")[0]))
        return out

    first = histogram(exporter.render())
    exporter.fault_on("t1", "latency-tail", "databricks", {"share": 0.3, "factor": 8.0})
    now[0] += 120
    second = histogram(exporter.render())
    during = exporter.outcomes_between(now[0] - 120, now[0])["databricks"]
    answered = second["count"] - first["count"]
    for symptom, le in (("slower_than_1s", "1.0"), ("slower_than_500ms", "0.5")):
        assert during[symptom] == answered - (second[le] - first[le]), symptom
    assert during["slower_than_1s"] > 0.05 * answered  # the tail shows where latency-1s looks
    assert symptoms("latency-tail") == ("slower_than_1s",)


def test_a_live_chain_drill_is_refused_while_its_components_do_not_answer(drill_env, tmp_path):
    from tests.conftest import free_port

    closed = f"http://127.0.0.1:{free_port()}"
    text = drill_env.config.read_text().replace(
        "    fault_namespaces: []", f"    fault_namespaces: [llm-staging]\n    alertmanager_url: {closed}")
    drill_env.config.write_text(text)
    result = drill_env.run("drill", "run", str(REPO / "chaos" / "vendor-outage.yaml"), "--chain", "--live")
    assert result.exit_code == 4, result.output
    report = drill_env.report()
    assert report["outcome"] == "refused" and report["mode"] == "live-chain"
    refused = {c["name"]: c for c in report["preflight"] if not c["ok"]}
    assert closed in refused["Alertmanager (drills.live.alertmanager_url) answers"]["message"]
    assert "no URL configured" in refused["opsctl serve (drills.live.serve_url) answers"]["message"]
    assert not report["hops"]  # nothing was injected
    dry = drill_env.run("drill", "run", str(REPO / "chaos" / "vendor-outage.yaml"), "--chain", "--live",
                        "--dry-run", "-o", "json")
    assert dry.exit_code == 4
    plan = json.loads(dry.stdout)
    assert plan["mode"] == "live-chain" and any("llm-staging/databricks-egress" in s for s in plan["method"])


def test_a_local_chain_drill_never_files_with_a_real_vendor_desk(drill_env, tmp_path):
    from opsctl.config import load_config_file
    from opsctl.drills.chain.setup import Shortened, drill_config

    text = drill_env.config.read_text().replace(
        "  provider: local\n  dedup_window",
        "  provider: zendesk\n  zendesk: {url: 'https://example.zendesk.com', email: a@example.com,"
        " api_token: {env: ZD_TOKEN}}\n  dedup_window", 1)
    assert "provider: zendesk" in text
    drill_env.config.write_text(text)
    shortened = Shortened()
    raw = drill_config(load_config_file(drill_env.config), tmp_path, prometheus_url="http://127.0.0.1:1",
                       token_file=tmp_path / "token", shortened=shortened)
    assert raw["tickets"]["provider"] == "local"
    assert all(v["provider"] == "local" for v in raw["tickets"]["vendors"].values())
    [change] = [s for s in shortened.items if s["where"] == "tickets.provider"]
    assert change["was"] == "local/zendesk" and change["now"] == "local"
    assert raw["paging"] == {"provider": "local"} and raw["traffic"]["actuator"] == "file"
