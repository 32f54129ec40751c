"""Strategies for outside input and the one assertion every property test makes."""

from __future__ import annotations

import math

from hypothesis import strategies as st

# YAML/JSON-shaped values: what a config, SLO file, scenario or payload can hold.
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-10**12, max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
    st.sampled_from(["", "0", "-1", "1e309", "28d", "5m", "0s", "-5m", "99.99", "1.5", "Sev2", "page", "all",
                     "internal", "databricks", "embedded", "prometheus", "http://127.0.0.1:1", "ftp://x",
                     "2026-11-26T15:00:00Z", "2026-02-30", "{env: X}", "\x00", "é", "\u2028", "${X}", "~"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)), max_leaves=12)


def mutate(data, draw, *, depth: int = 6):
    """A copy of `data` with one random change somewhere down a random key path: a value replaced,
    a key removed, or an unknown key added. Reaches the deep validation that random documents miss."""
    import copy

    data = copy.deepcopy(data)
    node, path = data, []
    for _ in range(draw(st.integers(min_value=0, max_value=depth))):
        if isinstance(node, dict) and node:
            key = draw(st.sampled_from(sorted(node, key=str)))
        elif isinstance(node, list) and node:
            key = draw(st.integers(min_value=0, max_value=len(node) - 1))
        else:
            break
        if not isinstance(node[key], (dict, list)):
            break
        path.append(key)
        node = node[key]
    action = draw(st.sampled_from(["replace", "delete", "add"]))
    if isinstance(node, dict):
        if action == "add" or not node:
            node[draw(st.text(min_size=1, max_size=12))] = draw(values)
        else:
            key = draw(st.sampled_from(sorted(node, key=str)))
            if action == "delete":
                del node[key]
            else:
                node[key] = draw(values)
    elif isinstance(node, list):
        if action == "add" or not node:
            node.append(draw(values))
        else:
            i = draw(st.integers(min_value=0, max_value=len(node) - 1))
            if action == "delete":
                del node[i]
            else:
                node[i] = draw(values)
    return data


def dump_yaml(data) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def assert_clean(result, *, codes=(0, 2), naming=None):
    """Success, or a one-line `error:` (plus its listed problems and hint) with a documented code."""
    text = result.stdout + result.stderr
    assert "Traceback" not in text, text
    assert result.exit_code in codes, (result.exit_code, text)
    if result.exit_code == 0:
        return
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [i for i, line in enumerate(lines) if line.startswith("error: ")]
    assert errors, result.stderr
    first = errors[0]
    assert len(errors) == 1, result.stderr
    for line in lines[first + 1:]:
        assert line.startswith(("  - ", "  hint: ")), f"not one line: {result.stderr!r}"
    if naming is not None:
        assert naming in result.stderr, (naming, result.stderr)


def finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
