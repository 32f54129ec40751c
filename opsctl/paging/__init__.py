"""Paging on-call: the Pager protocol (base.py), PagerDuty and a local ledger, chosen by registry.py.

Other parts call `opsctl.paging.registry.open_pager(cfg, dry_run=...)`; nothing here imports the
pagerduty client until a PagerDuty request is made.
"""
