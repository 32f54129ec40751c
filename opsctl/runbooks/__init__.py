"""Runbooks generated from the config: one per alert and one per incident scenario.

facts.py offers the figures and commands a runbook quotes (pure; computed by subject in
formatting, commands, budget, queries, moves and escalation), generator.py renders the
Jinja2 templates into {file name: Markdown} (pure, deterministic), writer.py writes and compares
them with a directory. Templates ship in templates/ and can be overridden file by file.
"""
