"""Vendor support tickets: providers (Zendesk, Jira, email, webhook, local) and each vendor's desk."""

from __future__ import annotations

from typing import Literal

from opsctl.config.paging import RetrySettings
from opsctl.config.types import SEVERITIES, SecretRef, _https_url
from opsctl.errors import ConfigError
from opsctl.model import Duration, Model, field

class ZendeskSettings(Model):
    url: str
    email: str
    api_token: SecretRef
    # Custom fields that carry the category and severity; when severity_field_id is unset the
    # vendor's severity values are Zendesk priorities (urgent, high, normal, low).
    category_field_id: int | None = None
    severity_field_id: int | None = None
    tags: tuple[str, ...] = ("opsctl",)
    ca_file: str | None = None
    retry: RetrySettings = field(default_factory=RetrySettings)

    def __post_init__(self) -> None:
        _https_url("url", self.url)
        if "@" not in self.email:
            raise ValueError(f"email must be the API user's email address (got {self.email!r})")


class JiraSettings(Model):
    url: str
    service_desk_id: str
    api_token: SecretRef
    # cloud: basic auth with email + API token; datacenter: bearer personal access token.
    deployment: Literal["cloud", "datacenter"] = "cloud"
    email: str | None = None
    # "priority" (values are priority names) or a custom field id such as customfield_10050.
    severity_field: str = "priority"
    labels: tuple[str, ...] = ("opsctl",)
    ca_file: str | None = None
    retry: RetrySettings = field(default_factory=RetrySettings)

    def __post_init__(self) -> None:
        _https_url("url", self.url)
        if self.deployment == "cloud" and not self.email:
            raise ValueError("deployment cloud needs email (basic auth with email and API token)")
        if self.severity_field != "priority" and not self.severity_field.startswith("customfield_"):
            raise ValueError("severity_field must be 'priority' or a custom field id like customfield_10050")


class EmailSettings(Model):
    host: str
    from_addr: str
    port: int = 587
    security: Literal["starttls", "ssl", "none"] = "starttls"
    username: str | None = None
    password: SecretRef | None = None
    ca_file: str | None = None
    retry: RetrySettings = field(default_factory=RetrySettings)

    def __post_init__(self) -> None:
        if not 1 <= self.port <= 65535:
            raise ValueError("port must be between 1 and 65535")
        if "@" not in self.from_addr:
            raise ValueError(f"from_addr must be an email address (got {self.from_addr!r})")
        if bool(self.username) != bool(self.password):
            raise ValueError("SMTP login needs both username and password")


class WebhookSettings(Model):
    url: str
    bearer_token: SecretRef | None = None
    # HMAC-SHA256 of the raw body, sent as X-Opsctl-Signature: sha256=<hex>.
    signing_secret: SecretRef | None = None
    # Optional GET endpoint to read a ticket back; {id} is replaced by the ticket id.
    status_url: str | None = None
    ca_file: str | None = None
    retry: RetrySettings = field(default_factory=RetrySettings)

    def __post_init__(self) -> None:
        _https_url("url", self.url)
        if self.status_url is not None:
            _https_url("status_url", self.status_url)
            if "{id}" not in self.status_url:
                raise ValueError("status_url must contain {id}")


class VendorTickets(Model):
    """How tickets reach one vendor: the channel, and opsctl's names -> the vendor's values.

    categories: opsctl category (e.g. inference) -> provider value (a Zendesk field value, a Jira
    request type id, a label in the email subject). severities: Sev1..Sev4 -> provider value.
    """

    categories: dict[str, str]
    severities: dict[str, str]
    provider: Literal["local", "zendesk", "jira", "email", "webhook"] | None = None
    to: str | None = None  # email: the vendor's support address
    group_id: int | None = None  # zendesk: the group (queue) to route to
    tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.categories:
            raise ValueError("categories: map at least one opsctl category (e.g. inference)")
        missing = [s for s in SEVERITIES if s not in self.severities]
        unknown = [s for s in self.severities if s not in SEVERITIES]
        if unknown:
            raise ValueError(f"severities: unknown severity {', '.join(unknown)} (use {', '.join(SEVERITIES)})")
        if missing:
            raise ValueError(f"severities: map every severity; missing {', '.join(missing)}")
        for name in self.categories:
            if not name.replace("-", "").replace("_", "").isalnum():
                raise ValueError(f"categories: invalid category name {name!r} (letters, digits, - and _)")
        if self.to is not None and "@" not in self.to:
            raise ValueError(f"to must be an email address (got {self.to!r})")


class LocalTicketSettings(Model):
    # Who the local ledger reports as the routed group (the embedded environment has no vendor).
    group: str = "vendor support (local)"


class TicketsConfig(Model):
    provider: Literal["local", "zendesk", "jira", "email", "webhook"] = "local"
    vendors: dict[str, VendorTickets] = field(default_factory=dict)
    local: LocalTicketSettings = field(default_factory=LocalTicketSettings)
    zendesk: ZendeskSettings | None = None
    jira: JiraSettings | None = None
    email: EmailSettings | None = None
    webhook: WebhookSettings | None = None
    # A ticket with the same derived idempotency key within this window is the same ticket.
    dedup_window: Duration = Duration("24h")

    def __post_init__(self) -> None:
        if not 60 <= self.dedup_window.seconds <= 30 * 86400:
            raise ValueError("dedup_window must be between 1m and 30d")
        for vendor, route in self.vendors.items():
            name = route.provider or self.provider
            if name != "local" and getattr(self, name) is None:
                raise ValueError(f"vendors.{vendor}: provider {name} needs a tickets.{name} section")
            if name == "email" and not route.to:
                raise ValueError(f"vendors.{vendor}: provider email needs 'to' (the vendor's support address)")
            if name == "jira":
                bad = [c for c, v in route.categories.items() if not v.isdigit()]
                if bad:
                    raise ValueError(
                        f"vendors.{vendor}.categories: with jira each category maps to a numeric request type id"
                        f" ({', '.join(bad)})"
                    )

    def provider_for(self, vendor: str) -> str:
        return self.vendor(vendor).provider or self.provider

    def vendor(self, name: str) -> VendorTickets:
        try:
            return self.vendors[name]
        except KeyError:
            known = ", ".join(sorted(self.vendors)) or "none configured"
            raise ConfigError(f"unknown vendor {name!r} (tickets.vendors: {known})") from None


# -- quality: endpoints the probe calls, thresholds, cost ---------------------------------------
