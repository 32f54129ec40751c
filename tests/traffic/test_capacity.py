"""opsctl.traffic.capacity on its own: the arithmetic of shares and replicas, the request rate read
from a real embedded store, and scaling the internal Deployment through the loopback Kubernetes API.

Expected figures are worked out by hand from the module's documented formulas:
    needed rps = current rps x share / 100 x (1 + headroom); capacity = ready x rps_per_replica.
The healthy store carries 800 rps for databricks and 200 rps for internal (1000 rps in all).
"""

from __future__ import annotations

import textwrap

import pytest

from opsctl.config import load_config_file
from opsctl.errors import ConflictError
from opsctl.metrics.base import open_source
from opsctl.traffic.capacity import Capacity, rate_query
from opsctl.traffic.capacity_reading import CapacityReading
from tests.traffic.conftest import deployment, kube_capacity

NS = "llm"


def reading(ready=10, total=1000.0, rps=150.0, headroom=0.25, max_replicas=12) -> CapacityReading:
    return CapacityReading("internal", ready, ready, max_replicas, rps, headroom, total, None, "static")


def test_the_rate_query_sums_every_backend_or_one_over_the_rate_window(make_env):
    cfg = load_config_file(make_env().config)
    assert rate_query(cfg.capacity) == "sum(rate(llm_proxy_requests_total[300s]))"  # rate_window 5m
    assert rate_query(cfg.capacity, "internal") == 'sum(rate(llm_proxy_requests_total{backend="internal"}[300s]))'


def test_needed_rps_replicas_and_the_share_that_fits():
    r = reading()
    assert r.capacity_rps == 1500  # 10 x 150
    assert r.needed_rps(20) == pytest.approx(250)  # 1000 x 0.20 x 1.25
    assert r.replicas_for(20) == 2  # ceil(250 / 150)
    assert r.replicas_for(60) == 5  # 750 / 150 = 5 exactly: no extra replica for rounding noise
    assert r.max_share() == 100  # 1500 / 1250 = 120%, capped
    assert r.max_share(4) == 48  # 600 / 1250 = 48%
    assert r.max_share(0) == 0
    idle = reading(total=0.0)
    assert idle.max_share() == 100 and idle.replicas_for(100) == 0
    blind = reading(total=None)
    assert blind.needed_rps(50) is None and blind.replicas_for(50) is None and blind.max_share() is None
    data = reading(ready=4).to_dict()
    assert (data["capacity_rps"], data["max_share"], data["max_share_at_max_replicas"]) == (600, 48, 100)


def capacity_for(env) -> Capacity:
    """As `traffic status` builds it: the source opened on first use (missing metrics: NoDataError)."""
    cfg = load_config_file(env.config)
    opened: list = []

    def source():
        if not opened:
            opened.append(open_source(cfg))
        return opened[0]

    return Capacity(cfg, source, lambda: source().default_time())


def static(replicas: int, max_replicas: int | None = None) -> str:
    return textwrap.dedent(f"""\
        capacity:
          backend: internal
          source: static
          replicas: {replicas}
          rps_per_replica: 100
          headroom: 0.25
          max_replicas: {max_replicas or replicas}
        """)


def test_read_takes_the_request_rates_from_the_metric_source(make_env):
    r = capacity_for(make_env(capacity=static(10))).read()
    assert r.total_rps == pytest.approx(1000) and r.backend_rps == pytest.approx(200)
    assert (r.ready, r.desired, r.where) == (10, 10, "static replicas")
    assert r.max_share() == 80  # 1000 rps of capacity / 1250 needed for all traffic


def test_without_metrics_the_rate_is_no_data_never_zero(make_env):
    r = capacity_for(make_env(metrics=False, capacity=static(10))).read()
    assert r.total_rps is None and r.max_share() is None


def test_static_capacity_reports_the_share_that_fits_and_cannot_scale(make_env):
    cap = capacity_for(make_env(capacity=static(5)))
    enough = cap.ensure(40, dry_run=False)  # 1000 x 0.4 x 1.25 = 500 rps = 5 replicas
    assert enough.enough and enough.fits == 40 and enough.notes == []
    short = cap.ensure(100, dry_run=False)  # 1250 rps: 13 replicas, max_replicas 5
    assert not short.enough and short.fits == 40
    assert short.notes == ["already at 5 ready replicas; max_replicas is 5"]
    room = capacity_for(make_env(capacity=static(5, max_replicas=20))).ensure(100, dry_run=False)
    assert room.fits == 40 and room.notes == ["static capacity: opsctl cannot scale it"]


def kube_settings(api, max_replicas: int) -> dict:
    return dict(capacity=kube_capacity(max_replicas=max_replicas, timeout="10s"),
                extra_traffic=f'kubernetes: {{host: "{api.url}", namespace: {NS}, timeout: 5}}\n')


def test_ensure_scales_the_deployment_and_waits_until_the_replicas_are_ready(make_env, kube_api):
    kube_api.seed(deployment(NS, "vllm", 2))
    kube_api.simulate_deployment(NS, "vllm", ready_delay=0.2)
    cap = capacity_for(make_env(**kube_settings(kube_api, max_replicas=10)))
    assert cap.where == f"Deployment {NS}/vllm"
    result = cap.ensure(60, dry_run=False, reason="rollout")  # 750 rps -> 8 replicas of 100
    assert (result.scaled_from, result.scaled_to, result.timed_out) == (2, 8, False)
    assert result.reading.ready == 8 and result.fits == 64 and result.enough  # 800 / 1250
    assert kube_api.get("apps", "deployments", NS, "vllm")["spec"]["replicas"] == 8
    [event] = kube_api.events("vllm")
    assert event["reason"] == "ScaledForTraffic"
    assert event["message"] == "opsctl scaled 2 -> 8 replicas to carry 60% of traffic: rollout"


def test_a_dry_run_changes_nothing_and_reports_what_the_target_would_carry(make_env, kube_api):
    kube_api.seed(deployment(NS, "vllm", 2))
    cap = capacity_for(make_env(**kube_settings(kube_api, max_replicas=6)))
    result = cap.ensure(100, dry_run=True)  # 1250 rps -> 13 replicas, capped at 6
    assert (result.scaled_from, result.scaled_to) == (2, 6)
    assert result.fits == 48  # 600 / 1250, once the 6 are ready
    assert result.notes == [f"dry run: would scale Deployment {NS}/vllm to 6 replicas and wait for them"]
    assert kube_api.get("apps", "deployments", NS, "vllm")["spec"]["replicas"] == 2
    assert kube_api.events("vllm") == []


def test_without_waiting_the_ready_replicas_carry_what_they_can_now(make_env, kube_api):
    kube_api.seed(deployment(NS, "vllm", 2))
    kube_api.simulate_deployment(NS, "vllm", ready_delay=60)  # nothing new becomes ready in this test
    cap = capacity_for(make_env(**kube_settings(kube_api, max_replicas=20)))
    result = cap.ensure(100, dry_run=False, wait=False)
    assert (result.scaled_from, result.scaled_to) == (2, 13)
    assert result.fits == 16 and result.waited == 0  # 2 x 100 / 1250
    assert kube_api.get("apps", "deployments", NS, "vllm")["spec"]["replicas"] == 13


def test_scaling_gives_up_with_a_conflict_after_the_configured_attempts(make_env, kube_api):
    kube_api.seed(deployment(NS, "vllm", 2))
    env = make_env(conflict_attempts=2, **kube_settings(kube_api, max_replicas=10))
    kube_api.inject_conflicts("apps", "deployments", NS, "vllm", 2)
    with pytest.raises(ConflictError, match="2 attempts met concurrent changes"):
        capacity_for(env).ensure(60, dry_run=False, wait=False)
    assert kube_api.get("apps", "deployments", NS, "vllm")["spec"]["replicas"] == 2


def test_readings_compare_by_value_and_name_their_fields():
    """Plain slotted classes since #26 item 6 (no @dataclass on traffic status' path): equal as the
    dataclasses were, and their repr still says what they hold."""
    assert reading() == reading() and reading() != reading(ready=9)
    assert repr(reading(ready=3)).startswith("CapacityReading(backend='internal', ready=3, desired=3,")
    with pytest.raises(AttributeError):
        reading().share_now = 20  # a slot per field: a typo is an error, not a new attribute


def test_a_capacity_check_without_a_capacity_section_is_a_usage_error(make_env):
    from opsctl.errors import UsageError

    cfg = load_config_file(make_env(capacity="").config)
    assert cfg.capacity is None
    with pytest.raises(UsageError, match="capacity is not configured"):
        Capacity(cfg, lambda: open_source(cfg), lambda: 0.0)


def test_a_preview_only_reads_and_says_what_the_change_would_scale(make_env, kube_api):
    # the confirmation prompt's capacity preview (issue 35 item 5): no write at all, not even the
    # server-side dry run a --dry-run sends; what the target would carry, as a dry run reports it
    kube_api.seed(deployment(NS, "vllm", 2))
    cap = capacity_for(make_env(**kube_settings(kube_api, max_replicas=6)))
    before = len(kube_api.writes())
    result = cap.ensure(100, dry_run=False, preview=True)  # 1250 rps -> 13 replicas, capped at 6
    assert (result.scaled_from, result.scaled_to, result.fits) == (2, 6, 48)  # 600 / 1250
    assert result.notes == [f"preview: would scale Deployment {NS}/vllm to 6 replicas and wait for them"]
    assert kube_api.writes()[before:] == []
    assert kube_api.get("apps", "deployments", NS, "vllm")["spec"]["replicas"] == 2
