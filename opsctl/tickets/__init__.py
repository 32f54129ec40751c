"""Vendor support tickets: the TicketProvider protocol (base.py), one channel per file (zendesk,
jira, email, webhook, local), retries and idempotency in desk.py, chosen by registry.py.

Other parts call `opsctl.tickets.registry.open_ticket_provider(cfg, vendor, dry_run=...)`.
"""
