from __future__ import annotations

import pytest

from tests.fakes.fixtures import FAST_RETRY, ca, ca_file, load, write_config  # noqa: F401  (fixtures)
from tests.fakes.pagerduty import FakePagerDuty

ROUTING_KEY = "R0UTING-k3y-5ecret-1f2e3d4c5b6a"
API_TOKEN = "api-t0ken-5ecret-9a8b7c6d5e4f"
READ_ONLY_TOKEN = "read-0nly-5ecret-0a1b2c3d4e5f"
SECRETS = (ROUTING_KEY, API_TOKEN, READ_ONLY_TOKEN)


@pytest.fixture
def pd(ca):
    fake = FakePagerDuty(ca, routing_keys={ROUTING_KEY}, api_tokens={API_TOKEN: "full", READ_ONLY_TOKEN: "read"})
    with fake:
        yield fake


@pytest.fixture
def pd_env(monkeypatch):
    env = {"PD_ROUTING_KEY": ROUTING_KEY, "PD_API_TOKEN": API_TOKEN}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


def pd_config_text(pd, ca_file, *, retry: str = FAST_RETRY, extra: str = "") -> str:
    return f"""
paging:
  provider: pagerduty
  pagerduty:
    routing_key: {{env: PD_ROUTING_KEY}}
    api_token: {{env: PD_API_TOKEN}}
    service_id: PSVC001
    escalation_policy_id: PEP0001
    from_email: oncall-bot@example.com
    events_url: {pd.url}
    api_url: {pd.url}
    ca_file: {ca_file}
    retry: {retry}
{extra}"""


@pytest.fixture
def pd_config_path(tmp_path, pd, ca_file, pd_env):
    return write_config(tmp_path, pd_config_text(pd, ca_file))


@pytest.fixture
def pd_cfg(pd_config_path):
    return load(pd_config_path)
