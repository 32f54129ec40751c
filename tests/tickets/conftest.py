from __future__ import annotations

import pytest

from tests.fakes.fixtures import FAST_RETRY, ca, ca_file, load, write_config  # noqa: F401  (fixtures)
from tests.fakes.jira import FakeJira
from tests.fakes.smtp import FakeSMTP
from tests.fakes.webhook import FakeWebhook
from tests.fakes.zendesk import FakeZendesk

ZD_EMAIL = "oncall-bot@example.com"
ZD_TOKEN = "zd-t0ken-5ecret-6b1e2f3a4c5d"
JIRA_EMAIL = "oncall-bot@example.com"
JIRA_TOKEN = "jira-t0ken-5ecret-7c2d3e4f5a6b"
SMTP_USER = "oncall@example.com"
SMTP_PASSWORD = "smtp-pa55word-5ecret-8d3e4f5a"
WEBHOOK_TOKEN = "wh-bearer-5ecret-9e4f5a6b7c8d"
WEBHOOK_SECRET = "wh-signing-5ecret-0f5a6b7c8d9e"
SECRETS = (ZD_TOKEN, JIRA_TOKEN, SMTP_PASSWORD, WEBHOOK_TOKEN, WEBHOOK_SECRET)
SECRET_ENV = {"ZD_TOKEN": ZD_TOKEN, "JIRA_TOKEN": JIRA_TOKEN, "SMTP_PASSWORD": SMTP_PASSWORD,
              "WEBHOOK_TOKEN": WEBHOOK_TOKEN, "WEBHOOK_SECRET": WEBHOOK_SECRET}

CATEGORY_FIELD = 360001
SEVERITY_FIELD = 360002


@pytest.fixture
def secret_env(monkeypatch):
    for k, v in SECRET_ENV.items():
        monkeypatch.setenv(k, v)
    return dict(SECRET_ENV)


@pytest.fixture
def zendesk(ca):
    with FakeZendesk(ca, email=ZD_EMAIL, token=ZD_TOKEN, field_ids={CATEGORY_FIELD, SEVERITY_FIELD}) as fake:
        yield fake


@pytest.fixture
def jira(ca):
    with FakeJira(ca, email=JIRA_EMAIL, token=JIRA_TOKEN, forbidden_request_types={"27"}) as fake:
        yield fake


@pytest.fixture
def webhook(ca):
    with FakeWebhook(ca, token=WEBHOOK_TOKEN, signing_secret=WEBHOOK_SECRET) as fake:
        yield fake


@pytest.fixture
def smtp(ca):
    with FakeSMTP(ca, username=SMTP_USER, password=SMTP_PASSWORD) as fake:
        yield fake


def zendesk_section(fake, ca_file, retry=FAST_RETRY) -> str:
    return f"""
  zendesk:
    url: {fake.url}
    email: {ZD_EMAIL}
    api_token: {{env: ZD_TOKEN}}
    category_field_id: {CATEGORY_FIELD}
    ca_file: {ca_file}
    retry: {retry}"""


def jira_section(fake, ca_file, retry=FAST_RETRY) -> str:
    return f"""
  jira:
    url: {fake.url}
    service_desk_id: "10"
    email: {JIRA_EMAIL}
    api_token: {{env: JIRA_TOKEN}}
    ca_file: {ca_file}
    retry: {retry}"""


def email_section(fake, ca_file, retry=FAST_RETRY) -> str:
    return f"""
  email:
    host: 127.0.0.1
    port: {fake.port}
    security: starttls
    from_addr: {SMTP_USER}
    username: {SMTP_USER}
    password: {{env: SMTP_PASSWORD}}
    ca_file: {ca_file}
    retry: {retry}"""


def webhook_section(fake, ca_file, retry=FAST_RETRY) -> str:
    return f"""
  webhook:
    url: {fake.url}/hooks/tickets
    bearer_token: {{env: WEBHOOK_TOKEN}}
    signing_secret: {{env: WEBHOOK_SECRET}}
    status_url: {fake.url}/hooks/tickets/{{id}}
    ca_file: {ca_file}
    retry: {retry}"""


VENDORS = {
    "zendesk": """
    databricks:
      provider: zendesk
      group_id: 77
      tags: [vendor_databricks]
      categories: {inference: model_serving, platform: workspace_platform}
      severities: {Sev1: urgent, Sev2: high, Sev3: normal, Sev4: low}""",
    "jira": """
    databricks:
      provider: jira
      categories: {inference: "25", platform: "26", billing: "27"}
      severities: {Sev1: Highest, Sev2: High, Sev3: Medium, Sev4: Low}""",
    "email": """
    databricks:
      provider: email
      to: help@databricks.example
      categories: {inference: Model Serving, platform: Workspace}
      severities: {Sev1: Severity 1 - Critical, Sev2: Severity 2 - High, Sev3: Severity 3 - Medium, Sev4: Severity 4 - Low}""",
    "webhook": """
    databricks:
      provider: webhook
      categories: {inference: model-serving}
      severities: {Sev1: S1, Sev2: S2, Sev3: S3, Sev4: S4}""",
    "local": """
    databricks:
      provider: local
      categories: {inference: Model Serving, platform: Workspace}
      severities: {Sev1: Severity 1 - Critical, Sev2: Severity 2 - High, Sev3: Severity 3 - Medium, Sev4: Severity 4 - Low}""",
}


def tickets_config(provider: str, section: str = "") -> str:
    return f"""
tickets:
  provider: local{section}
  vendors:{VENDORS[provider]}
"""


@pytest.fixture
def zd_config_path(tmp_path, zendesk, ca_file, secret_env):
    return write_config(tmp_path, tickets_config("zendesk", zendesk_section(zendesk, ca_file)))


@pytest.fixture
def zd_cfg(zd_config_path):
    return load(zd_config_path)


@pytest.fixture
def jira_cfg(tmp_path, jira, ca_file, secret_env):
    return load(write_config(tmp_path, tickets_config("jira", jira_section(jira, ca_file))))


@pytest.fixture
def email_config_path(tmp_path, smtp, ca_file, secret_env):
    return write_config(tmp_path, tickets_config("email", email_section(smtp, ca_file)))


@pytest.fixture
def email_cfg(email_config_path):
    return load(email_config_path)


@pytest.fixture
def webhook_cfg(tmp_path, webhook, ca_file, secret_env):
    return load(write_config(tmp_path, tickets_config("webhook", webhook_section(webhook, ca_file))))


@pytest.fixture
def local_cfg(tmp_path):
    return load(write_config(tmp_path, tickets_config("local")))
