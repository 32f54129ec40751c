"""The figures and commands a runbook quotes, computed from the config and the alert plans. Pure.

Numbers are computed here rather than in templates so that a template cannot round differently
from the rules, and every command is quoted here, once, so a runbook never shows a command that the
shell or the CLI would read differently from what it says. Nothing here reads files, the clock or
the environment: the same config gives the same facts.
"""

from __future__ import annotations

# The facts, each subject in a module named for what it holds, re-exported here so that the old
# import paths (`from opsctl.runbooks.facts import ...`, `facts.sh`) keep working.

from opsctl.runbooks.budget import Budget, Pair, bad_events, budget_of, pairs_of  # noqa: F401
from opsctl.runbooks.commands import (  # noqa: F401
    _SAFE, _VAR, INCIDENT, PLACEHOLDERS, Commands, PlaceholderError, command, sh,
)
from opsctl.runbooks.escalation import Paging, TicketRoute, paging, ticket_route  # noqa: F401
from opsctl.runbooks.formatting import human_duration, one_in, pct, seconds_text  # noqa: F401
from opsctl.runbooks.moves import (  # noqa: F401
    CapacityNeed, Move, Ramp, capacity_need, normal_split, plan_move, ramp_target, traffic_target,
    vendor_throughput_text,
)
from opsctl.runbooks.queries import (  # noqa: F401
    Query, _sel, backend_queries, outcome_query, peak_query, slo_queries, tokens_query,
)
