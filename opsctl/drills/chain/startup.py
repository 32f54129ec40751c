"""A local chain drill's setup phase: the secrets, the drill's config written (setup.py says what
it holds) and its rules generated and promtool-checked, the baseline history backfilled, then the
exporter, the PagerDuty endpoint, the ticket bridge, Alertmanager, Prometheus and `opsctl serve`
started and ready."""

from __future__ import annotations

import dataclasses
import os
import secrets
import time
from pathlib import Path

from opsctl.drills.chain.progress import ChainProgress


class ChainStartup(ChainProgress):
    def _secret(self, name: str, value: str) -> Path:
        folder = self.dir / "secrets"
        folder.mkdir(mode=0o700, exist_ok=True)
        path = folder / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(value)
        return path

    def _setup(self) -> None:
        import yaml

        from opsctl.config import load_config_file
        from opsctl.drills.chain import components as c
        from opsctl.drills.chain.bridge import WebhookRecorder
        from opsctl.drills.chain.pdsink import PagerDutySink, new_routing_key
        from opsctl.drills.chain.setup import (SCRAPE_INTERVAL, DRILL_EVALUATION, Shortened, drill_config,
                                              drill_fleet, drill_routing)

        self._set_phase("setup")
        shortened = Shortened()
        serve_token = self._secret("serve-token", secrets.token_urlsafe(24))
        bridge_token = secrets.token_urlsafe(24)
        bridge_token_file = self._secret("bridge-token", bridge_token)
        routing_key = new_routing_key()
        routing_key_file = self._secret("pagerduty-routing-key", routing_key)

        self.sink = PagerDutySink(routing_key)
        self.sink.start()
        self.servers.append(self.sink)
        bridge = WebhookRecorder(bridge_token)
        bridge_url = bridge.start()
        self.servers.append(bridge)
        self.bridge = bridge
        prom_port, am_port, serve_port, kube_port = c.free_port(), c.free_port(), c.free_port(), c.free_port()
        prom_url, am_url, serve_url = (f"http://127.0.0.1:{p}" for p in (prom_port, am_port, serve_port))

        # The internal Deployment, simulated: serve reads its pods from a loopback Kubernetes API
        # (chain/kubeapi.py), started once the exporter whose faults it counts exists (decisions/0355).
        fleet = drill_fleet(self.user_cfg)
        if fleet is not None:
            fleet = dataclasses.replace(fleet, kubeconfig=self.dir / "secrets" / "kubeconfig")
        now = time.time()
        raw = drill_config(self.user_cfg, self.dir, prometheus_url=prom_url, token_file=serve_token, shortened=shortened,
                           freeze=self.scenario.freeze, span=(now, now + self.scenario.max_duration), fleet=fleet)
        cfg_path = self.dir / "opsctl.yaml"
        cfg_path.write_text("# The chain drill's config: the user's, pointed at the drill (see the report).\n"
                            + yaml.safe_dump(raw, sort_keys=False))
        self.cfg = load_config_file(cfg_path)
        self.cfg_path = cfg_path
        self._say("setup", f"drill config {cfg_path} (state, split, pager and audit log in the run directory)")

        rules = self.dir / "rules.yaml"
        c.generate_rules(cfg_path, rules)
        c.check_rules(self.binaries["promtool"], rules)
        groups = yaml.safe_load(rules.read_text()).get("groups", [])
        self._say("setup", f"`opsctl slo rules` wrote {len(groups)} rule groups ({sum(len(g['rules']) for g in groups)}"
                           " rules); promtool check rules: ok")

        split = self._split()
        backends = {n: b.kind for n, b in self.cfg.backends.items()}
        env = self.scenario.embedded
        now = time.time()
        offset = scenario_offset(env.start, now)
        history = self._backfill(backends, split, now, env.peak_rps, env.seed, offset)

        from opsctl.drills.chain.exporter import ProxyExporter

        self.exporter = ProxyExporter(backends, peak_rps=env.peak_rps, seed=env.seed + 1, split=self._split,
                                      history=history, labels=self.cfg.service_labels, offset=offset)
        shortened.add("environment.embedded.start", f"{_iso(env.start)}, simulated time",
                      f"{_iso(env.start)}, then the wall clock's pace",
                      "the exporter draws the load of the scenario's hour from setup on; the method's pauses, the"
                      " rules' windows and the waits below run on the wall clock")
        exporter_url = self.exporter.start()
        self.servers.append(self.exporter)
        self._say("setup", f"exporter of the proxy's metrics on {exporter_url}/metrics (peak {env.peak_rps:g} rps,"
                           f" split {_split_text(split)})")
        if fleet is not None:
            self.pods = self._serve_the_fleet(fleet, kube_port)

        am_raw, notes = drill_routing(self.routing_raw, pagerduty_url=self.sink.url, routing_key_file=routing_key_file,
                                      serve_url=serve_url, serve_token_file=serve_token, bridge_url=bridge_url,
                                      bridge_token_file=bridge_token_file, shortened=shortened)
        self.group_wait = _longest_group_wait(am_raw["route"])
        self.routing = am_raw  # as the drill's Alertmanager runs it (its waits shortened)
        self.serve_receivers = frozenset(
            r.get("name") for r in am_raw.get("receivers") or []
            if any(urlparse_path(h.get("url", "")).rstrip("/").endswith("/v1/alertmanager")
                   for h in r.get("webhook_configs") or []))
        self.pagerduty_receivers = frozenset(r.get("name") for r in am_raw.get("receivers") or []
                                             if r.get("pagerduty_configs"))
        am_cfg = self.dir / "alertmanager.yml"
        am_cfg.write_text(yaml.safe_dump(am_raw, sort_keys=False))
        for note in notes:
            self._say("setup", f"routing {self._routing().name}: {note}")
        prom_cfg = self.dir / "prometheus.yml"
        prom_cfg.write_text(yaml.safe_dump({
            "global": {"scrape_interval": f"{SCRAPE_INTERVAL}s", "evaluation_interval": f"{DRILL_EVALUATION}s"},
            "rule_files": [str(rules)],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
            "scrape_configs": [{"job_name": "llm-proxy", "static_configs": [{"targets": [self.exporter.address]}]}],
        }, sort_keys=False))

        am = c.Process("alertmanager", [self.binaries["alertmanager"], f"--config.file={am_cfg}",
                                        f"--storage.path={self.dir / 'am-data'}", f"--web.listen-address=127.0.0.1:{am_port}",
                                        "--cluster.listen-address="], self.dir / "alertmanager.log", f"{am_url}/-/ready")
        self.processes.append(am)
        prom = c.Process("prometheus", [self.binaries["prometheus"], f"--config.file={prom_cfg}",
                                        f"--storage.tsdb.path={self.dir / 'prom-data'}",
                                        f"--web.listen-address=127.0.0.1:{prom_port}",
                                        "--storage.tsdb.retention.time=3650d"],
                         self.dir / "prometheus.log", f"{prom_url}/-/ready")
        self.processes.append(prom)
        serve = c.Process("opsctl serve", c.opsctl_command(cfg_path, "serve", "--bind", f"127.0.0.1:{serve_port}"),
                          self.dir / "serve.log", f"{serve_url}/readyz", env=c.opsctl_env(), cwd=self.dir)
        self.processes.append(serve)
        for p in (am, prom, serve):
            p.wait_ready(should_stop=lambda: self.stop_reason is not None)
            self._check_stop()
            self._say("setup", f"{p.name} ready ({p.ready_url.rsplit('/', 1)[0]}; log {p.log_path.name})")
        self.urls = {"prometheus": prom_url, "alertmanager": am_url, "serve": serve_url}
        self.shortened = shortened
        self.facts = {"urls": self.urls, "binaries": self.binaries, "config": str(cfg_path), "rules": str(rules),
                      "routing": str(self.routing_path), "alertmanager_config": str(am_cfg),
                      "history_seconds": self.history, "peak_rps": env.peak_rps, "shortened": shortened.items,
                      "routing_notes": notes}
        self.state.data["chain"] = {"urls": self.urls, "config": str(cfg_path)}
        self.state.save()

    def _serve_the_fleet(self, fleet, port: int):
        """Start the loopback Kubernetes API of the simulated Deployment on `port` (the one the
        drill's kubeconfig names) and write that kubeconfig (it holds the API's token: 0600)."""
        from opsctl.drills.chain.kubeapi import SimulatedDeployment

        exporter = self.exporter
        pods = SimulatedDeployment(fleet.namespace, fleet.deployment, fleet.replicas,
                                   lambda at: exporter.ready_share(fleet.backend, at))
        url = pods.start(port=port)
        self.servers.append(pods)
        pods.write_kubeconfig(fleet.kubeconfig, url)
        self._say("setup", f"Deployment {fleet.namespace}/{fleet.deployment} ({fleet.replicas} simulated pods, ready"
                           f" as the faults leave them) on the loopback Kubernetes API {url}; serve's kubeconfig"
                           f" {fleet.kubeconfig.name}")
        return pods

    def _backfill(self, backends, split, now, peak_rps, seed, offset=0):
        import dataclasses

        from opsctl.drills.chain.components import backfill
        from opsctl.metrics.simulator import STEP, export_openmetrics, simulate

        end = int(now) // STEP * STEP
        # The history of the scenario's hours before its start, stamped on the wall clock's steps.
        drawn = simulate(end - self.history + offset, end + offset, backends=backends, split=split,
                         peak_rps=peak_rps, seed=seed)
        series = {name: dataclasses.replace(s, timestamps=s.timestamps - offset) for name, s in drawn.items()}
        path = self.dir / "history.om"
        samples = export_openmetrics(series, path, labels=self.cfg.service_labels)
        started = time.monotonic()
        backfill(self.binaries["promtool"], path, self.dir / "prom-data")
        path.unlink()
        self._say("setup", f"backfilled {self.history / 3600:g}h of baseline history ({samples:,} samples) with"
                           f" promtool tsdb create-blocks-from openmetrics in {time.monotonic() - started:.1f}s")
        return series



def urlparse_path(url: str) -> str:
    from urllib.parse import urlparse

    return urlparse(url).path or "/"


def _split_text(split: dict) -> str:
    return " ".join(f"{k}={v:g}" for k, v in split.items())


def _longest_group_wait(route: dict) -> float:
    """The longest group_wait on any route of an Alertmanager tree: the latest a first notification leaves."""
    from opsctl.clock import parse_duration

    waits: list[float] = [parse_duration(str(route["group_wait"]))] if route.get("group_wait") is not None else []
    waits += [_longest_group_wait(child) for child in route.get("routes") or []]
    return max(waits, default=0.0)


def scenario_offset(start: float, now: float) -> int:
    """Seconds from the wall clock's step at `now` to the scenario's `start` step: the exporter
    draws the load `start` has, whatever the hour the drill runs at."""
    from opsctl.metrics.schema import STEP_SECONDS

    return int(start) // STEP_SECONDS * STEP_SECONDS - int(now) // STEP_SECONDS * STEP_SECONDS


def _iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
