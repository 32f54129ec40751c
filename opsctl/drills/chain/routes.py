"""Which receivers an Alertmanager routing tree sends an alert to, and after which group_wait: the
chain drill's prediction of when serve receives the page (drills/prediction.py, response_hops).

Alertmanager's own rule: from the root, the children are tried in order; a child whose matchers
all hold takes the alert (and its children are tried in turn), and the siblings after it are tried
only when it says `continue: true`; a node none of whose children matched is where the alert goes.
Settings a route does not give (group_wait, receiver) are its parent's. Matchers are the
`matchers` list (`name="v"`, `!=`, `=~`, `!~`, regexes fully anchored) and the older `match` and
`match_re` maps.
"""

from __future__ import annotations

import re

_MATCHER = re.compile(r'^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"?(.*?)"?\s*$')


def _holds(matcher: str, labels: dict[str, str]) -> bool:
    found = _MATCHER.match(matcher)
    if found is None:
        raise ValueError(f"not an Alertmanager matcher: {matcher!r}")
    name, op, value = found.groups()
    have = labels.get(name, "")
    if op == "=":
        return have == value
    if op == "!=":
        return have != value
    hit = re.fullmatch(value, have) is not None
    return hit if op == "=~" else not hit


def _matches(route: dict, labels: dict[str, str]) -> bool:
    return (all(_holds(m, labels) for m in route.get("matchers") or [])
            and all(labels.get(k, "") == str(v) for k, v in (route.get("match") or {}).items())
            and all(re.fullmatch(str(v), labels.get(k, "")) for k, v in (route.get("match_re") or {}).items()))


def receivers_for(route: dict, labels: dict[str, str], *, inherited: dict | None = None) -> list[tuple[str, float]]:
    """(receiver, group_wait seconds) for every route the alert `labels` ends at, in tree order."""
    from opsctl.clock import parse_duration

    settings = dict(inherited or {"receiver": None, "group_wait": 30.0})
    if route.get("receiver") is not None:
        settings["receiver"] = route["receiver"]
    if route.get("group_wait") is not None:
        settings["group_wait"] = float(parse_duration(str(route["group_wait"])))
    out: list[tuple[str, float]] = []
    for child in route.get("routes") or []:
        if not _matches(child, labels):
            continue
        out += receivers_for(child, labels, inherited=settings)
        if not child.get("continue", False):
            break
    if not out and settings["receiver"] is not None:
        out.append((settings["receiver"], settings["group_wait"]))
    return out


__all__ = ["receivers_for"]
