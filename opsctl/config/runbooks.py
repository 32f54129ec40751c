"""Runbooks: severities and ticket settings the generated runbooks use."""

from __future__ import annotations

from opsctl.config.types import TicketSeverity, _check_url
from opsctl.model import Model, field

class RunbookSeverities(Model):
    """The ticket severity a runbook files with a vendor, by how bad the situation is."""

    outage: TicketSeverity = "Sev1"  # the vendor's endpoint is down
    page: TicketSeverity = "Sev2"  # a page-level burn: users see errors or slow answers now
    ticket: TicketSeverity = "Sev3"  # a slow burn: the budget runs out in days


class RunbookTickets(Model):
    """Which vendor ticket the runbooks tell on-call to file (mapped through tickets.vendors)."""

    category: str = "inference"  # opsctl category for serving incidents (e.g. inference -> Model Serving)
    auth_category: str | None = None  # 401/403 and token failures; default: category
    capacity_category: str | None = None  # the vendor's throttling (429, 503 with Retry-After); default: category
    severity: RunbookSeverities = field(default_factory=RunbookSeverities)

    def category_for(self, cause: str | None) -> str:
        """The ticket category of an incident by its cause (opsctl.slo.conventions.CAUSES): an auth
        failure (401/403) goes to auth_category, the vendor's throttling (429, 503 with Retry-After) to
        capacity_category, everything else to category."""
        if cause == "auth":
            return self.auth_category or self.category
        if cause == "capacity":
            return self.capacity_category or self.category
        return self.category

    @property
    def categories(self) -> tuple[str, ...]:
        """Every category category_for can answer."""
        return tuple(dict.fromkeys((self.category, self.auth_category or self.category,
                                    self.capacity_category or self.category)))


class RunbooksConfig(Model):
    """Generated runbooks (`opsctl runbook generate|check|list`).

    `base_url` is where the runbooks are published; the alerts' runbook_url links point there, so it
    defaults to alerting.runbook_base_url. `peak_rps` (the whole service's peak request rate) sizes
    the capacity a failover needs; without it the runbooks give the formula and the query instead.
    """

    dir: str = "runbooks"
    base_url: str | None = None
    templates: str = "runbooks/templates"  # overrides of the shipped templates, file by file
    dashboards: dict[str, str] = field(default_factory=dict)  # title -> URL, listed in every runbook
    peak_rps: float | None = None
    golden: str = "golden.jsonl"  # the golden set `opsctl probe consistency` runs in the quality runbook
    tickets: RunbookTickets = field(default_factory=RunbookTickets)

    def __post_init__(self) -> None:
        if self.base_url is not None:
            _check_url("base_url", self.base_url)
        for title, url in self.dashboards.items():
            if not title.strip():
                raise ValueError("dashboards: a dashboard needs a title")
            _check_url(f"dashboards.{title}", url)
        if self.peak_rps is not None and not 0 < self.peak_rps < 1e9:
            raise ValueError("peak_rps must be a positive request rate (requests/s of the whole service)")
        for what, value in (("dir", self.dir), ("templates", self.templates), ("golden", self.golden)):
            if not value.strip():
                raise ValueError(f"{what} must not be empty")
